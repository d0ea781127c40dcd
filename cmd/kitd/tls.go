package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kitd/kitd/http/tlscert"
)

// loadTLS reads --tls-cert and --tls-key; nil without them (plain HTTP).
// A pair that does not load stops the start: serving plain HTTP instead
// would put tokens on the wire in clear.
func loadTLS(cfg config, logger *slog.Logger) (*tlscert.Holder, error) {
	if cfg.tlsCert == "" {
		return nil, nil
	}
	certs, err := tlscert.Load(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	logger.Info("tls certificate loaded", certs.Attrs()...)
	return certs, nil
}

// reloadTLSOnHangup reads the pair of certs again on each SIGHUP until
// the returned stop is called (package server serves it). SIGHUP is
// caught only then: without TLS it ends the process, as it always did.
func reloadTLSOnHangup(certs *tlscert.Holder, logger *slog.Logger) (stop func()) {
	if certs == nil {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				reloadTLS(certs, logger)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// reloadTLS reads the pair again; one that fails to load leaves the
// current one served, and the line says why (never with the key).
func reloadTLS(certs *tlscert.Holder, logger *slog.Logger) {
	if err := certs.Reload(); err != nil {
		logger.Error("tls certificate reload failed; serving the previous one", "err", err)
		return
	}
	logger.Info("tls certificate reloaded", certs.Attrs()...)
}
