package membership

import (
	"fmt"
	"testing"
)

func TestOutboxCoalesces(t *testing.T) {
	ev := func(k EventKind, name string, state State) Event {
		return Event{Kind: k, Node: Node{Name: name, State: state}}
	}
	for _, tc := range []struct {
		name string
		in   []Event
		want []Event
	}{
		{"an update after a join not yet taken stays a join",
			[]Event{ev(EventJoin, "a", StateJoining), ev(EventUpdate, "a", StateAlive)},
			[]Event{ev(EventJoin, "a", StateAlive)}},
		{"a failure replaces a join not yet taken",
			[]Event{ev(EventJoin, "a", StateAlive), ev(EventFail, "a", StateDead)},
			[]Event{ev(EventFail, "a", StateDead)}},
		{"a join after a failure not yet taken is a join (a restart)",
			[]Event{ev(EventFail, "a", StateDead), ev(EventJoin, "a", StateAlive)},
			[]Event{ev(EventJoin, "a", StateAlive)}},
		{"a node keeps its first place in line",
			[]Event{ev(EventJoin, "a", StateAlive), ev(EventJoin, "b", StateAlive), ev(EventUpdate, "a", StateDraining)},
			[]Event{ev(EventJoin, "a", StateDraining), ev(EventJoin, "b", StateAlive)}},
		{"events of different nodes are never merged",
			[]Event{ev(EventUpdate, "a", StateAlive), ev(EventLeave, "b", StateLeft), ev(EventFail, "c", StateDead)},
			[]Event{ev(EventUpdate, "a", StateAlive), ev(EventLeave, "b", StateLeft), ev(EventFail, "c", StateDead)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o outbox
			for _, e := range tc.in {
				o.add(e)
			}
			var got []Event
			for e, ok := o.peek(); ok; e, ok = o.peek() {
				got = append(got, e)
				o.pop()
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("taken %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOutboxIsBoundedByNodes(t *testing.T) {
	var o outbox
	for i := range 10_000 {
		o.add(Event{Kind: EventUpdate, Node: Node{Name: fmt.Sprint("n", i%3)}})
	}
	if len(o.order) != 3 || len(o.latest) != 3 {
		t.Fatalf("10000 events of 3 nodes left %d queued", len(o.order))
	}
}
