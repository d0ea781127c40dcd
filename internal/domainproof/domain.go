package domainproof

import (
	"net/netip"
	"strings"
)

// Bounds of a DNS name (RFC 1035), as the contract states them.
const (
	maxDomainLen = 253
	maxLabelLen  = 63
)

// NormalizeDomain folds s to lowercase and reports whether it is a domain the
// contract accepts: at most 253 characters, at least two labels of 1-63
// characters from a-z 0-9 -, none starting or ending with -, the last not all
// digits (so no IPv4 literal), no trailing dot. Punycode (xn--) labels are
// plain labels. Only ASCII is folded: strings.ToLower would turn the Kelvin
// sign into "k" and let a non-ASCII name pass as an ASCII one.
func NormalizeDomain(s string) (string, bool) {
	if len(s) == 0 || len(s) > maxDomainLen {
		return "", false
	}
	d := asciiLower(s)
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if !validLabel(l) {
			return "", false
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", false
	}
	return d, true
}

func validLabel(l string) bool {
	if len(l) == 0 || len(l) > maxLabelLen || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Covers reports whether the verified domain covers host: host is the domain
// itself or a subdomain of it, compared case-insensitively. An IP-literal
// host is never covered, and a string that is not a valid domain covers
// nothing. One trailing dot on host is accepted: "api.example.com." is the
// same DNS name as "api.example.com".
func Covers(domain, host string) bool {
	d, ok := NormalizeDomain(domain)
	if !ok {
		return false
	}
	h := strings.TrimSuffix(asciiLower(host), ".")
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return false
	}
	// The dot before the domain is what keeps "badexample.com" out of
	// "example.com".
	return h == d || strings.HasSuffix(h, "."+d)
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
