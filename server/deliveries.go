package server

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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

// sealingKeyFile is the data directory's file of a sealing key that is
// not its own secret key: a restored cluster backup brings the cluster's.
const sealingKeyFile = "sealing-key"

// sealKeys is what seals and opens the Kits' signing secrets.
type sealKeys struct {
	seal []byte   // actors.Env.SealKey
	open [][]byte // actors.Env.OpenKeys: seal first
	own  []byte   // <data>/secret-key
}

// sealingKeys chooses them for a node of dataDir and clusterKey ("" for a
// node alone): in a cluster every member seals with the key derived from
// the cluster key, since a sealed secret is replicated to them all; a node
// alone with a <data>/sealing-key (restored from a cluster's backup) seals
// with it; else with <data>/secret-key, as before clusters. Every other of
// those keys still opens, so what was sealed before opens still.
func sealingKeys(dataDir, clusterKey string) (sealKeys, error) {
	own, err := secretKey(dataDir)
	if err != nil {
		return sealKeys{}, err
	}
	restored, err := readKey(filepath.Join(dataDir, sealingKeyFile))
	if err != nil {
		return sealKeys{}, err
	}
	candidates := [][]byte{restored, own}
	if clusterKey != "" {
		derived, err := actors.ClusterSealKey(clusterKey)
		if err != nil {
			return sealKeys{}, err
		}
		candidates = append([][]byte{derived}, candidates...)
	}
	k := sealKeys{own: own}
	for _, c := range candidates {
		if c == nil || slices.ContainsFunc(k.open, func(o []byte) bool { return bytes.Equal(o, c) }) {
			continue
		}
		if k.seal == nil {
			k.seal = c
		}
		k.open = append(k.open, c)
	}
	return k, nil
}

// readKey reads a 32-byte key file; nil if there is none.
func readKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("%s: %d bytes, want 32", path, len(b))
	}
	return b, nil
}

// sender builds the delivery sender of Config's Delivery fields.
func sender(cfg Config, env *actors.Env) (*deliveries.Sender, error) {
	dc := deliveries.Config{Node: env.Host, Clock: env.Clock, Encode: api.EventBody, Logger: cfg.Logger, Timeout: cfg.DeliveryTimeout, Allow: cfg.DeliveryAllow, KitState: env.KitStateOf}
	if cfg.DeliveryCA != "" {
		roots, err := deliveries.LoadRoots(cfg.DeliveryCA)
		if err != nil {
			return nil, fmt.Errorf("--delivery-ca: %w", err)
		}
		dc.RootCAs = roots
	}
	return deliveries.New(dc), nil
}
