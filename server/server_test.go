package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/persistence"
)

// config is a node alone on a loopback port of its own.
func config(t *testing.T, dataDir string) Config {
	return Config{
		ListenAddr: "127.0.0.1:0", DataDir: dataDir, DeliveryTimeout: 3 * time.Second,
		Fatal: func(err error) { t.Errorf("fatal: %v", err) },
	}
}

// reopen checks that the store of dir was closed: Pebble holds a lock on
// an open one.
func reopen(t *testing.T, dir string) {
	t.Helper()
	store, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		t.Fatalf("the store is still open: %v", err)
	}
	store.Close()
}

func TestStartAndStop(t *testing.T) {
	for _, tc := range []struct {
		rule string
		run  func(t *testing.T, dir string)
	}{
		{"a started node serves, drains and closes its store", func(t *testing.T, dir string) {
			s, err := Start(config(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.Get(s.PublicURL() + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET /healthz: %d", res.StatusCode)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			s.Close()
			reopen(t, dir)
			if _, err := http.Get(s.PublicURL() + "/healthz"); err == nil {
				t.Fatal("a drained node still answers")
			}
		}},
		{"a generated operator token is kept in the data directory", func(t *testing.T, dir string) {
			s, err := Start(config(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			first := s.opToken
			s.Drain(context.Background())
			s.Close()
			b, err := os.ReadFile(filepath.Join(dir, "operator-token"))
			if err != nil || strings.TrimSpace(string(b)) != first || first == "" {
				t.Fatalf("operator-token holds %q (%v), want the node's", b, err)
			}
		}},
		{"a start that fails stops what it started, the store last", func(t *testing.T, dir string) {
			cfg := config(t, dir)
			cfg.VerifyCA = filepath.Join(dir, "missing.pem")
			if _, err := Start(cfg); err == nil || !strings.HasPrefix(err.Error(), "--verify-ca: ") {
				t.Fatalf("Start: %v, want the --verify-ca error", err)
			}
			reopen(t, dir)
		}},
		{"a listener that fails stops the start", func(t *testing.T, dir string) {
			cfg := config(t, dir)
			cfg.ListenAddr = "127.0.0.1:-1"
			if _, err := Start(cfg); err == nil || !strings.HasPrefix(err.Error(), "listen: ") {
				t.Fatalf("Start: %v, want the listen error", err)
			}
			reopen(t, dir)
		}},
	} {
		t.Run(tc.rule, func(t *testing.T) { tc.run(t, t.TempDir()) })
	}
}
