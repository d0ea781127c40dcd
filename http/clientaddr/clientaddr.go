// Package clientaddr says which address a request comes from: its TCP
// peer's, or, when that peer is a proxy the operator trusts
// (--trusted-proxies), the client that the proxies' X-Forwarded-For
// headers name. It is the only place the front end derives a client
// address: the per-address buckets and the request lines take what it
// says. It never trusts a header from a peer outside the trusted list,
// so a forged X-Forwarded-For from the internet changes nothing.
package clientaddr

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"unsafe"
)

// Trusted is the set of proxies whose X-Forwarded-For is believed. The zero
// value and nil trust nobody.
type Trusted struct {
	prefixes []netip.Prefix
}

// Parse reads a comma-separated list of CIDRs; a bare address stands for
// itself alone (/32 or /128). An empty list trusts nobody.
func Parse(list string) (*Trusted, error) {
	t := &Trusted{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parsePrefix(item)
		if err != nil {
			return nil, err
		}
		t.prefixes = append(t.prefixes, p)
	}
	return t, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an address", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %w", s, err)
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared unmapped.
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Len is how many prefixes t trusts.
func (t *Trusted) Len() int {
	if t == nil {
		return 0
	}
	return len(t.prefixes)
}

// Contains reports whether a is a trusted proxy's address.
func (t *Trusted) Contains(a netip.Addr) bool {
	if t == nil {
		return false
	}
	a = a.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address a request from peer comes from, given the values
// of its X-Forwarded-For headers in the order received. From a peer that
// is not trusted it is the peer, whatever the headers say. From a trusted
// one, the entries are read from the right (each proxy appends the address
// it was reached from) and the first one that is not itself a trusted
// proxy is the client: every entry left of it was written by a client that
// could write anything. When every entry is trusted, the leftmost is. An
// entry that is not an address ends the walk at the last good one (or the
// peer): nothing left of it can be told apart from a forgery.
//
// It allocates nothing.
func (t *Trusted) Client(peer netip.Addr, forwarded [][]byte) netip.Addr {
	peer = peer.Unmap()
	if !t.Contains(peer) {
		return peer
	}
	client := peer
	for i := len(forwarded) - 1; i >= 0; i-- {
		list := forwarded[i]
		for len(list) > 0 {
			var entry []byte
			if j := bytes.LastIndexByte(list, ','); j >= 0 {
				entry, list = list[j+1:], list[:j]
			} else {
				entry, list = list, nil
			}
			entry = bytes.TrimSpace(entry)
			if len(entry) == 0 {
				continue // "a, , b" or a trailing comma: no entry at all
			}
			a, ok := parseEntry(entry)
			if !ok {
				return client
			}
			client = a
			if !t.Contains(a) {
				return a
			}
		}
	}
	return client
}

// parseEntry reads one X-Forwarded-For entry: an address, or, as some
// proxies write it, an address and port ("192.0.2.1:4711",
// "[2001:db8::1]:443", "[2001:db8::1]"). A zone is dropped: it means
// nothing off the proxy's host.
func parseEntry(b []byte) (netip.Addr, bool) {
	// Not copied: netip keeps nothing of its input (a zone is cloned by
	// unique.Make, and dropped here anyway).
	s := unsafe.String(unsafe.SliceData(b), len(b))
	a, err := netip.ParseAddr(s)
	if err != nil {
		if ap, err2 := netip.ParseAddrPort(s); err2 == nil {
			a = ap.Addr()
		} else if n := len(s); n > 2 && s[0] == '[' && s[n-1] == ']' {
			if a, err = netip.ParseAddr(s[1 : n-1]); err != nil {
				return netip.Addr{}, false
			}
		} else {
			return netip.Addr{}, false
		}
	}
	return a.Unmap().WithZone(""), true
}
