package domainproof_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/domainproof"
	"github.com/kitd/kitd/internal/domainproof/domainprooftest"
)

const domain = "kit.example.com"

func TestCheckDNSThroughADNSServer(t *testing.T) {
	t.Parallel()
	host, value := "_kit-challenge."+domain, "kit-verification="+challenge
	tests := []struct {
		name    string
		records map[string][]string
		wantErr error
	}{
		{"a TXT record with the value proves the domain", map[string][]string{host: {value}}, nil},
		{"the value among several TXT records proves the domain",
			map[string][]string{host: {"v=spf1 -all", value, "google-site-verification=x"}}, nil},
		{"an absent name is a missing proof", nil, domainproof.ErrProofNotFound},
		{"a wrong value is a missing proof", map[string][]string{host: {"kit-verification=other"}}, domainproof.ErrProofNotFound},
		{"the value in another case is a missing proof",
			map[string][]string{host: {"kit-verification=" + strings.ToUpper(challenge)}}, domainproof.ErrProofNotFound},
		{"the value on the domain itself is a missing proof", map[string][]string{domain: {value}}, domainproof.ErrProofNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dns := domainprooftest.NewDNSServer(t)
			for name, values := range tt.records {
				dns.SetTXT(name, values...)
			}
			c := domainproof.New(domainproof.Config{DNSServer: dns.Addr(), Timeout: 2 * time.Second})
			checkErr(t, c.CheckDNS(context.Background(), kitID, domain, challenge), tt.wantErr)
		})
	}
}

func TestCheckDNSAbsentNameKeepsNotFoundCause(t *testing.T) {
	t.Parallel()
	dns := domainprooftest.NewDNSServer(t)
	c := domainproof.New(domainproof.Config{DNSServer: dns.Addr(), Timeout: 2 * time.Second})
	err := c.CheckDNS(context.Background(), kitID, domain, challenge)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("err = %v, want a not-found *net.DNSError in the chain", err)
	}
}

func TestCheckDNSLookupIsBoundedByTimeout(t *testing.T) {
	t.Parallel()
	// A server that reads queries and never answers.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	c := domainproof.New(domainproof.Config{DNSServer: silent.LocalAddr().String(), Timeout: 200 * time.Millisecond})
	start := time.Now()
	err = c.CheckDNS(context.Background(), kitID, domain, challenge)
	if !errors.Is(err, domainproof.ErrProofNotFound) {
		t.Errorf("err = %v, want ErrProofNotFound", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("lookup took %v with a 200ms timeout", d)
	}
}

func TestCheckWellKnownThroughAnHTTPSServer(t *testing.T) {
	t.Parallel()
	good := `{"kitId":"` + kitID + `","token":"` + challenge + `"}`
	tests := []struct {
		name      string
		certFor   string // the server certificate's name; "" = domain
		untrusted bool   // RootCAs nil: the system roots only
		timeout   time.Duration
		setup     func(s *domainprooftest.WellKnownServer)
		wantErr   error
		wantReqs  int // requests the server must have seen; -1 = any
	}{
		{name: "200 with the kitId and token proves the domain",
			setup: set(200, good), wantReqs: 1},
		{name: "other keys are ignored",
			setup: set(200, `{"note":"hi","token":"`+challenge+`","kitId":"`+kitID+`","n":[1]}`), wantReqs: 1},
		{name: "a body of exactly 4 KiB is read",
			setup: set(200, padded(good, 4096)), wantReqs: 1},
		{name: "a wrong token is refused",
			setup: set(200, `{"kitId":"`+kitID+`","token":"other"}`), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a wrong kitId is refused",
			setup: set(200, `{"kitId":"00000000-0000-0000-0000-000000000000","token":"`+challenge+`"}`), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "404 is refused even with the proof as body",
			setup: set(404, good), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a status other than 200 is refused",
			setup: set(201, good), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a redirect is not followed",
			setup: func(s *domainprooftest.WellKnownServer) {
				s.Set(200, good)
				s.SetRedirect("/moved")
			},
			wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a body over 4 KiB is refused",
			setup: set(200, padded(good, 4097)), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a body that is not JSON is refused",
			setup: set(200, "kit-verification="+challenge), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a JSON array is refused",
			setup: set(200, "["+good+"]"), wantErr: domainproof.ErrProofNotFound, wantReqs: 1},
		{name: "a certificate from an untrusted CA is refused",
			untrusted: true, setup: set(200, good), wantErr: x509.UnknownAuthorityError{}, wantReqs: 0},
		{name: "a certificate for another name is refused",
			certFor: "other.example.com", setup: set(200, good), wantErr: x509.HostnameError{}, wantReqs: 0},
		{name: "an answer slower than Timeout is refused",
			timeout: 200 * time.Millisecond,
			setup: func(s *domainprooftest.WellKnownServer) {
				s.Set(200, good)
				s.SetDelay(10 * time.Second)
			},
			wantErr: domainproof.ErrProofNotFound, wantReqs: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			certFor := tt.certFor
			if certFor == "" {
				certFor = domain
			}
			s := domainprooftest.NewWellKnownServer(t, certFor)
			tt.setup(s)
			cfg := domainproof.Config{Resolve: resolveTo(t, s), RootCAs: s.CAPool(), Timeout: tt.timeout}
			if tt.untrusted {
				cfg.RootCAs = nil
			}
			if cfg.Timeout == 0 {
				cfg.Timeout = 3 * time.Second
			}
			start := time.Now()
			err := domainproof.New(cfg).CheckWellKnown(context.Background(), kitID, domain, challenge)
			checkErrAs(t, err, tt.wantErr)
			if tt.wantReqs >= 0 && s.Requests() != tt.wantReqs {
				t.Errorf("server saw %d requests, want %d", s.Requests(), tt.wantReqs)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("check took %v", d)
			}
		})
	}
}

