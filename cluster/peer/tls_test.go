package peer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestDeriveCA(t *testing.T) {
	ca1, key1, err := deriveCA(testKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the same key gives the same certificate on every node", func(t *testing.T) {
		ca2, key2, err := deriveCA(bytes.Clone(testKey))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ca1.Raw, ca2.Raw) || !key1.Equal(key2) {
			t.Fatal("two derivations differ")
		}
	})
	t.Run("another key gives another CA", func(t *testing.T) {
		other := bytes.Clone(testKey)
		other[0] ^= 1
		_, key2, err := deriveCA(other)
		if err != nil {
			t.Fatal(err)
		}
		if key1.Equal(key2) {
			t.Fatal("a one-bit change gave the same CA key")
		}
	})
	t.Run("a key shorter than 16 bytes is refused", func(t *testing.T) {
		if _, _, err := deriveCA(testKey[:MinClusterKey-1]); err == nil {
			t.Fatal("accepted")
		}
		if _, err := Listen(Config{NodeName: "a", ListenAddr: "127.0.0.1:0", ClusterKey: testKey[:8]}); err == nil {
			t.Fatal("Listen accepted a short key")
		}
	})
}

// TestLeafCertificateIsRenewed: a derived leaf is renewed past half its
// validity, and a fresh node's leaf names it.
func TestLeafCertificateIsRenewed(t *testing.T) {
	clk := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{NodeName: "n1", ClusterKey: testKey, Clock: clk, CertValidity: time.Hour}
	cfg.setDefaults()
	id, err := newIdentity(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := id.certificate()
	if first.Leaf.Subject.CommonName != "n1" || !first.Leaf.NotAfter.Equal(clk.now.Add(time.Hour)) {
		t.Fatalf("leaf %v until %v", first.Leaf.Subject, first.Leaf.NotAfter)
	}
	clk.now = clk.now.Add(20 * time.Minute)
	if c, _ := id.certificate(); c != first {
		t.Fatal("renewed before half its validity")
	}
	clk.now = clk.now.Add(15 * time.Minute)
	if c, _ := id.certificate(); c == first {
		t.Fatal("not renewed past half its validity")
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// counting is a handler that counts the requests it ran.
func counting(n *atomic.Int32) Handler {
	return func(ctx context.Context, from string, msg proto.Message, id string) (proto.Message, error) {
		n.Add(1)
		return echo(ctx, from, msg, id)
	}
}

// requestFrame is a well-formed request for GetUser.
func requestFrame() []byte {
	b := appendHeader(nil, frameRequest, 1)
	b = appendRequest(b, 0, "r", "kit.v1.GetUser")
	b, _ = proto.MarshalOptions{}.MarshalAppend(b, &kitpb.GetUser{UserId: "intruder"})
	finishFrame(b, 0, 1<<20)
	return b
}

// TestOnlyMembersTalkToMembers: nothing without the cluster's key gets a
// request run or a reply, in either direction, and a member still gets
// through afterwards.
func TestOnlyMembersTalkToMembers(t *testing.T) {
	otherKey := bytes.Repeat([]byte{7}, 32)
	tests := []struct {
		name string
		try  func(t *testing.T, b *node) // b is the member under attack
	}{
		{"a node with another key cannot call a member", func(t *testing.T, b *node) {
			x := start(t, "x", func(c *Config) { c.ClusterKey = otherKey })
			_, err := x.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{UserId: "intruder"}, "r")
			if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrConnLost) {
				t.Fatalf("got %v", err)
			}
		}},
		{"a member does not call a node with another key", func(t *testing.T, b *node) {
			var ran atomic.Int32
			x := start(t, "x", func(c *Config) { c.ClusterKey = otherKey; c.Handler = counting(&ran) })
			_, err := b.Call(ctxFor(t), x.Addr(), &kitpb.GetUser{UserId: "u"}, "r")
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v", err)
			}
			if ran.Load() != 0 {
				t.Fatal("the impostor got the request")
			}
		}},
		{"plain TCP gets nothing", func(t *testing.T, b *node) {
			c, err := net.Dial("tcp", b.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(requestFrame())
			if err := readAll(c); err != nil && !isReset(err) {
				t.Fatalf("read: %v", err)
			}
		}},
		{"TLS without a client certificate gets nothing", func(t *testing.T, b *node) {
			tryTLS(t, b, &tls.Config{InsecureSkipVerify: true})
		}},
		{"TLS with a self-signed client certificate gets nothing", func(t *testing.T, b *node) {
			tryTLS(t, b, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{selfSigned(t, "a")}})
		}},
		{"a connection that never completes its handshake is closed", func(t *testing.T, b *node) {
			c, err := net.Dial("tcp", b.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := readAll(c); err != nil && !isReset(err) {
				t.Fatalf("read: %v", err)
			}
		}},
		{"TLS 1.2 is refused, even with a member's certificate", func(t *testing.T, b *node) {
			cfg := start(t, "m", nil).id.clientConfig()
			cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			c, err := tls.Dial("tcp", b.Addr(), cfg)
			if err == nil {
				c.Close()
				t.Fatal("handshake succeeded")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Int32
			b := start(t, "b", func(c *Config) { c.Handler = counting(&ran); c.HandshakeTimeout = 2 * time.Second })
			tt.try(t, b)
			if ran.Load() != 0 {
				t.Fatal("a request ran")
			}
			a := start(t, "a", nil)
			mustCall(t, a, b.Addr(), "a", "member")
			if ran.Load() != 1 {
				t.Fatalf("%d requests ran, want the member's one", ran.Load())
			}
		})
	}
}

// TestRefusedHandshakeIsLogged: the member that refuses says so.
func TestRefusedHandshakeIsLogged(t *testing.T) {
	b := start(t, "b", nil)
	x := start(t, "x", func(c *Config) { c.ClusterKey = bytes.Repeat([]byte{7}, 32) })
	x.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{}, "r")
	eventually.True(t, "a log line", func() bool { return strings.Contains(b.log.String(), "handshake refused") })
	if b.Stats().Refused == 0 {
		t.Fatal("not counted")
	}
}

// tryTLS connects with cfg and sends a request; the member must close the
// connection without an answer.
func tryTLS(t *testing.T, b *node, cfg *tls.Config) {
	t.Helper()
	c, err := tls.Dial("tcp", b.Addr(), cfg)
	if err != nil {
		return // refused in the handshake
	}
	defer c.Close()
	c.Write(requestFrame())
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v", n, err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

func selfSigned(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
}

// certFiles writes a CA and a leaf for each name under dir and returns
// the CA file and the leaves' certificate and key files.
func certFiles(t *testing.T, dir string, names ...string) (ca string, certs, keys []string) {
	t.Helper()
	caPub, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caPub, caPriv)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	for i, n := range names {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(10 + i)), Subject: pkix.Name{CommonName: n},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, caPriv)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := x509.MarshalPKCS8PrivateKey(priv)
		certs = append(certs, write(n+".pem", "CERTIFICATE", der))
		keys = append(keys, write(n+".key", "PRIVATE KEY", k))
	}
	return ca, certs, keys
}

