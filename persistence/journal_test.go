package persistence

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// recovered is what Recover handed to its callbacks.
type recovered struct {
	restored bool
	state    string
	events   []string // "seq:event"
	last     uint64
}

func recoverAll(t testing.TB, j *Journal) recovered {
	t.Helper()
	var r recovered
	last, err := j.Recover(func(state []byte) error {
		if r.restored {
			t.Error("restore called twice")
		}
		r.restored, r.state = true, string(state)
		return nil
	}, func(seq uint64, event []byte) error {
		r.events = append(r.events, fmt.Sprintf("%d:%s", seq, event))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.last = last
	return r
}

func TestJournalRecover(t *testing.T) {
	appendN := func(j *Journal, b *Batch, from, to uint64) {
		for seq := from; seq <= to; seq++ {
			j.Append(b, seq, fmt.Appendf(nil, "e%d", seq))
		}
	}
	tests := []struct {
		name  string
		steps []func(j *Journal, b *Batch) // each step is one committed batch
		want  recovered
	}{
		{name: "no data", want: recovered{}},
		{
			name:  "events only",
			steps: []func(*Journal, *Batch){func(j *Journal, b *Batch) { appendN(j, b, 1, 3) }},
			want:  recovered{events: []string{"1:e1", "2:e2", "3:e3"}, last: 3},
		},
		{
			name:  "snapshot only",
			steps: []func(*Journal, *Batch){func(j *Journal, b *Batch) { j.Snapshot(b, 5, []byte("S5")) }},
			want:  recovered{restored: true, state: "S5", last: 5},
		},
		{
			name:  "empty snapshot state",
			steps: []func(*Journal, *Batch){func(j *Journal, b *Batch) { j.Snapshot(b, 1, nil) }},
			want:  recovered{restored: true, state: "", last: 1},
		},
		{
			name: "snapshot then later events",
			steps: []func(*Journal, *Batch){
				func(j *Journal, b *Batch) { appendN(j, b, 1, 3) },
				func(j *Journal, b *Batch) { j.Snapshot(b, 3, []byte("S3")) },
				func(j *Journal, b *Batch) { appendN(j, b, 4, 5) },
			},
			want: recovered{restored: true, state: "S3", events: []string{"4:e4", "5:e5"}, last: 5},
		},
		{
			name: "snapshot in the middle of committed events",
			steps: []func(*Journal, *Batch){
				func(j *Journal, b *Batch) { appendN(j, b, 1, 5) },
				func(j *Journal, b *Batch) { j.Snapshot(b, 3, []byte("S3")) },
			},
			want: recovered{restored: true, state: "S3", events: []string{"4:e4", "5:e5"}, last: 5},
		},
		{
			name: "append and snapshot in one batch",
			steps: []func(*Journal, *Batch){
				func(j *Journal, b *Batch) {
					appendN(j, b, 1, 4)
					j.Snapshot(b, 2, []byte("S2"))
				},
			},
			want: recovered{restored: true, state: "S2", events: []string{"3:e3", "4:e4"}, last: 4},
		},
		{
			name: "newer snapshot replaces older",
			steps: []func(*Journal, *Batch){
				func(j *Journal, b *Batch) { appendN(j, b, 1, 2); j.Snapshot(b, 2, []byte("S2")) },
				func(j *Journal, b *Batch) { appendN(j, b, 3, 6); j.Snapshot(b, 6, []byte("S6")) },
				func(j *Journal, b *Batch) { appendN(j, b, 7, 7) },
			},
			want: recovered{restored: true, state: "S6", events: []string{"7:e7"}, last: 7},
		},
		{
			name: "snapshot at max seq",
			steps: []func(*Journal, *Batch){
				func(j *Journal, b *Batch) { appendN(j, b, math.MaxUint64-1, math.MaxUint64-1) },
				func(j *Journal, b *Batch) { j.Snapshot(b, math.MaxUint64, []byte("M")) },
			},
			want: recovered{restored: true, state: "M", last: math.MaxUint64},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openMem(t)
			j := s.Journal("conversation/0b9c")
			for _, step := range tc.steps {
				b := s.NewBatch()
				step(j, b)
				commit(t, b)
			}
			got := recoverAll(t, j)
			if got.restored != tc.want.restored || got.state != tc.want.state ||
				!slices.Equal(got.events, tc.want.events) || got.last != tc.want.last {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestJournalSnapshotDeletesCoveredEvents checks the raw keys, not only what
// Recover shows, so covered events really are gone from disk.
func TestJournalSnapshotDeletesCoveredEvents(t *testing.T) {
	s := openMem(t)
	j := s.Journal("c/1")
	b := s.NewBatch()
	for seq := uint64(1); seq <= 5; seq++ {
		j.Append(b, seq, []byte("e"))
	}
	commit(t, b)
	b = s.NewBatch()
	j.Snapshot(b, 3, []byte("S"))
	commit(t, b)

	var got []string
	if err := s.Scan([]byte("j/"), PrefixEnd([]byte("j/")), false, func(k, _ []byte) bool {
		got = append(got, fmt.Sprintf("%q", k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("%q", "j/c/1/e/\x00\x00\x00\x00\x00\x00\x00\x04"),
		fmt.Sprintf("%q", "j/c/1/e/\x00\x00\x00\x00\x00\x00\x00\x05"),
		fmt.Sprintf("%q", "j/c/1/s"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("keys after snapshot:\n got %v\nwant %v", got, want)
	}
	v, err := s.Get([]byte("j/c/1/s"))
	if err != nil || string(v) != "\x00\x00\x00\x00\x00\x00\x00\x03S" {
		t.Fatalf("snapshot value = %q, %v", v, err)
	}
}

// TestJournalStreamIsolation uses stream names that are prefixes of each
// other, including ones that would collide with raw names ("a" owns
// "j/a/e/..." which is where "a/e" would put its keys).
func TestJournalStreamIsolation(t *testing.T) {
	s := openMem(t)
	streams := []string{"a", "a/b", "a/e", "a/e/e", "a/s", "ab", "a/%65", "e", "%65", ""}
	b := s.NewBatch()
	for i, name := range streams {
		j := s.Journal(name)
		for seq := uint64(1); seq <= 3; seq++ {
			j.Append(b, seq, fmt.Appendf(nil, "%s#%d", name, seq))
		}
		// Large, distinct sequence numbers: their bytes include '/', 'e'
		// and 's', which is where raw names would overlap.
		j.Append(b, 0x652f000000000000+uint64(i), []byte(name+"#big"))
	}
	commit(t, b)

	for _, name := range streams {
		got := recoverAll(t, s.Journal(name))
		if len(got.events) != 4 || got.restored {
			t.Errorf("stream %q recovered %+v", name, got)
			continue
		}
		for seq, ev := range got.events[:3] {
			if want := fmt.Sprintf("%d:%s#%d", seq+1, name, seq+1); ev != want {
				t.Errorf("stream %q event %q, want %q", name, ev, want)
			}
		}
	}

	// A snapshot at the maximum sequence deletes the whole event range of
	// "a"; every other stream must be untouched.
	b = s.NewBatch()
	s.Journal("a").Snapshot(b, math.MaxUint64, []byte("A"))
	commit(t, b)
	for _, name := range streams {
		got := recoverAll(t, s.Journal(name))
		if name == "a" {
			if !got.restored || got.state != "A" || len(got.events) != 0 {
				t.Errorf("stream a recovered %+v", got)
			}
			continue
		}
		if got.restored || len(got.events) != 4 {
			t.Errorf("stream %q disturbed by a's snapshot: %+v", name, got)
		}
	}
}

func TestEncodeStream(t *testing.T) {
	tests := []struct{ in, want string }{
		{"conversation/0b9c-11", "conversation/0b9c-11"},
		{"a/b", "a/b"},
		{"ee/e1/se", "ee/e1/se"},
		{"e", "%65"},
		{"a/e", "a/%65"},
		{"e/e/", "%65/%65/"},
		{"%", "%25"},
		{"%65", "%2565"},
		{"", ""},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		got := encodeStream(tc.in)
		if got != tc.want {
			t.Errorf("encodeStream(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q encode alike", prev, tc.in)
		}
		seen[got] = tc.in
	}
}

func TestJournalRecoverErrors(t *testing.T) {
	s := openMem(t)
	j := s.Journal("x")
	b := s.NewBatch()
	j.Append(b, 1, []byte("e1"))
	j.Append(b, 2, []byte("e2"))
	j.Snapshot(b, 0, []byte("S"))
	commit(t, b)

	boom := errors.New("boom")
	ok := func([]byte) error { return nil }
	if _, err := j.Recover(func([]byte) error { return boom }, nil); !errors.Is(err, boom) {
		t.Errorf("restore error: got %v", err)
	}
	calls := 0
	_, err := j.Recover(ok, func(uint64, []byte) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("replay error: got %v after %d calls", err, calls)
	}
}

// TestJournalEventsOwnedByCaller: Recover's slices stay valid after it returns.
func TestJournalEventsOwnedByCaller(t *testing.T) {
	s := openMem(t)
	j := s.Journal("x")
	b := s.NewBatch()
	for seq := uint64(1); seq <= 100; seq++ {
		j.Append(b, seq, fmt.Appendf(nil, "event-%03d", seq))
	}
	commit(t, b)
	var kept [][]byte
	if _, err := j.Recover(nil, func(_ uint64, ev []byte) error {
		kept = append(kept, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, ev := range kept {
		if want := fmt.Sprintf("event-%03d", i+1); string(ev) != want {
			t.Fatalf("kept event %d = %q, want %q", i, ev, want)
		}
	}
}
