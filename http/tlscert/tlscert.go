// Package tlscert holds the certificate the HTTPS listener presents
// (--tls-cert, --tls-key) and the TLS configuration it is presented with.
// Reload reads the files again (cmd/kitd calls it on SIGHUP): each new
// handshake takes whichever certificate is current, so a renewed one is
// served without a restart, and an open connection keeps the one it was
// made with. A pair that fails to load never replaces a good one. It
// never puts a key's contents in an error.
package tlscert

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Holder is the current certificate of one pair of files. It is safe for
// concurrent use.
type Holder struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// Load reads certFile (PEM, the leaf first, then its chain) and keyFile
// (its PEM private key) and returns a holder of the pair.
func Load(certFile, keyFile string) (*Holder, error) {
	h := &Holder{certFile: certFile, keyFile: keyFile}
	c, err := h.read()
	if err != nil {
		return nil, err
	}
	h.cur.Store(c)
	return h, nil
}

// Reload reads the files again. On success the next handshake presents
// the new pair; on an error the current pair stays, and the error says
// why.
func (h *Holder) Reload() error {
	c, err := h.read()
	if err != nil {
		return err
	}
	h.cur.Store(c)
	return nil
}

func (h *Holder) read() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(h.certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(h.keyFile)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	// X509KeyPair's errors name PEM block types at most, never bytes of
	// the key; it checks that the key is the certificate's.
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s with %s: %w", h.certFile, h.keyFile, err)
	}
	if c.Leaf == nil {
		return nil, errors.New(h.certFile + ": no certificate")
	}
	return &c, nil
}

// Current is the pair the next handshake presents.
func (h *Holder) Current() *tls.Certificate { return h.cur.Load() }

// Attrs describe the current certificate for a log line: its subject,
// names, expiry and SHA-256 fingerprint (nothing of the key).
func (h *Holder) Attrs() []any {
	leaf := h.cur.Load().Leaf
	sum := sha256.Sum256(leaf.Raw)
	return []any{"cert", h.certFile, "subject", leaf.Subject.String(), "dnsNames", leaf.DNSNames,
		"notAfter", leaf.NotAfter, "sha256", hex.EncodeToString(sum[:])}
}

// suites are the TLS 1.2 cipher suites served: ECDHE key exchange (forward
// secrecy) with an AEAD, nothing else. TLS 1.3's suites are all AEAD and
// Go does not let them be chosen.
var suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Config is the listener's TLS configuration: TLS 1.2 and 1.3, the suites
// above, no client certificates, and HTTP/1.1 offered by ALPN (fasthttp
// speaks nothing else). Every handshake takes the current certificate.
func (h *Holder) Config() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: suites,
		ClientAuth:   tls.NoClientCert,
		NextProtos:   []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return h.cur.Load(), nil
		},
	}
}
