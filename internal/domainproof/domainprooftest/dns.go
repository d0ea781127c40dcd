// Package domainprooftest holds the servers that stand in for a Kit's DNS zone and
// HTTPS origin in tests of domain verification: a UDP DNS server answering
// TXT queries from a map, and a TLS server with its own CA serving the
// well-known proof file. Both live on loopback ports and close themselves
// when the test ends.
//
// It is for tests only (including e2e, which starts kitd with
// `--verify-dns`, `--verify-resolve` and `--verify-ca` pointed here); it never
// checks a proof itself, that is package domainproof's job.
package domainprooftest

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// maxUDPAnswer is the EDNS(0) payload size Go's resolver (and dig) offer; a
// longer answer is sent truncated, with no records.
const maxUDPAnswer = 1232

// maxTXTString is the length bound of one DNS character-string; a longer
// value is split across several strings of one record, which resolvers join
// again.
const maxTXTString = 255

// DNSServer is a UDP DNS server on 127.0.0.1. A name set with SetTXT answers
// its TXT records to TXT queries and no records to other types; any other
// name answers NXDOMAIN. It is safe for concurrent use.
type DNSServer struct {
	conn net.PacketConn
	done chan struct{}

	mu  sync.Mutex
	txt map[string][]string // by lowercase name without the trailing dot
}

// NewDNSServer starts a DNSServer that t's cleanup stops.
func NewDNSServer(t testing.TB) *DNSServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("domainprooftest: listen for DNS: %v", err)
	}
	s := &DNSServer{conn: conn, done: make(chan struct{}), txt: map[string][]string{}}
	go s.serve()
	t.Cleanup(func() {
		conn.Close()
		<-s.done
	})
	return s
}

// Addr is the server's "127.0.0.1:port", for domainproof.Config.DNSServer or
// `kitd serve --verify-dns`.
func (s *DNSServer) Addr() string { return s.conn.LocalAddr().String() }

// SetTXT replaces the TXT records of name (case-insensitive, trailing dot
// optional), one record per value. With no values the name no longer exists.
func (s *DNSServer) SetTXT(name string, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(values) == 0 {
		delete(s.txt, canonicalName(name))
		return
	}
	s.txt[canonicalName(name)] = append([]string(nil), values...)
}

func canonicalName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

func (s *DNSServer) serve() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if resp, ok := s.answer(buf[:n]); ok {
			// A lost answer is what UDP does; the client retries or times out.
			_, _ = s.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query; ok is false for a packet that is
// not a query with a question, which a real server would drop too.
func (s *DNSServer) answer(query []byte) (resp []byte, ok bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	msg := dnsmessage.Message{
		Header: dnsmessage.Header{
			ID:               h.ID,
			Response:         true,
			OpCode:           h.OpCode,
			Authoritative:    true,
			RecursionDesired: h.RecursionDesired,
			// Go's resolver takes a non-authoritative, non-recursive empty
			// answer for a lame referral; this server is both.
			RecursionAvailable: true,
		},
		Questions: []dnsmessage.Question{q},
	}
	s.mu.Lock()
	values, known := s.txt[canonicalName(q.Name.String())]
	s.mu.Unlock()
	switch {
	case !known:
		msg.Header.RCode = dnsmessage.RCodeNameError
	case q.Type == dnsmessage.TypeTXT:
		for _, v := range values {
			msg.Answers = append(msg.Answers, dnsmessage.Resource{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeTXT, Class: q.Class, TTL: 60},
				Body:   &dnsmessage.TXTResource{TXT: splitTXT(v)},
			})
		}
	}
	resp, err = msg.Pack()
	if err != nil {
		return nil, false
	}
	if len(resp) > maxUDPAnswer {
		msg.Header.Truncated = true
		msg.Answers = nil
		if resp, err = msg.Pack(); err != nil {
			return nil, false
		}
	}
	return resp, true
}

func splitTXT(v string) []string {
	parts := []string{}
	for len(v) > maxTXTString {
		parts = append(parts, v[:maxTXTString])
		v = v[maxTXTString:]
	}
	return append(parts, v)
}
