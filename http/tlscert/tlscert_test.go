package tlscert

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kitd/kitd/http/tlscert/tlscerttest"
)

// files writes what each of cert and key say: "a" or "b" for a pair's
// part, "junk" for a file that is no PEM, "" for no file.
func files(t *testing.T, a, b tlscerttest.Pair, cert, key string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write(t, certFile, map[string][]byte{"a": a.CertPEM, "b": b.CertPEM, "junk": []byte("not a certificate")}, cert)
	write(t, keyFile, map[string][]byte{"a": a.KeyPEM, "b": b.KeyPEM, "junk": []byte("not a key")}, key)
	return certFile, keyFile
}

func write(t *testing.T, path string, parts map[string][]byte, which string) {
	t.Helper()
	os.Remove(path)
	if which == "" {
		return
	}
	if err := os.WriteFile(path, parts[which], 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	a, b := tlscerttest.New(t, "a"), tlscerttest.New(t, "b")
	tests := []struct {
		rule      string
		cert, key string
		ok        bool
	}{
		{"a valid pair loads", "a", "a", true},
		{"a key that is not the certificate's is refused", "a", "b", false},
		{"a missing certificate file is refused", "", "a", false},
		{"a missing key file is refused", "a", "", false},
		{"a certificate file that is not PEM is refused", "junk", "a", false},
		{"a key file that is not PEM is refused", "a", "junk", false},
		{"a key where the certificate should be is refused", "swap", "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			certFile, keyFile := files(t, a, b, tt.cert, tt.key)
			if tt.cert == "swap" {
				write(t, certFile, map[string][]byte{"k": a.KeyPEM}, "k")
			}
			h, err := Load(certFile, keyFile)
			if (err == nil) != tt.ok {
				t.Fatalf("Load: %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				noKey(t, err.Error(), a, b)
				return
			}
			if !h.Current().Leaf.Equal(a.Cert) {
				t.Fatalf("holds %s, want a", h.Current().Leaf.Subject)
			}
		})
	}
}

// noKey fails when s holds any line of the pairs' keys.
func noKey(t *testing.T, s string, pairs ...tlscerttest.Pair) {
	t.Helper()
	for _, p := range pairs {
		for _, line := range bytes.Split(p.KeyPEM, []byte("\n")) {
			if len(line) > 8 && !bytes.HasPrefix(line, []byte("-----")) && strings.Contains(s, string(line)) {
				t.Fatalf("the error holds the key: %s", s)
			}
		}
	}
}

func TestReload(t *testing.T) {
	a, b := tlscerttest.New(t, "a"), tlscerttest.New(t, "b")
	tests := []struct {
		rule      string
		cert, key string // the files at the reload
		ok        bool
		want      string // the pair held after it
	}{
		{"a new pair is served after a reload", "b", "b", true, "b"},
		{"the same pair reloads", "a", "a", true, "a"},
		{"a certificate renewed without its key keeps the old pair", "b", "a", false, "a"},
		{"a bad certificate file keeps the old pair", "junk", "a", false, "a"},
		{"a bad key file keeps the old pair", "b", "junk", false, "a"},
		{"a missing file keeps the old pair", "", "b", false, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			certFile, keyFile := files(t, a, b, "a", "a")
			h, err := Load(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg := h.Config()
			write(t, certFile, map[string][]byte{"a": a.CertPEM, "b": b.CertPEM, "junk": []byte("x")}, tt.cert)
			write(t, keyFile, map[string][]byte{"a": a.KeyPEM, "b": b.KeyPEM, "junk": []byte("x")}, tt.key)
			err = h.Reload()
			if (err == nil) != tt.ok {
				t.Fatalf("Reload: %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				noKey(t, err.Error(), a, b)
			}
			got, _ := cfg.GetCertificate(nil)
			if got.Leaf.Subject.CommonName != tt.want {
				t.Fatalf("a handshake gets %s, want %s", got.Leaf.Subject.CommonName, tt.want)
			}
		})
	}
}

// What a client meets: TLS 1.2 or 1.3, forward-secret AEAD suites only,
// no request for a client certificate, the current certificate on each
// new handshake while an open connection goes on with its own.
func TestHandshake(t *testing.T) {
	a, b := tlscerttest.New(t, "a"), tlscerttest.New(t, "b")
	certFile, keyFile := files(t, a, b, "a", "a")
	h, err := Load(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tln := tls.NewListener(ln, h.Config())
	go func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }() // an echo
		}
	}()
	pool := tlscerttest.Pool(a, b)
	dial := func(cfg *tls.Config) (*tls.Conn, error) {
		cfg.RootCAs = pool
		cfg.NextProtos = []string{"h2", "http/1.1"} // as browsers offer
		return tls.Dial("tcp", ln.Addr().String(), cfg)
	}
	echo := func(c *tls.Conn) {
		t.Helper()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo: %q, %v", buf, err)
		}
	}

	for _, tt := range []struct {
		rule string
		cfg  *tls.Config
		ok   bool
	}{
		{"TLS 1.3 is served", &tls.Config{MinVersion: tls.VersionTLS13}, true},
		{"TLS 1.2 is served", &tls.Config{MaxVersion: tls.VersionTLS12}, true},
		{"TLS 1.1 is refused", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
		{"a CBC suite is refused", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false},
		{"ChaCha20-Poly1305 is served", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, true},
		{"AES-256-GCM is served", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}, true},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			asked := false
			tt.cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				asked = true
				return &tls.Certificate{}, nil
			}
			c, err := dial(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("dial: %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				return
			}
			defer c.Close()
			echo(c)
			if asked {
				t.Error("the server asked for a client certificate")
			}
			if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				t.Errorf("ALPN %q, want http/1.1 (fasthttp speaks no HTTP/2)", p)
			}
		})
	}

	t.Run("a reload serves new handshakes and keeps open connections", func(t *testing.T) {
		before, err := dial(&tls.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		echo(before)
		b.Write(t, certFile, keyFile)
		if err := h.Reload(); err != nil {
			t.Fatal(err)
		}
		after, err := dial(&tls.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer after.Close()
		if got := after.ConnectionState().PeerCertificates[0]; !got.Equal(b.Cert) {
			t.Fatalf("a new handshake got %s, want b", got.Subject)
		}
		echo(before)
		if got := before.ConnectionState().PeerCertificates[0]; !got.Equal(a.Cert) {
			t.Fatalf("the open connection has %s, want a", got.Subject)
		}
	})
}
