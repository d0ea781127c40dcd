package deliveries

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestAllows(t *testing.T) {
	s := New(Config{Allow: []string{"127.0.0.1:8443", "receiver.test", "::1", "[fd00::1]"}})
	for _, tc := range []struct {
		name string
		url  string
		want bool
	}{
		{"a listed host:port", "https://127.0.0.1:8443/events", true},
		{"a listed host on any port", "https://receiver.test:9999/e", true},
		{"a listed host in other case", "https://RECEIVER.test/e", true},
		{"the host of a listed host:port on another port", "https://127.0.0.1:9443/events", false},
		{"a host not listed", "https://10.0.0.1/events", false},
		{"a listed IPv6 host on any port", "https://[::1]:8443/e", true},
		// kitd serve takes the bracketed form too (a URL's host): it is
		// the same host, on any port.
		{"a listed bracketed IPv6 host on any port", "https://[fd00::1]:8443/e", true},
		{"a listed bracketed IPv6 host without a port", "https://[fd00::1]/e", true},
		{"an IPv6 host not listed", "https://[fd00::2]:8443/e", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.https.allows(u); got != tc.want {
				t.Fatalf("allows(%s) = %v", tc.url, got)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a deadline is a timeout", fmt.Errorf("post: %w", context.DeadlineExceeded), ReasonTimeout},
		{"a network timeout is a timeout", fmt.Errorf("post: %w", timeoutErr{}), ReasonTimeout},
		{"a certificate that does not verify is a TLS error", &tls.CertificateVerificationError{Err: errors.New("unknown authority")}, ReasonTLS},
		{"a refused connection is a connection failure", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), ReasonConnection},
		{"the client's timeout is a timeout", fasthttp.ErrTimeout, ReasonTimeout},
		{"a dial that timed out is a timeout", fasthttp.ErrDialTimeout, ReasonTimeout},
		{"a TLS handshake that timed out is a timeout", fasthttp.ErrTLSHandshakeTimeout, ReasonTimeout},
		{"a TLS alert from the endpoint is a TLS error", tls.AlertError(40), ReasonTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

func TestTargetErrorCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a version without an events endpoint", errNoEndpoint, "no_endpoint"},
		{"a Kit without a signing secret that can sign", fmt.Errorf("target: %w", errNoSecret), "no_signing_secret"},
		{"anything else", errors.New("actor unavailable"), "internal_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := targetErrorCode(tc.err); got != tc.want {
				t.Fatalf("targetErrorCode = %s, want %s", got, tc.want)
			}
		})
	}
}
