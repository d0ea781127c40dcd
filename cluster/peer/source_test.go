package peer

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kitd/kitd/proto/kitpb"
)

// A node's connections leave from the address it listens on, so that the
// network (a firewall, the e2e tests' partition proxy) sees one address
// per member in both directions.
func TestDialedConnectionsLeaveFromTheListenHost(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		listen string
		want   string
	}{
		{"a node listening on one address dials from it", "127.0.0.2:0", "127.0.0.2"},
		{"a node listening on every interface lets the system choose", "0.0.0.0:0", "127.0.0.1"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			// Not a member: it only notes who connects.
			ln, err := net.Listen("tcp", "127.0.0.3:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			from := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				from <- c.RemoteAddr().(*net.TCPAddr).IP.String()
				c.Close()
			}()
			a := start(t, "a", func(c *Config) { c.ListenAddr = tc.listen })
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, _ = a.Call(ctx, ln.Addr().String(), &kitpb.GetUser{}, "r") // its handshake fails
			select {
			case got := <-from:
				if got != tc.want {
					t.Errorf("the connection came from %s, want %s", got, tc.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no connection came")
			}
		})
	}
}
