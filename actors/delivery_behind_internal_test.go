package actors

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
)

// checkedBounds reads a store as another node serves a read of its
// partition: a range whose bounds are crossed is refused
// (CheckReadRecords).
type checkedBounds struct{ *persistence.Store }

func (r checkedBounds) Scan(lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error {
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return errors.New("upper: a bound outside the partition")
	}
	return r.Store.Scan(lower, upper, reverse, fn)
}

// A read of the outbox seeks past what the queue already refers to, but
// never past the end of its range: the read around the partitions ends
// its last range at the cursor, which may lie before what was taken of
// the conversation it stopped in, and a node serving another's read
// refuses crossed bounds.
func TestAReadOfTheOutboxSkipsNoFurtherThanItsRange(t *testing.T) {
	store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	inst, source := ids.New(), ids.New()
	b := store.NewBatch()
	for pos := uint64(1); pos <= 40; pos++ {
		b.Set(outboxKey(inst, source, pos), []byte{})
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	a := &deliveryActor{env: &Env{Store: store, Clock: clock.NewTest()}, id: inst, taken: map[string]uint64{source: 100}}
	room := 8
	lower, upper := outboxPrefix(partition.Of(source), inst), outboxKey(inst, source, 30) // the cursor
	stop, left, err := a.takeRange(checkedBounds{store}, lower, upper, &room, 0)
	if err != nil || stop != nil || left || room != 8 {
		t.Fatalf("takeRange = %q, %v, %v (room %d); want nothing taken, and no error", stop, left, err, room)
	}
}
