package domainproof

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultTimeout is the contract's bound on a well-known fetch ("5 s"); the
// same bound applies to each DNS lookup so that a verify request never hangs
// on a silent server.
const defaultTimeout = 5 * time.Second

// errNotPublic refuses a dial to an address a public domain has no business
// resolving to: without it, a developer could point a domain at kitd's own
// network (loopback, private ranges, cloud metadata) and probe it.
var errNotPublic = errors.New("address is not public unicast")

// Config is how [New] reaches the network. The zero Config uses the system's
// DNS and roots with the default timeout.
type Config struct {
	// DNSServer ("host:port") receives every DNS query, TXT lookups and the
	// host lookups of well-known fetches alike; "" uses the system's
	// resolvers (`kitd serve --verify-dns`).
	DNSServer string
	// Resolve maps "host:port" to the "ip:port" a well-known fetch dials
	// instead, like curl's --resolve (`--verify-resolve`, parsed by
	// [ParseResolve]). The TLS name is still the host. These addresses are
	// trusted as configured, even loopback or private ones.
	Resolve map[string]string
	// RootCAs verifies well-known servers; nil uses the system roots. It
	// replaces them: for extra roots, start from x509.SystemCertPool.
	RootCAs *x509.CertPool
	// Timeout bounds one DNS lookup or one fetch; 0 means 5 s.
	Timeout time.Duration
}

// New returns a Checker whose Resolver is Go's DNS client and whose Fetcher
// is an HTTPS client that verifies TLS, follows no redirect (a 3xx is a
// failed proof), uses no proxy and dials only public addresses unless
// cfg.Resolve says otherwise.
func New(cfg Config) *Checker {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	res := &net.Resolver{PreferGo: true}
	if cfg.DNSServer != "" {
		server := cfg.DNSServer
		res.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		}
	}
	resolve := make(map[string]string, len(cfg.Resolve))
	for k, v := range cfg.Resolve {
		resolve[asciiLower(k)] = v
	}
	direct := &net.Dialer{Timeout: timeout}
	public := &net.Dialer{Timeout: timeout, Resolver: res, Control: DialPublicOnly}
	transport := &http.Transport{
		// A proxy would fetch from somewhere else than kitd; the proof is
		// about what the domain serves to kitd.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := resolve[asciiLower(addr)]; ok {
				return direct.DialContext(ctx, network, to)
			}
			return public.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		// One fetch per verify request: an idle connection would only linger.
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Checker{
		Resolver: &dnsResolver{res: res, server: cfg.DNSServer, timeout: timeout},
		Fetcher: &httpFetcher{client: &http.Client{
			Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
			Timeout: timeout,
		}},
	}
}

// DialPublicOnly is a net.Dialer Control func that refuses every address
// that is not a public unicast one (loopback, private, link-local, shared
// and unspecified addresses): checked on the address actually dialled, so
// a name that resolves to an internal address (DNS rebinding) is refused
// too. Deliveries to Kits use it as well.
func DialPublicOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s %s: %w", network, address, err)
	}
	a := ap.Addr().Unmap()
	// 100.64.0.0/10 (RFC 6598, carrier-grade NAT) is not global either, yet
	// IsPrivate leaves it out.
	shared := a.Is4() && a.As4()[0] == 100 && a.As4()[1]&0xc0 == 64
	if !a.IsGlobalUnicast() || a.IsPrivate() || shared {
		return fmt.Errorf("dial %s: %w", address, errNotPublic)
	}
	return nil
}

type dnsResolver struct {
	res     *net.Resolver
	server  string // "" = the system's
	timeout time.Duration
}

func (r *dnsResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	// Rooted, so that the search domains of resolv.conf are never appended:
	// a TXT record of "_kit-challenge.example.com.corp.local" proves nothing.
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	txts, err := r.res.LookupTXT(ctx, name)
	if err != nil && r.server != "" {
		// net.DNSError names the server of resolv.conf, not the one Dial
		// really reached.
		return nil, fmt.Errorf("DNS server %s: %w", r.server, err)
	}
	return txts, err
}

type httpFetcher struct {
	client *http.Client
}

func (f *httpFetcher) Fetch(ctx context.Context, rawURL string, max int64) (int, []byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, nil, fmt.Errorf("fetch %q: %w", rawURL, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.User != nil {
		return 0, nil, fmt.Errorf("fetch %q: only https URLs with a host and no userinfo", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("fetch %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, err // a *url.Error, which names the method and URL
	}
	defer resp.Body.Close()
	// One byte past max tells a body of exactly max from a longer one.
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return 0, nil, fmt.Errorf("fetch %s: read body: %w", u, err)
	}
	if int64(len(body)) > max {
		return 0, nil, fmt.Errorf("fetch %s: body over %d bytes", u, max)
	}
	return resp.StatusCode, body, nil
}

// ParseResolve parses one `--verify-resolve` value, "HOST:PORT=ADDR:PORT"
// (IPv6 in brackets), into the key and value of [Config.Resolve]. ADDR must
// be an IP address, as with curl's --resolve, so that the override itself
// needs no DNS.
func ParseResolve(s string) (hostport, addr string, err error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("parse resolve %q: want HOST:PORT=ADDR:PORT", s)
	}
	host, port, err := net.SplitHostPort(from)
	if _, ok := parsePort(port); err != nil || host == "" || !ok {
		return "", "", fmt.Errorf("parse resolve %q: %q is not HOST:PORT", s, from)
	}
	ip, ipPort, err := net.SplitHostPort(to)
	p, ok := parsePort(ipPort)
	if err != nil || !ok {
		return "", "", fmt.Errorf("parse resolve %q: %q is not ADDR:PORT", s, to)
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", "", fmt.Errorf("parse resolve %q: %q is not an IP address", s, ip)
	}
	return net.JoinHostPort(asciiLower(host), port), netip.AddrPortFrom(a, p).String(), nil
}

// parsePort accepts 1-65535 in decimal.
func parsePort(s string) (uint16, bool) {
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err == nil && n > 0
}
