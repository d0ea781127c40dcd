// Package persistence owns the bytes on disk: one embedded Pebble database
// holding every actor's journal (events after its latest snapshot), its
// snapshot, and the ordered records that are too large to keep in an actor
// (message history, files, logs). It knows nothing about HTTP or actors'
// rules; it only promises that a committed batch is durable.
package persistence
