package persistence

import (
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncerProcs is how many Ps (GOMAXPROCS) the store's WAL syncer keeps
// while its fdatasync is in flight. A process running a Store adds them to
// the Ps it gives Go code (cmd/kitd does), so that the syncer does not take
// one from the actors.
const SyncerProcs = 1

// withWALSync wraps the real disk so that WAL syncs keep their P.
//
// Under write load the WAL's fdatasync is in flight nearly all the time,
// back to back, and takes 0.1 to 0.8 ms. A blocking syscall made the Go
// way releases its P after 20 µs: sysmon polls every 20 µs while one is
// outstanding, hands the P to another thread, and the syncer parks when the
// sync returns and no P is free, so the waiters it should wake wait for it
// (golang/go#18236). Under the webhook benchmark sysmon was 7.7% of kitd's
// CPU and futex wake-ups 4.3%; with a raw syscall, which keeps the P for
// the sync's duration (SyncerProcs adds it back), 1.9% each, and the
// waiters are answered sooner (bench/README.md, "The WAL sync keeps its P").
//
// The price: a garbage collection's stop-the-world waits for a sync in
// flight, so a disk that stalls stalls the whole node rather than only its
// writers. Every write waits for the WAL anyway, and Pebble's disk-health
// check reports a stall either way.
func withWALSync(fs vfs.FS) *walSyncFS { return &walSyncFS{FS: fs} }

// rawSyncData is fdatasync(2) without entersyscall: the P stays with the
// goroutine.
func rawSyncData(fd uintptr) error {
	for {
		_, _, errno := syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return errno
	}
}
