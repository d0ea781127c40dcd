package domainprooftest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/domainproof"
)

// WellKnownServer is an HTTPS server on 127.0.0.1 whose certificate, for the
// hostnames it was made with (and 127.0.0.1, ::1), is signed by its own CA.
// It answers domainproof.WellKnownPath with a settable status and body (404 and no
// body until Set), and any other path with 404. It is safe for concurrent
// use.
type WellKnownServer struct {
	srv    *httptest.Server
	caPEM  []byte
	pool   *x509.CertPool
	closed chan struct{}

	mu       sync.Mutex
	status   int
	body     string
	delay    time.Duration
	redirect string
	requests int
}

// NewWellKnownServer starts a WellKnownServer with a certificate for
// hostnames (wildcards such as "*.example.com" allowed); t's cleanup stops
// it.
func NewWellKnownServer(t testing.TB, hostnames ...string) *WellKnownServer {
	t.Helper()
	ca, caKey, caDER := newCA(t)
	leaf := newLeaf(t, ca, caKey, hostnames)
	s := &WellKnownServer{
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:   x509.NewCertPool(),
		closed: make(chan struct{}),
		status: http.StatusNotFound,
	}
	s.pool.AddCert(ca)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	// Tests of untrusted certificates make every handshake fail; the
	// server's log line for each is noise.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.StartTLS()
	t.Cleanup(func() {
		close(s.closed) // ends delayed handlers, which Close waits for
		s.srv.Close()
	})
	return s
}

// Addr is the server's "127.0.0.1:port".
func (s *WellKnownServer) Addr() string { return s.srv.Listener.Addr().String() }

// ResolveFlag returns the `--verify-resolve` value (see domainproof.ParseResolve)
// that sends https://host/ to this server.
func (s *WellKnownServer) ResolveFlag(host string) string {
	return net.JoinHostPort(host, "443") + "=" + s.Addr()
}

// CertPEM is the CA certificate in PEM, for `kitd serve --verify-ca FILE`.
func (s *WellKnownServer) CertPEM() []byte { return s.caPEM }

// CAPool holds the CA certificate, for domainproof.Config.RootCAs.
func (s *WellKnownServer) CAPool() *x509.CertPool { return s.pool }

// Set makes the well-known path answer status with body.
func (s *WellKnownServer) Set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// SetDelay makes every answer wait d first (0: none), or until the client
// goes away.
func (s *WellKnownServer) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// SetRedirect makes the well-known path answer 302 to location ("" undoes
// it). Meanwhile every other path answers what Set says, so a client that
// followed the redirect would find the proof there.
func (s *WellKnownServer) SetRedirect(location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirect = location
}

// Requests counts the requests served so far, at any path.
func (s *WellKnownServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *WellKnownServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	status, body, delay, redirect := s.status, s.body, s.delay, s.redirect
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
	wellKnown := r.URL.Path == domainproof.WellKnownPath
	switch {
	case wellKnown && redirect != "":
		http.Redirect(w, r, redirect, http.StatusFound)
	case wellKnown || redirect != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	default:
		http.NotFound(w, r)
	}
}

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := certTemplate(t, "domainprooftest CA")
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("domainprooftest: make CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("domainprooftest: parse CA certificate: %v", err)
	}
	return ca, key, der
}

func newLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hostnames []string) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := certTemplate(t, "domainprooftest server")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames, tmpl.IPAddresses = hostnames, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("domainprooftest: make server certificate for %v: %v", hostnames, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// certTemplate is what the CA and the server certificate share: a random
// serial, the common name, and a fixed, wide validity rather than one from
// time.Now (tests may run kitd on a test clock, while TLS checks use real
// time).
func certTemplate(t testing.TB, commonName string) *x509.Certificate {
	t.Helper()
	return &x509.Certificate{
		SerialNumber: newSerial(t),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("domainprooftest: make key: %v", err)
	}
	return key
}

func newSerial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("domainprooftest: make serial number: %v", err)
	}
	return n
}
