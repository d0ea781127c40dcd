// Package persistence owns the bytes on disk: one embedded Pebble database
// holding every actor's records under ordered keys. It knows nothing about
// HTTP or actors' rules; it only promises that a committed batch is durable
// before Commit returns, and that concurrent commits share one fsync.
package persistence
