package actors

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// The one rule of every expiry: a thing with a lifetime lives while
// now < start + lifetime, and is gone at that instant. These tests hold
// the service clock still at the instants around it.

// stillClock is a service clock that does not move unless set.
type stillClock struct{ t time.Time }

func (c *stillClock) Now() time.Time { return c.t }

// expiryStore opens an in-memory store closed when the test ends.
func expiryStore(t *testing.T) *persistence.Store {
	t.Helper()
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// boundaryRows are the instants around an expiry at end: a nanosecond
// before it the thing lives; at it and after it, it is gone.
func boundaryRows(end time.Time) []struct {
	name  string
	now   time.Time
	lives bool
} {
	return []struct {
		name  string
		now   time.Time
		lives bool
	}{
		{"lives 1 ns before its end", end.Add(-time.Nanosecond), true},
		{"gone at its end", end, false},
		{"gone 1 ns after its end", end.Add(time.Nanosecond), false},
		{"gone 1 ms after its end", end.Add(time.Millisecond), false},
	}
}

// A developer log entry is kept for LogRetention (docs/decisions.md
// "Developer log retention": an expired entry is never shown), to the
// nanosecond, though the cutoff of the scan is a millisecond prefix of
// the entry ids.
func TestDevLogEntryExpiresAtItsInstant(t *testing.T) {
	// Half a millisecond and a nanosecond into a millisecond: the
	// entry's id prefix is the millisecond, its At is not.
	at := time.Unix(1_800_000_000, 500_001)
	for _, row := range boundaryRows(at.Add(LogRetention)) {
		t.Run(row.name, func(t *testing.T) {
			clk := &stillClock{at}
			env := &Env{Store: expiryStore(t), Clock: clk}
			const kit = "0190a0a0-0000-7000-8000-000000000001"
			b := env.newBatch()
			env.putLog(b, partition.Of(kit), kit, newLogEntry(env, LogSourceAudit, LogLevelInfo, "version.uploaded", ""))
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			clk.t = row.now
			entries, _, err := ReadDevLog(env, kit, "", 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			if shown := len(entries) == 1; shown != row.lives {
				t.Fatalf("at %v after the entry: shown %v, want %v", row.now.Sub(at), shown, row.lives)
			}
		})
	}
}

// A dead letter is kept for DeliveryRetention after it died
// (docs/deliveries.md "Retention": one whose finishedAt is 7 days old is
// deleted), as an event waiting in the outbox is dropped once its
// position is at or below now - DeliveryRetention.
func TestDeadLetterExpiresAtItsInstant(t *testing.T) {
	died := time.Unix(1_800_000_000, 500_001)
	for _, row := range boundaryRows(died.Add(DeliveryRetention)) {
		t.Run(row.name, func(t *testing.T) {
			env := &Env{Store: expiryStore(t), Clock: &stillClock{row.now}}
			a := &deliveryActor{env: env, id: "inst", ep: &kitpb.DeliveryEndpoint{}, taken: map[string]uint64{}}
			b := env.newBatch()
			put(b, deadEventKey(a.id, 1), &kitpb.Event{Sequence: 1, ConversationId: "c", FinishedAt: nanos(died)})
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			a.sweep()
			kept, err := env.Store.Has(deadEventKey(a.id, 1))
			if err != nil {
				t.Fatal(err)
			}
			if kept != row.lives {
				t.Fatalf("at %v after it died: kept %v, want %v", row.now.Sub(died), kept, row.lives)
			}
		})
	}
}
