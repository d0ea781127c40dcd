package domainprooftest_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/kitd/kitd/internal/domainproof/domainprooftest"
)

func TestDNSServerAnswers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("v", 600) // over one 255-byte character-string
	tests := []struct {
		name     string
		set      map[string][]string
		lookup   string
		want     []string
		notFound bool
	}{
		{"a set name answers its TXT records", map[string][]string{"a.example.com": {"x", "y"}}, "a.example.com", []string{"x", "y"}, false},
		{"names are case-insensitive, trailing dot optional", map[string][]string{"A.Example.com.": {"x"}}, "a.EXAMPLE.com", []string{"x"}, false},
		{"a value over 255 bytes comes back whole", map[string][]string{"a.example.com": {long}}, "a.example.com", []string{long}, false},
		{"an unknown name is NXDOMAIN", map[string][]string{"a.example.com": {"x"}}, "b.example.com", nil, true},
		{"SetTXT without values removes the name", map[string][]string{"a.example.com": nil}, "a.example.com", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := domainprooftest.NewDNSServer(t)
			s.SetTXT("a.example.com", "old")
			for name, values := range tt.set {
				s.SetTXT(name, values...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			got, err := resolver(s).LookupTXT(ctx, tt.lookup+".")
			var dnsErr *net.DNSError
			switch {
			case tt.notFound && !(errors.As(err, &dnsErr) && dnsErr.IsNotFound):
				t.Errorf("LookupTXT(%s) = %q, %v; want not found", tt.lookup, got, err)
			case !tt.notFound && (err != nil || !slices.Equal(got, tt.want)):
				t.Errorf("LookupTXT(%s) = %q, %v; want %q", tt.lookup, got, err, tt.want)
			}
		})
	}
}

func TestDNSServerRcodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		qname   string
		qtype   dnsmessage.Type
		rcode   dnsmessage.RCode
		answers int
	}{
		{"a TXT query of a set name answers its records", "a.example.com.", dnsmessage.TypeTXT, dnsmessage.RCodeSuccess, 2},
		{"another type of a set name answers no records", "a.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 0},
		{"an unknown name is NXDOMAIN", "b.example.com.", dnsmessage.TypeTXT, dnsmessage.RCodeNameError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := domainprooftest.NewDNSServer(t)
			s.SetTXT("a.example.com", "x", "y")
			h, answers := exchange(t, s, tt.qname, tt.qtype)
			// Go's resolver takes an empty answer that is neither
			// authoritative nor recursive for a lame referral.
			if h.RCode != tt.rcode || len(answers) != tt.answers || !h.Response || !h.Authoritative || !h.RecursionAvailable {
				t.Errorf("answer %+v with %d records; want rcode %v, %d records, authoritative", h, len(answers), tt.rcode, tt.answers)
			}
		})
	}
}

// exchange sends one query to s and returns the answer's header and records.
func exchange(t *testing.T, s *domainprooftest.DNSServer, name string, typ dnsmessage.Type) (dnsmessage.Header, []dnsmessage.Resource) {
	t.Helper()
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}},
	}
	b, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	if m.ID != 7 {
		t.Fatalf("answer id %d, want the query's 7", m.ID)
	}
	return m.Header, m.Answers
}

func resolver(s *domainprooftest.DNSServer) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, s.Addr())
	}}
}
