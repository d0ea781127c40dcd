package actors

import "testing"

// A delivery actor keeps the records of waiting events in memory, within
// heldBudget, and stops counting a record once it leaves for its attempt
// or the queue: a budget that leaked would end up holding nothing.
func TestHeldRecordsStayWithinTheirBudget(t *testing.T) {
	var q deliveryQueue
	rec := make([]byte, heldBudget/4+1)
	var ds []*delivery
	for seq := uint64(1); seq <= 4; seq++ {
		d := q.push("c", seq)
		q.hold(d, rec)
		ds = append(ds, d)
	}
	for i, want := range []bool{true, true, true, false} {
		if got := ds[i].rec != nil; got != want {
			t.Fatalf("record %d held: %v, want %v (budget %d, held %d)", i+1, got, want, heldBudget, q.held)
		}
	}
	// The first leaves for its attempt, as takeDeliveries does, then is
	// delivered; the second is popped while waiting (dead-lettered).
	q.release(ds[0])
	ds[0].inFlight = true
	ds[0].inFlight, ds[0].rec = false, nil
	q.pop(1)
	q.pop(2)
	if want := len(rec); q.held != want {
		t.Fatalf("held %d bytes after two left, want %d", q.held, want)
	}
	q.hold(q.push("c", 5), rec)
	if q.state[5].rec == nil {
		t.Fatal("a record within the budget freed by the others was not held")
	}
}
