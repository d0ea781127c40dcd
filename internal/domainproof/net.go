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
// that is not a public unicast one (loopback, private, link-local, shared,
// unspecified and the other special-purpose addresses, and IPv6 addresses
// that a translator or tunnel takes to such an IPv4 address): checked on
// the address actually dialled, so a name that resolves to an internal
// address (DNS rebinding) is refused too. Deliveries to Kits use it as
// well.
func DialPublicOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s %s: %w", network, address, err)
	}
	if !public(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", address, errNotPublic)
	}
	return nil
}

// public reports whether a is a public unicast address: global unicast,
// in none of the special-purpose blocks below, and, for an IPv6 address
// that carries an IPv4 one (NAT64's well-known prefix, 6to4, the
// deprecated IPv4-compatible form), carrying a public one. On a host with
// NAT64 or a 6to4 relay, 64:ff9b::a00:5 reaches 10.0.0.5.
func public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	if v4, ok := carriedIPv4(a); ok {
		return public(v4)
	}
	return true
}

// notPublic are the special-purpose blocks (IANA's registries) that
// IsGlobalUnicast and IsPrivate leave in.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the limited broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/32"),       // Teredo, whose IPv4 is obscured
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local, deprecated
}

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	compatible = netip.MustParsePrefix("::/96")
)

// carriedIPv4 is the IPv4 address an IPv6 address of NAT64's well-known
// prefix, of 6to4 or of the IPv4-compatible form carries.
func carriedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), compatible.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
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
