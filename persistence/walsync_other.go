//go:build !linux

package persistence

import "github.com/cockroachdb/pebble/v2/vfs"

// SyncerProcs is 0 where WAL syncs are made the Go way: the runtime hands
// the syncer's P to other goroutines while it waits.
const SyncerProcs = 0

// withWALSync returns nil: outside Linux the WAL uses the inner file's sync.
func withWALSync(vfs.FS) *walSyncFS { return nil }

func rawSyncData(uintptr) error { panic("persistence: raw WAL sync outside Linux") }
