package peer

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"sync"
	"time"

	"github.com/kitd/kitd/internal/clock"
)

// caInfo is the HKDF info string of the CA key: it binds the derived key
// to this one use of the cluster key (memberlist uses the same secret for
// gossip, raw). Changing it changes every cluster's CA.
const caInfo = "kitd cluster/peer CA ed25519 v1"

// MinClusterKey is the shortest cluster key accepted (memberlist's
// smallest key, AES-128).
const MinClusterKey = 16

// deriveCA returns the cluster's CA: its Ed25519 key derived from the
// cluster key with HKDF-SHA256, and a self-signed certificate built from
// fixed fields. Ed25519 signatures are deterministic, so every member
// builds the same certificate byte for byte, and there is nothing to
// distribute but the secret.
func deriveCA(clusterKey []byte) (*x509.Certificate, ed25519.PrivateKey, error) {
	if len(clusterKey) < MinClusterKey {
		return nil, nil, fmt.Errorf("peer: the cluster key has %d bytes, at least %d are needed", len(clusterKey), MinClusterKey)
	}
	seed, err := hkdf.Key(sha256.New, clusterKey, nil, caInfo, ed25519.SeedSize)
	if err != nil {
		return nil, nil, err
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kitd cluster CA"},
		NotBefore:             time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2124, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// identity is this node's side of mutual TLS: the pool it trusts and the
// certificate it shows.
type identity struct {
	roots *x509.CertPool
	clock clock.Clock

	// With a cluster key: a fresh leaf key and certificate, made at start
	// and renewed at half its validity, signed by the derived CA.
	name     string
	caCert   *x509.Certificate
	caKey    ed25519.PrivateKey
	validity time.Duration

	mu   sync.Mutex
	leaf *tls.Certificate
}

func newIdentity(cfg *Config) (*identity, error) {
	id := &identity{clock: cfg.Clock, name: cfg.NodeName, validity: cfg.CertValidity, roots: x509.NewCertPool()}
	if cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		if cfg.CertFile == "" || cfg.KeyFile == "" || cfg.CAFile == "" {
			return nil, errors.New("peer: certificate files need all three of the certificate, its key and the CA")
		}
		leaf, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("peer: %w", err)
		}
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("peer: %w", err)
		}
		if !id.roots.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("peer: no certificate in %s", cfg.CAFile)
		}
		id.leaf = &leaf
		return id, nil
	}
	ca, key, err := deriveCA(cfg.ClusterKey)
	if err != nil {
		return nil, err
	}
	id.caCert, id.caKey = ca, key
	id.roots.AddCert(ca)
	if _, err := id.certificate(); err != nil {
		return nil, err
	}
	return id, nil
}

// certificate returns the certificate to show, renewing a derived one
// past half its validity. A connection is checked at its handshake only,
// so renewal never breaks a connection that is up.
func (id *identity) certificate() (*tls.Certificate, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.caKey == nil {
		return id.leaf, nil
	}
	now := id.clock.Now()
	if id.leaf != nil && now.Before(id.leaf.Leaf.NotBefore.Add(skew+id.validity/2)) {
		return id.leaf, nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id.name},
		NotBefore:    now.Add(-skew),
		NotAfter:     now.Add(id.validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, id.caCert, pub, id.caKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	id.leaf = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: cert}
	return id.leaf, nil
}

// skew is how far apart two members' clocks may be for a fresh
// certificate to be accepted.
const skew = 5 * time.Minute

// verify checks the peer's chain against the cluster's CA. The standard
// verifier is used with its host name check left out: every member shows
// a certificate of the same CA, and a member is trusted as a member
// whatever name it gives (the name only says who sent a request).
func (id *identity) verify(usage x509.ExtKeyUsage) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer: no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		leaf := cs.PeerCertificates[0]
		_, err := leaf.Verify(x509.VerifyOptions{
			Roots:         id.roots,
			Intermediates: inter,
			CurrentTime:   id.clock.Now(),
			KeyUsages:     []x509.ExtKeyUsage{usage},
		})
		if err != nil {
			return err
		}
		if leaf.Subject.CommonName == "" {
			return errors.New("peer: certificate names no node")
		}
		return nil
	}
}

func (id *identity) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is checked in VerifyConnection, against the cluster's
		// CA; RequireAnyClientCert only makes the certificate mandatory.
		ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return id.certificate()
		},
		VerifyConnection: id.verify(x509.ExtKeyUsageClientAuth),
		Time:             id.clock.Now,
	}
}

func (id *identity) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The host name is not checked (see verify); the chain is, in
		// VerifyConnection.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return id.certificate()
		},
		VerifyConnection: id.verify(x509.ExtKeyUsageServerAuth),
		Time:             id.clock.Now,
	}
}

// peerName is the node name in the verified certificate of a connection.
func peerName(cs tls.ConnectionState) string {
	return cs.PeerCertificates[0].Subject.CommonName
}
