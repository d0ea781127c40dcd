package persistence

import "github.com/cockroachdb/pebble/v2/vfs"

// Dir is the directory the store was opened in, and FS its filesystem:
// where the replication package keeps the raft log beside the records
// (in a subdirectory, which Pebble ignores), on the same filesystem, so a
// test's crash of one is a crash of both.
func (s *Store) Dir() string { return s.dir }

// FS is the filesystem of Dir: for the real disk, vfs.Default with the
// data syncs of its *.log files made as the WAL's are (walsync_linux.go):
// the raft log's segments are such files.
func (s *Store) FS() vfs.FS { return s.fs }
