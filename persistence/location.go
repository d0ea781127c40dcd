package persistence

import "github.com/cockroachdb/pebble/v2/vfs"

// Dir is the directory the store was opened in, and FS its filesystem:
// where the replication package keeps the raft log beside the records
// (in a subdirectory, which Pebble ignores), on the same filesystem, so a
// test's crash of one is a crash of both.
func (s *Store) Dir() string { return s.dir }

// FS is the filesystem of Dir (vfs.Default for the real disk).
func (s *Store) FS() vfs.FS { return s.fs }
