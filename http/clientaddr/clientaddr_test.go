package clientaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClient(t *testing.T) {
	trusted, err := Parse("10.0.0.0/8, 192.0.2.1, 2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rule    string
		trusted *Trusted
		peer    string
		headers []string
		want    string
	}{
		{"with no trusted proxies the peer is the client", nil, "10.1.1.1", []string{"203.0.113.7"}, "10.1.1.1"},
		{"an untrusted peer's header is ignored", trusted, "198.51.100.9", []string{"203.0.113.7"}, "198.51.100.9"},
		{"a trusted peer without the header is the client", trusted, "10.1.1.1", nil, "10.1.1.1"},
		{"a trusted peer with an empty header is the client", trusted, "10.1.1.1", []string{" "}, "10.1.1.1"},
		{"a trusted peer, single hop: the header's address", trusted, "10.1.1.1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"a bare trusted address is trusted alone", trusted, "192.0.2.1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"its neighbour is not", trusted, "192.0.2.2", []string{"203.0.113.7"}, "192.0.2.2"},
		{"the rightmost untrusted entry is the client, whatever the client wrote left of it", trusted, "10.1.1.1",
			[]string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"trusted hops are skipped from the right", trusted, "10.1.1.1",
			[]string{"198.51.100.1, 203.0.113.7, 10.2.2.2, 192.0.2.1"}, "203.0.113.7"},
		{"several headers are one list in order", trusted, "10.1.1.1",
			[]string{"198.51.100.1, 203.0.113.7", "10.2.2.2", "192.0.2.1"}, "203.0.113.7"},
		{"whitespace around entries is ignored", trusted, "10.1.1.1", []string{"  203.0.113.7\t,\t10.2.2.2  "}, "203.0.113.7"},
		{"empty entries are skipped", trusted, "10.1.1.1", []string{"203.0.113.7, ,10.2.2.2,"}, "203.0.113.7"},
		{"when every entry is trusted the leftmost is the client", trusted, "10.1.1.1",
			[]string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"a garbage entry ends the walk at the last good entry", trusted, "10.1.1.1",
			[]string{"203.0.113.7, unknown, 10.2.2.2"}, "10.2.2.2"},
		{"a garbage rightmost entry leaves the peer", trusted, "10.1.1.1", []string{"203.0.113.7, not-an-ip"}, "10.1.1.1"},
		{"an address with a port is read", trusted, "10.1.1.1", []string{"203.0.113.7:4711"}, "203.0.113.7"},
		{"an IPv6 entry is read", trusted, "10.1.1.1", []string{"2001:db8::7"}, "2001:db8::7"},
		{"a bracketed IPv6 entry with a port is read", trusted, "10.1.1.1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"a bracketed IPv6 entry is read", trusted, "10.1.1.1", []string{"[2001:db8::7]"}, "2001:db8::7"},
		{"an IPv6 zone is dropped", trusted, "10.1.1.1", []string{"fe80::1%eth0"}, "fe80::1"},
		{"an IPv4-mapped entry is IPv4", trusted, "10.1.1.1", []string{"::ffff:203.0.113.7"}, "203.0.113.7"},
		{"an IPv6 trusted peer", trusted, "2001:db8:ffff::1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"an IPv4-mapped trusted peer", trusted, "::ffff:10.1.1.1", []string{"203.0.113.7"}, "203.0.113.7"},
		{"an IPv4-mapped untrusted peer is IPv4", trusted, "::ffff:198.51.100.9", []string{"203.0.113.7"}, "198.51.100.9"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var headers [][]byte
			for _, h := range tt.headers {
				headers = append(headers, []byte(h))
			}
			got := tt.trusted.Client(netip.MustParseAddr(tt.peer), headers)
			if got != netip.MustParseAddr(tt.want) {
				t.Errorf("client %v, want %s", got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		rule    string
		list    string
		ok      bool
		in, out string // an address trusted, one not ("" to skip)
	}{
		{"an empty list trusts nobody", "", true, "", "127.0.0.1"},
		{"a CIDR trusts its addresses", "127.0.0.0/8", true, "127.9.9.9", "128.0.0.1"},
		{"a CIDR with host bits set is its network", "10.1.2.3/8", true, "10.200.0.1", "11.0.0.1"},
		{"a bare IPv4 address is a /32", "192.0.2.1", true, "192.0.2.1", "192.0.2.2"},
		{"a bare IPv6 address is a /128", "2001:db8::1", true, "2001:db8::1", "2001:db8::2"},
		{"an IPv6 CIDR", "2001:db8::/32", true, "2001:db8:1::1", "2001:db9::1"},
		{"an IPv4-mapped CIDR is its IPv4 one", "::ffff:10.0.0.0/104", true, "10.9.9.9", "11.0.0.1"},
		{"several, with spaces", " 10.0.0.0/8 , 192.0.2.1 ", true, "192.0.2.1", "192.0.2.2"},
		{"a prefix too long is refused", "10.0.0.0/33", false, "", ""},
		{"a name is refused", "proxy.example", false, "", ""},
		{"a zone is refused", "fe80::1%eth0", false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			tr, err := Parse(tt.list)
			if (err == nil) != tt.ok {
				t.Fatalf("Parse(%q): %v, want ok=%v", tt.list, err, tt.ok)
			}
			if err != nil {
				if !strings.Contains(err.Error(), strings.TrimSpace(tt.list)) {
					t.Errorf("error %q does not name the entry", err)
				}
				return
			}
			if tt.in != "" && !tr.Contains(netip.MustParseAddr(tt.in)) {
				t.Errorf("%s is not trusted", tt.in)
			}
			if tt.out != "" && tr.Contains(netip.MustParseAddr(tt.out)) {
				t.Errorf("%s is trusted", tt.out)
			}
		})
	}
}

// The check of every request from a peer that is no proxy costs no
// allocation.
func TestClientAllocatesNothing(t *testing.T) {
	tr, _ := Parse("10.0.0.0/8")
	peer := netip.MustParseAddr("198.51.100.9")
	h := [][]byte{[]byte("203.0.113.7")}
	if n := testing.AllocsPerRun(100, func() { tr.Client(peer, h) }); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
	proxy := netip.MustParseAddr("10.1.1.1")
	if n := testing.AllocsPerRun(100, func() { tr.Client(proxy, h) }); n != 0 {
		t.Fatalf("from a proxy: %v allocations, want 0", n)
	}
}

// What deriving a request's client costs, from a peer that is no proxy
// (every request without --trusted-proxies) and through two proxies:
//
//	go test ./http/clientaddr/ -run '^$' -bench Client
func BenchmarkClient(b *testing.B) {
	tr, _ := Parse("10.0.0.0/8, 192.0.2.1")
	h := [][]byte{[]byte("198.51.100.1, 203.0.113.7, 10.2.2.2")}
	for _, c := range []struct{ name, peer string }{{"untrusted", "198.51.100.9"}, {"trusted", "10.1.1.1"}} {
		peer := netip.MustParseAddr(c.peer)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				tr.Client(peer, h)
			}
		})
	}
}

// Whatever the headers hold, Client returns the peer or an address the
// headers name, without a zone and unmapped, and the peer itself when it
// is not trusted.
func FuzzClient(f *testing.F) {
	f.Add("10.1.1.1", "198.51.100.1, 203.0.113.7, 10.2.2.2", "192.0.2.1")
	f.Add("198.51.100.9", "203.0.113.7", "")
	f.Add("10.1.1.1", "[2001:db8::7]:443, fe80::1%eth0,, unknown", "::ffff:10.0.0.1")
	tr, _ := Parse("10.0.0.0/8, 192.0.2.1, 2001:db8:ffff::/48")
	f.Fuzz(func(t *testing.T, peer, h1, h2 string) {
		p, err := netip.ParseAddr(peer)
		if err != nil || p.Zone() != "" {
			return
		}
		got := tr.Client(p, [][]byte{[]byte(h1), []byte(h2)})
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %v", got)
		}
		if !tr.Contains(p) && got != p.Unmap() {
			t.Fatalf("an untrusted peer %v became %v", p, got)
		}
		if got == p.Unmap() {
			return
		}
		for _, e := range strings.Split(h1+","+h2, ",") {
			if a, ok := parseEntry([]byte(strings.TrimSpace(e))); ok && a == got {
				return
			}
		}
		t.Fatalf("client %v is neither the peer nor an entry of %q, %q", got, h1, h2)
	})
}
