package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/deliveries"
	"github.com/kitd/kitd/http/api"
)

// secretKey returns the key that seals the Kits' signing secrets: 32 random
// bytes made on the first start and kept in <data>/secret-key (mode 0600),
// outside the store, so that a copy of the store alone holds no secret.
func secretKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "secret-key")
	if b, err := os.ReadFile(path); err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("%s: %d bytes, want 32", path, len(b))
		}
		return b, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("write secret key: %w", err)
	}
	return key, nil
}

// sender builds the delivery sender of the --delivery-* flags.
func sender(cfg config, env *actors.Env, logger *slog.Logger) (*deliveries.Sender, error) {
	dc := deliveries.Config{Node: env.Node, Clock: env.Clock, Encode: api.EventBody, Logger: logger}
	for _, h := range strings.Split(cfg.deliveryAllow, ",") {
		if h = strings.TrimSpace(h); h != "" {
			dc.Allow = append(dc.Allow, h)
		}
	}
	if cfg.deliveryCA != "" {
		roots, err := deliveries.LoadRoots(cfg.deliveryCA)
		if err != nil {
			return nil, fmt.Errorf("--delivery-ca: %w", err)
		}
		dc.RootCAs = roots
	}
	return deliveries.New(dc), nil
}