func TestFetcherRefusesWhatIsNotAnHTTPSFetch(t *testing.T) {
	t.Parallel()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("plain server got %s %s", r.Method, r.URL)
	}))
	t.Cleanup(plain.Close)
	s := domainprooftest.NewWellKnownServer(t, domain)
	s.Set(200, "{}")
	c := domainproof.New(domainproof.Config{
		Resolve: map[string]string{"plain.example.com:80": plain.Listener.Addr().String(), domain + ":443": s.Addr()},
		RootCAs: s.CAPool(),
		Timeout: 2 * time.Second,
	})
	for _, url := range []string{
		"http://plain.example.com" + domainproof.WellKnownPath,
		"https://user:pw@" + domain + domainproof.WellKnownPath,
		"https:///no-host",
	} {
		if _, _, err := c.Fetcher.Fetch(context.Background(), url, 4096); err == nil {
			t.Errorf("Fetch(%q) succeeded, want refused", url)
		}
	}
	if n := s.Requests(); n != 0 {
		t.Errorf("HTTPS server saw %d requests, want 0", n)
	}
}

func TestFetcherReadsAtMostMaxBytes(t *testing.T) {
	t.Parallel()
	s := domainprooftest.NewWellKnownServer(t, domain)
	s.Set(200, "0123456789")
	c := domainproof.New(domainproof.Config{Resolve: resolveTo(t, s), RootCAs: s.CAPool(), Timeout: 2 * time.Second})
	url := "https://" + domain + domainproof.WellKnownPath
	if status, body, err := c.Fetcher.Fetch(context.Background(), url, 10); err != nil || status != 200 || string(body) != "0123456789" {
		t.Errorf("Fetch with max 10 of 10 bytes = %d, %q, %v; want 200 and the body", status, body, err)
	}
	if _, _, err := c.Fetcher.Fetch(context.Background(), url, 9); err == nil {
		t.Errorf("Fetch with max 9 of 10 bytes succeeded, want an error")
	}
}

func TestFetcherDialsOnlyPublicAddressesUnlessResolved(t *testing.T) {
	t.Parallel()
	s := domainprooftest.NewWellKnownServer(t, domain)
	s.Set(200, "{}")
	url := "https://" + s.Addr() + domainproof.WellKnownPath // the certificate names 127.0.0.1 too

	direct := domainproof.New(domainproof.Config{RootCAs: s.CAPool(), Timeout: 2 * time.Second})
	if _, _, err := direct.Fetcher.Fetch(context.Background(), url, 4096); !errors.Is(err, domainproof.ErrNotPublic) {
		t.Errorf("fetch of a loopback address: err = %v, want ErrNotPublic", err)
	}
	// The same fetch through a Resolve entry is the operator's choice.
	resolved := domainproof.New(domainproof.Config{Resolve: map[string]string{s.Addr(): s.Addr()}, RootCAs: s.CAPool(), Timeout: 2 * time.Second})
	if status, _, err := resolved.Fetcher.Fetch(context.Background(), url, 4096); err != nil || status != 200 {
		t.Errorf("fetch through Resolve: %d, %v; want 200", status, err)
	}
}

func TestDialGuardRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, addr string
		public     bool
	}{
		{"a public IPv4 address is dialed", "8.8.8.8:443", true},
		{"a public IPv6 address is dialed", "[2001:4860:4860::8888]:443", true},
		{"loopback is refused", "127.0.0.1:443", false},
		{"IPv6 loopback is refused", "[::1]:443", false},
		{"a private range is refused", "10.1.2.3:443", false},
		{"IPv6 unique-local is refused", "[fd00::1]:443", false},
		{"link-local (cloud metadata) is refused", "169.254.169.254:443", false},
		{"carrier-grade NAT space is refused", "100.64.0.1:443", false},
		{"the unspecified address is refused", "0.0.0.0:443", false},
		{"loopback mapped into IPv6 is refused", "[::ffff:127.0.0.1]:443", false},
		{"NAT64 of a private address is refused", "[64:ff9b::a00:5]:443", false},
		{"NAT64 of the cloud metadata address is refused", "[64:ff9b::a9fe:a9fe]:443", false},
		{"NAT64 of a public address is dialed", "[64:ff9b::808:808]:443", true},
		{"local-use NAT64 is refused", "[64:ff9b:1::808:808]:443", false},
		{"6to4 of a private address is refused", "[2002:a00:5::1]:443", false},
		{"6to4 of a public address is dialed", "[2002:808:808::1]:443", true},
		{"IPv4-compatible loopback is refused", "[::7f00:1]:443", false},
		{"Teredo is refused", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:443", false},
		{"documentation space is refused", "[2001:db8::1]:443", false},
		{"benchmarking space is refused", "198.18.0.1:443", false},
		{"reserved space is refused", "240.0.0.1:443", false},
		{"\"this network\" is refused", "0.1.2.3:443", false},
		{"IETF protocol assignments are refused", "192.0.0.8:443", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := domainproof.DialPublicOnly("tcp", tt.addr, nil)
			if tt.public && err != nil {
				t.Errorf("dial %s refused: %v", tt.addr, err)
			}
			if !tt.public && !errors.Is(err, domainproof.ErrNotPublic) {
				t.Errorf("dial %s: err = %v, want ErrNotPublic", tt.addr, err)
			}
		})
	}
}

func TestParseResolveRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in        string
		wantKey, wantTo string
		ok              bool
	}{
		{"host:port=ip:port is parsed", "kit.example.com:443=127.0.0.1:8443", "kit.example.com:443", "127.0.0.1:8443", true},
		{"the host is folded to lowercase", "Kit.Example.com:443=127.0.0.1:8443", "kit.example.com:443", "127.0.0.1:8443", true},
		{"an IPv6 address in brackets is parsed", "kit.example.com:443=[::1]:8443", "kit.example.com:443", "[::1]:8443", true},
		{"a missing = is refused", "kit.example.com:443", "", "", false},
		{"a host without a port is refused", "kit.example.com=127.0.0.1:8443", "", "", false},
		{"an empty host is refused", ":443=127.0.0.1:8443", "", "", false},
		{"an address without a port is refused", "kit.example.com:443=127.0.0.1", "", "", false},
		{"a hostname as address is refused", "kit.example.com:443=localhost:8443", "", "", false},
		{"port 0 is refused", "kit.example.com:0=127.0.0.1:8443", "", "", false},
		{"port 65536 is refused", "kit.example.com:443=127.0.0.1:65536", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, to, err := domainproof.ParseResolve(tt.in)
			if (err == nil) != tt.ok || key != tt.wantKey || to != tt.wantTo {
				t.Errorf("ParseResolve(%q) = %q, %q, %v; want %q, %q, ok=%v", tt.in, key, to, err, tt.wantKey, tt.wantTo, tt.ok)
			}
		})
	}
}

func set(status int, body string) func(*domainprooftest.WellKnownServer) {
	return func(s *domainprooftest.WellKnownServer) { s.Set(status, body) }
}

// resolveTo sends https://kit.example.com/ to s, through the flag syntax
// kitd is started with.
func resolveTo(t *testing.T, s *domainprooftest.WellKnownServer) map[string]string {
	t.Helper()
	key, addr, err := domainproof.ParseResolve(s.ResolveFlag(domain))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{key: addr}
}

// checkErrAs is checkErr for a want that may be an error type to find with
// errors.As (the x509 errors are values without identity).
func checkErrAs(t *testing.T, err, want error) {
	t.Helper()
	switch w := want.(type) {
	case x509.UnknownAuthorityError:
		checkErr(t, err, domainproof.ErrProofNotFound)
		if !errors.As(err, &w) {
			t.Errorf("err = %v, want an x509.UnknownAuthorityError in the chain", err)
		}
	case x509.HostnameError:
		checkErr(t, err, domainproof.ErrProofNotFound)
		if !errors.As(err, &w) {
			t.Errorf("err = %v, want an x509.HostnameError in the chain", err)
		}
	default:
		checkErr(t, err, want)
	}
}
