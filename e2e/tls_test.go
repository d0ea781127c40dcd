package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kitd/kitd/http/tlscert/tlscerttest"
	"github.com/kitd/kitd/internal/eventually"
)

// docs/decisions.md "HTTPS" (OPERATIONS.md section 8): with --tls-cert and
// --tls-key, --listen serves HTTPS only, TLS 1.2 and 1.3; SIGHUP reads the
// files again, a renewed certificate is served to new handshakes while
// open connections go on, and a pair that fails to load keeps the one
// served and says why in the log.

// tlsServer starts a server on the pair a, written into a directory of
// the test; it returns the files, which a test may rewrite before a
// SIGHUP. Its requests go over HTTPS with every pair of pairs trusted.
func tlsServer(t *testing.T, a tlscerttest.Pair, pairs ...tlscerttest.Pair) (s *Server, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	a.Write(t, certFile, keyFile)
	for _, p := range append(pairs, a) {
		// The server's output must never hold a key (checked by TestMain).
		for _, line := range strings.Split(string(p.KeyPEM), "\n") {
			if !strings.HasPrefix(line, "-----") {
				secrets.seen.add(line)
			}
		}
	}
	s = startServerOpts(t, ServerOpts{Limits: "off", Args: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	roots := tlscerttest.Pool(append(pairs, a)...)
	s.URL = "https://" + s.Addr
	s.https = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 16,
	}}
	return s, certFile, keyFile
}

// tlsConn is one connection to a server that requests go over by hand, so
// that a test knows which connection each goes on.
type tlsConn struct {
	*tls.Conn
	r *bufio.Reader
}

// handshake opens a connection to s trusting roots.
func handshake(t *testing.T, s *Server, roots *x509.CertPool) *tlsConn {
	t.Helper()
	c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", s.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &tlsConn{c, bufio.NewReader(c)}
}

// get sends GET path on c and returns the status.
func (c *tlsConn) get(t *testing.T, path string) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: kitd\r\n\r\n", path); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode
}

func (c *tlsConn) leaf() *x509.Certificate { return c.ConnectionState().PeerCertificates[0] }

// served is the certificate a new handshake with s gets.
func served(t *testing.T, s *Server, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	c := handshake(t, s, roots)
	defer c.Close()
	return c.leaf()
}

func TestTLS_ServesHTTPSAndReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	a, b, c := tlscerttest.New(t, "kitd-e2e-a"), tlscerttest.New(t, "kitd-e2e-b"), tlscerttest.New(t, "kitd-e2e-c")
	s, certFile, keyFile := tlsServer(t, a, b, c)
	roots := tlscerttest.Pool(a, b, c)
	// The line after the listening line says HTTPS.
	eventually.True(t, "a line saying HTTPS", func() bool { return bytes.Contains(s.out.all(), []byte("kitd TLS: HTTPS only")) })

	// HTTPS, the Web API with a token included, TLS 1.2 at least.
	want(t, s.do(t, "GET", "/healthz", "", nil, nil), 200)
	env := newBotEnv(t, s)
	env.In.post(t, env.Chan.ID, "over TLS")
	before := handshake(t, s, roots)
	if v := before.ConnectionState().Version; v < tls.VersionTLS12 {
		t.Fatalf("TLS version %x, want 1.2 or later", v)
	}
	if !before.leaf().Equal(a.Cert) {
		t.Fatalf("served %s, want the pair started with", before.leaf().Subject)
	}
	if st := before.get(t, "/healthz"); st != 200 {
		t.Fatalf("GET /healthz on an open connection: %d", st)
	}

	// HTTPS only: a plain HTTP request gets no answer, nor does TLS 1.1.
	plain := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	if res, err := plain.Get("http://" + s.Addr + "/healthz"); err == nil {
		res.Body.Close()
		t.Fatalf("plain HTTP to the TLS listener got %d", res.StatusCode)
	}
	if c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}

	// A renewed pair is served to new handshakes after SIGHUP; the
	// connection opened before goes on, with its certificate.
	b.Write(t, certFile, keyFile)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "a new handshake presents the renewed certificate", func() bool { return served(t, s, roots).Equal(b.Cert) })
	if st := before.get(t, "/healthz"); st != 200 {
		t.Fatalf("GET /healthz on the connection opened before the reload: %d", st)
	}
	if !before.leaf().Equal(a.Cert) {
		t.Fatal("the open connection changed certificate")
	}
	env.In.post(t, env.Chan.ID, "after the reload")

	// A reload that fails keeps the certificate served and logs why: a
	// certificate whose key was not renewed with it, then a file that is
	// no PEM.
	for i, bad := range [][]byte{c.CertPEM, []byte("not a certificate\n")} {
		if err := os.WriteFile(certFile, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, "the log says the reload failed", func() bool {
			return bytes.Count(s.errOut.all(), []byte("tls certificate reload failed")) > i
		})
		if got := served(t, s, roots); !got.Equal(b.Cert) {
			t.Fatalf("after a failed reload a handshake got %s, want the certificate served before", got.Subject)
		}
		want(t, s.do(t, "GET", "/healthz", "", nil, nil), 200)
	}
	if st := before.get(t, "/healthz"); st != 200 {
		t.Fatalf("GET /healthz on the first connection at the end: %d", st)
	}
}

// The pair goes together, and a pair that does not load stops the start:
// never plain HTTP instead.
func TestTLS_RefusedAtStart(t *testing.T) {
	t.Parallel()
	a, b := tlscerttest.New(t, "kitd-e2e-a"), tlscerttest.New(t, "kitd-e2e-b")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, a.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, b.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rule string
		args []string
		says string
	}{
		{"--tls-cert without --tls-key", []string{"--tls-cert", certFile}, "--tls-key"},
		{"--tls-key without --tls-cert", []string{"--tls-key", keyFile}, "--tls-cert"},
		{"a key that is not the certificate's", []string{"--tls-cert", certFile, "--tls-key", keyFile}, "private key does not match"},
		{"a missing file", []string{"--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", keyFile}, "none.pem"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			s, err := launch(ServerOpts{DataDir: t.TempDir(), Args: tc.args})
			if err == nil {
				s.stop(15 * time.Second)
				t.Fatalf("kitd %s started", strings.Join(tc.args, " "))
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("the error should say %q: %v", tc.says, err)
			}
		})
	}
}