func TestCertificateFiles(t *testing.T) {
	ca, certs, keys := certFiles(t, t.TempDir(), "a", "b")
	otherCA, otherCerts, otherKeys := certFiles(t, t.TempDir(), "x")
	withFiles := func(ca, cert, key string) func(*Config) {
		return func(c *Config) { c.ClusterKey = nil; c.CAFile, c.CertFile, c.KeyFile = ca, cert, key }
	}
	a := start(t, "a", withFiles(ca, certs[0], keys[0]))
	b := start(t, "b", withFiles(ca, certs[1], keys[1]))
	mustCall(t, a, b.Addr(), "a", "u1")
	mustCall(t, b, a.Addr(), "b", "u2")

	t.Run("a node of another CA is refused both ways", func(t *testing.T) {
		x := start(t, "x", withFiles(otherCA, otherCerts[0], otherKeys[0]))
		if _, err := a.Call(ctxFor(t), x.Addr(), &kitpb.GetUser{}, "r"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a to x: %v", err)
		}
		if _, err := x.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{}, "r"); !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrConnLost) {
			t.Fatalf("x to b: %v", err)
		}
	})
	t.Run("a node of the cluster key is refused", func(t *testing.T) {
		k := start(t, "k", nil)
		if _, err := k.Call(ctxFor(t), b.Addr(), &kitpb.GetUser{}, "r"); !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrConnLost) {
			t.Fatalf("k to b: %v", err)
		}
	})
	t.Run("all three files are needed", func(t *testing.T) {
		cfg := Config{NodeName: "a", ListenAddr: "127.0.0.1:0", CertFile: certs[0], KeyFile: keys[0]}
		if _, err := Listen(cfg); err == nil {
			t.Fatal("accepted without a CA file")
		}
	})
}
