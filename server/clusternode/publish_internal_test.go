package clusternode

import (
	"testing"
	"time"
)

// A publish that fails is worth a warning only once it has kept failing
// for publishPatience, once an episode: the broadcast times out while the
// members of a starting cluster join, and the next tick publishes again.
func TestFailingPublishesWarnOnceTheyLast(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var p publishTrouble
	steps := []struct {
		name string
		ok   bool // a publish that went through
		at   time.Duration
		warn bool
	}{
		{name: "a first failure says nothing", at: 0},
		{name: "failures within the patience say nothing", at: publishPatience - time.Millisecond},
		{name: "a failure once they have lasted the patience warns", at: publishPatience, warn: true},
		{name: "the episode warns once", at: 2 * publishPatience},
		{name: "a publish that goes through ends the episode", ok: true, at: 2*publishPatience + time.Second},
		{name: "a new episode starts quiet", at: 3 * publishPatience},
		{name: "and warns once it lasts", at: 4 * publishPatience, warn: true},
	}
	for _, s := range steps {
		if s.ok {
			p.ok()
			continue
		}
		if got := p.failed(at(s.at)); got != s.warn {
			t.Fatalf("%s: warn %v, want %v", s.name, got, s.warn)
		}
	}
}
