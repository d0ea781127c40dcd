package membership

import (
	"log/slog"
	"testing"
)

// A member that leaves is recorded "left", one that dies "dead": told
// apart by memberlist's verdict or by the member's goodbye, whichever
// arrives, in either order.
func TestLeaveOrDeath(t *testing.T) {
	const life, otherLife = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	leave := func() notice { return notice{kind: noteLeave, name: "n2", addr: "127.0.0.1:2"} }
	goodbye := func(id string) notice { return notice{kind: noteGoodbye, systemID: id} }
	for _, tc := range []struct {
		rule    string
		notes   []notice
		state   State
		consume EventKind // the event the consumer takes last
	}{
		{"a death memberlist found is a failure", []notice{leave()}, StateDead, EventFail},
		{"a goodbye before the death makes it a leave", []notice{goodbye(life), leave()}, StateLeft, EventLeave},
		{"a goodbye after the death makes it a leave", []notice{leave(), goodbye(life)}, StateLeft, EventLeave},
		{"a goodbye of another life is not this one's", []notice{goodbye(otherLife), leave()}, StateDead, EventFail},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			m := &Membership{name: "n0", log: slog.New(slog.DiscardHandler), nodes: map[string]*entry{
				"n2": {Node: Node{Name: "n2", State: StateAlive, Meta: Meta{SystemID: life, State: StateAlive}}},
			}}
			for i := range tc.notes {
				m.apply(&tc.notes[i])
			}
			if got := m.nodes["n2"].State; got != tc.state {
				t.Fatalf("state %v, want %v", got, tc.state)
			}
			ev, ok := m.pending.peek()
			if !ok || ev.Kind != tc.consume || ev.Node.Name != "n2" {
				t.Fatalf("the consumer gets %+v (%v), want %v of n2", ev, ok, tc.consume)
			}
		})
	}
}
