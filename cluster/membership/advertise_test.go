package membership

import (
	"testing"

	"github.com/kitd/kitd/internal/eventually"
)

// A node that listens on every interface (--listen 0.0.0.0:8080, or a
// --peer-listen that defaults to a --cluster-bind of 0.0.0.0) published
// that wildcard, and the others dialed 0.0.0.0: on another machine, their
// own. Such an address is published with the host gossip advertises; one
// address is published as it is.
func TestAnAddressOnEveryInterfaceIsPublishedWithTheGossipHost(t *testing.T) {
	for _, tc := range []struct{ name, addr, want string }{
		{"ipv4 wildcard", "0.0.0.0:4000", "127.0.0.1:4000"},
		{"ipv6 wildcard", "[::]:4000", "127.0.0.1:4000"},
		{"no host", ":4000", "127.0.0.1:4000"},
		{"one address stays", "127.0.0.5:4000", "127.0.0.5:4000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startNode(t, "a", func(c *Config) { c.Meta.PeerAddr, c.Meta.HTTPAddr = tc.addr, tc.addr })
			if got := a.Local(); got.PeerAddr != tc.want || got.HTTPAddr != tc.want {
				t.Fatalf("a publishes peer %q, http %q; want %q", got.PeerAddr, got.HTTPAddr, tc.want)
			}
			b := startNode(t, "b", joining(a.Addr()))
			eventually.TrueWithin(t, convergeWithin, "b sees a's addresses", func() bool {
				mb, ok := b.node("a")
				return ok && mb.Meta.PeerAddr == tc.want && mb.Meta.HTTPAddr == tc.want
			})
		})
	}
}
