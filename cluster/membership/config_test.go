package membership

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestGossipKey(t *testing.T) {
	t.Run("the key is HKDF-SHA256 of the secret with kitd's info string", func(t *testing.T) {
		// Computed apart from Go (Python's hmac, RFC 5869 with no salt):
		// nodes of every kitd version must derive the same key.
		const want = "85a03d586af8564ce586a1773593e1abeb802c4fa74bb768c23e191af142495a"
		k, err := gossipKey("correct horse battery staple")
		if err != nil || hex.EncodeToString(k) != want {
			t.Fatalf("gossipKey = %x, %v; want %s", k, err, want)
		}
	})
	t.Run("a secret of any length gives an AES-256 key", func(t *testing.T) {
		for _, s := range []string{"x", strings.Repeat("long", 100)} {
			if k, err := gossipKey(s); err != nil || len(k) != 32 {
				t.Fatalf("gossipKey of %d bytes = %d bytes, %v", len(s), len(k), err)
			}
		}
	})
}

func TestConfigCheck(t *testing.T) {
	ok := func() Config { return Config{NodeName: "n1", BindAddr: "127.0.0.1:0"} }
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want error
	}{
		{"a loopback bind may gossip in plaintext", func(*Config) {}, nil},
		{"an IPv6 loopback bind may gossip in plaintext", func(c *Config) { c.BindAddr = "[::1]:7946" }, nil},
		{"a bind beyond loopback needs a cluster key", func(c *Config) { c.BindAddr = "0.0.0.0:7946" }, ErrKeyRequired},
		{"a bind beyond loopback with a key is allowed", func(c *Config) { c.BindAddr, c.ClusterKey = "10.0.0.1:7946", "s" }, nil},
		{"a node name is required", func(c *Config) { c.NodeName = "" }, ErrConfig},
		{"a node name over 128 bytes is refused", func(c *Config) { c.NodeName = strings.Repeat("n", maxNodeName+1) }, ErrConfig},
		{"a bind address needs a port", func(c *Config) { c.BindAddr = "127.0.0.1" }, ErrConfig},
		{"a bind port over 65535 is refused", func(c *Config) { c.BindAddr = "127.0.0.1:65536" }, ErrConfig},
		{"a bind host must be an IP address", func(c *Config) { c.BindAddr = "localhost:7946" }, ErrConfig},
		{"a seed needs a port", func(c *Config) { c.Join = []string{"127.0.0.1"} }, ErrConfig},
		{"an advertise address needs a port", func(c *Config) { c.AdvertiseAddr = "127.0.0.1" }, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			if _, err := c.check(); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("check = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTimingByBind(t *testing.T) {
	for _, tc := range []struct {
		name string
		host string
		want Timing
	}{
		{"a loopback bind gets the local timing", "127.0.0.1", LocalTiming()},
		{"any other bind gets the LAN timing", "0.0.0.0", LANTiming()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&Config{}).timing(tc.host); got != tc.want {
				t.Fatalf("timing = %+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("a given timing is kept", func(t *testing.T) {
		c := Config{Timing: Timing{ProbeInterval: 7}}
		if got := c.timing("127.0.0.1"); got != c.Timing {
			t.Fatalf("timing = %+v, want the given one", got)
		}
	})
}
