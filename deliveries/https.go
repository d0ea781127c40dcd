package deliveries

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/domainproof"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/kitverify"
)

// userAgent names kitd to the Kits' endpoints.
const userAgent = "kitd-deliveries/1"

// kitClients are the HTTPS clients of deliveries and calls. fasthttp's
// client makes a request and reads its answer on the calling goroutine,
// over a pool of HTTP/1.1 connections: an event is one write and one read,
// where net/http's HTTP/2 client handed each request to other goroutines
// and wrote its headers and body apart (docs/deliveries.md, "Cost on the
// write path"). It follows no redirect: a 3xx is not a 2xx.
type kitClients struct {
	public  *fasthttp.Client // refuses loopback and private addresses
	allowed *fasthttp.Client // for the hosts of Config.Allow
	allow   []string
}

func newKitClients(roots *x509.CertPool, allow []string, idleAfter time.Duration) *kitClients {
	return &kitClients{public: kitClient(roots, domainproof.DialPublicOnly, idleAfter), allowed: kitClient(roots, nil, idleAfter), allow: allow}
}

// kitClient is a client whose dials pass control, which sees the address
// actually dialled (so DNS rebinding cannot get around it), and whose
// connections look whether the Kit closed them after idleAfter at rest.
//
// The dial makes the TLS handshake too, under the request's deadline:
// fasthttp would make it inside the first write of the request, under a
// write deadline only, and wait for the hello of a server that accepts
// and never answers for ever, holding the attempt and its Kit's slot.
func kitClient(roots *x509.CertPool, control func(string, string, syscall.RawConn) error, idleAfter time.Duration) *fasthttp.Client {
	dialer := &net.Dialer{Control: control}
	base := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &fasthttp.Client{
		Name: userAgent,
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 {
				// fasthttp dials without a deadline for a request waiting
				// for a connection (MaxConnWaitTimeout) as another closes.
				timeout = Timeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			raw, err := dialer.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				raw.Close()
				return nil, err
			}
			cfg := base.Clone()
			cfg.ServerName = host
			conn := tls.Client(newIdleConn(raw, idleAfter), cfg)
			if err := conn.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
		TLSConfig: base, // unused: the dial hands fasthttp a connection past its handshake
		// Kits may share a host: more requests than connections wait
		// for one (within their deadline) instead of failing.
		MaxConnsPerHost:     MaxInFlightPerKit,
		MaxConnWaitTimeout:  Timeout,
		MaxResponseBodySize: MaxAnswer,
		// A request goes again only when nothing of it left (idleConn),
		// whatever its method, and then on as many pooled connections as
		// the Kit closed while they rested: each is closed as it is found.
		MaxIdemponentCallAttempts: math.MaxInt,
		RetryIfErr: func(_ *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
			return false, errors.Is(err, errClosedWhileIdle)
		},
	}
}

// allows reports whether u's host is one of Config.Allow. An IPv6 host
// is listed bare (::1) or as a URL writes it ([::1]): both are the host
// on any port.
func (k *kitClients) allows(u *url.URL) bool {
	for _, a := range k.allow {
		if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
			a = a[1 : len(a)-1]
		}
		if strings.EqualFold(a, u.Host) || strings.EqualFold(a, u.Hostname()) {
			return true
		}
	}
	return false
}

// kitRequest is one signed POST to a Kit's endpoint.
type kitRequest struct {
	url            *url.URL // https
	body           []byte   // JSON
	secrets        []string // the Kit's signing secrets, newest first
	installationID string
	retryNum       string // Service-Retry-Num and -Reason; "": a first attempt
	retryReason    string
	deadline       time.Time
}

// post sends r and returns the answer's status and, with keep, its body
// (at most MaxAnswer bytes). Without keep, a 2xx whose body is over
// MaxAnswer still counts: an event's answer is not read.
func (k *kitClients) post(now time.Time, r kitRequest, keep bool) (status int, answer []byte, err error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(r.url.String())
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set(kitverify.Header, kitverify.Sign(now, r.body, r.secrets...))
	req.Header.Set("Service-Installation-Id", r.installationID)
	req.Header.Set("Service-Delivery-Id", ids.New())
	if r.retryReason != "" {
		req.Header.Set("Service-Retry-Num", r.retryNum)
		req.Header.Set("Service-Retry-Reason", r.retryReason)
	}
	req.SetBodyRaw(r.body)
	c := k.public
	if k.allows(r.url) {
		c = k.allowed
	}
	err = c.DoDeadline(req, resp, r.deadline)
	status = resp.StatusCode()
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge) && !keep && status >= 200 && status <= 299:
		return status, nil, nil
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return status, nil, &CallError{Reason: ReasonHTTP, Status: status, err: errors.New("the answer is larger than MaxAnswer")}
	case err != nil:
		return 0, nil, &CallError{Reason: classify(err), err: err}
	case status < 200 || status > 299:
		return status, nil, &CallError{Reason: ReasonHTTP, Status: status}
	}
	if keep {
		answer = append([]byte(nil), resp.Body()...)
	}
	return status, answer, nil
}

// classify names why a request got no answer.
func classify(err error) string {
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alert), strings.Contains(err.Error(), "tls:"):
		return ReasonTLS
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrTLSHandshakeTimeout),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	}
	return ReasonConnection
}

// errClosedWhileIdle is a request refused before any of it was written: its
// pooled connection was closed by the Kit while idle. The client sends it
// again on a new connection.
var errClosedWhileIdle = errors.New("deliveries: the Kit closed the connection while it was idle")

// idleAfter is how long a connection rests after its last read before its
// next write looks whether the Kit closed it: longer than any pause within
// a TLS handshake or a request, shorter than the keep-alive of common
// servers (5 s for Node.js and Apache).
const idleAfter = time.Second

// idleConn is a pooled connection that, after resting, looks whether the
// Kit closed it before writing on it. fasthttp learns of a closed
// connection only by using it (net/http reads every idle connection in a
// goroutine of its own), and a request written on one fails as if the Kit
// had dropped it, which counts as a failed attempt.
type idleConn struct {
	net.Conn
	raw       syscall.RawConn // nil: not a TCP connection, never looked at
	idleAfter time.Duration
	lastRead  time.Time // zero until the first read; only the client's goroutine of the moment uses it
}

func newIdleConn(conn net.Conn, idleAfter time.Duration) net.Conn {
	c := &idleConn{Conn: conn, idleAfter: idleAfter}
	if sc, ok := conn.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	return c
}

func (c *idleConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.lastRead = time.Now()
	return n, err
}

func (c *idleConn) Write(b []byte) (int, error) {
	if c.raw != nil && !c.lastRead.IsZero() && time.Since(c.lastRead) > c.idleAfter && closedByPeer(c.raw) {
		return 0, errClosedWhileIdle
	}
	return c.Conn.Write(b)
}

// closedByPeer peeks at an idle connection without waiting: its end
// (EOF), a reset, or anything to read (a TLS close_notify: nothing else
// comes unasked between HTTP/1.1 requests) says the Kit closed it.
func closedByPeer(raw syscall.RawConn) bool {
	var closed bool
	var buf [1]byte
	err := raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n > 0 || err == nil || err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EINTR
		return true // never wait for the connection to become readable
	})
	return closed || err != nil
}
