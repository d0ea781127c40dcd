package domainproof_test

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/domainproof"
)

func TestNormalizeDomainRules(t *testing.T) {
	t.Parallel()
	l63 := strings.Repeat("a", 63)
	// 63+1+63+1+63+1+61 = 253 characters.
	n253 := l63 + "." + l63 + "." + l63 + "." + strings.Repeat("b", 61)
	tests := []struct {
		name string
		in   string
		want string
		ok   bool
	}{
		{"uppercase is folded to lowercase", "Kit.Example.COM", "kit.example.com", true},
		{"labels of a-z 0-9 and hyphen are accepted", "a-1.b2.example.com", "a-1.b2.example.com", true},
		{"a label starting with a hyphen is refused", "-a.example.com", "", false},
		{"a label ending with a hyphen is refused", "a-.example.com", "", false},
		{"a label of 63 characters is accepted", l63 + ".com", l63 + ".com", true},
		{"a label of 64 characters is refused", l63 + "a.com", "", false},
		{"a name of 253 characters is accepted", n253, n253, true},
		{"a name of 254 characters is refused", n253 + "b", "", false},
		{"a trailing dot is refused", "example.com.", "", false},
		{"an empty label is refused", "a..example.com", "", false},
		{"a leading dot is refused", ".example.com", "", false},
		{"an IPv4 literal is refused", "192.168.0.1", "", false},
		{"an IPv6 literal is refused", "::1", "", false},
		{"a bracketed IPv6 literal is refused", "[2001:db8::1]", "", false},
		{"a single label is refused", "localhost", "", false},
		{"an all-numeric last label is refused", "example.123", "", false},
		{"a last label mixing digits and letters is accepted", "example.1a", "example.1a", true},
		{"an underscore is refused", "_kit-challenge.example.com", "", false},
		{"empty is refused", "", "", false},
		{"punycode labels are accepted", "xn--bcher-kva.example", "xn--bcher-kva.example", true},
		{"non-ASCII is refused", "bücher.example", "", false},
		{"the Kelvin sign is not folded to k", "\u212Aitd.example", "", false},
		{"a space is refused", "exa mple.com", "", false},
		{"a port is refused", "example.com:443", "", false},
		{"a path is refused", "example.com/x", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := domainproof.NormalizeDomain(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("NormalizeDomain(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCoversRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, domain, host string
		want               bool
	}{
		{"a domain covers itself", "example.com", "example.com", true},
		{"a domain covers a subdomain", "example.com", "api.example.com", true},
		{"a domain covers a deep subdomain", "example.com", "a.b.example.com", true},
		{"a domain does not cover its parent", "api.example.com", "example.com", false},
		{"a domain does not cover a sibling", "api.example.com", "www.example.com", false},
		{"a shared suffix without a dot is not a subdomain", "example.com", "badexample.com", false},
		{"a host containing the domain before its end is not covered", "example.com", "example.com.evil.net", false},
		{"case is ignored on both sides", "Example.com", "API.EXAMPLE.COM", true},
		{"a trailing dot on the host is the same name", "example.com", "api.example.com.", true},
		{"an IPv4 host is never covered", "example.com", "127.0.0.1", false},
		{"an IPv6 host is never covered", "example.com", "[::1]", false},
		{"an IPv6 literal whose zone ends in the domain is never covered", "example.com", "fe80::1%x.example.com", false},
		{"a single-label domain covers nothing", "com", "example.com", false},
		{"an empty domain covers nothing", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := domainproof.Covers(tt.domain, tt.host); got != tt.want {
				t.Errorf("Covers(%q, %q) = %v, want %v", tt.domain, tt.host, got, tt.want)
			}
		})
	}
}
