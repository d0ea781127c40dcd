package history

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// store is the model a window must agree with: the conversation's
// messages by position, each with its JSON.
type store struct{ json map[uint64][]byte }

func newStore(n int) *store {
	s := &store{json: map[uint64][]byte{}}
	for seq := uint64(1); seq <= uint64(n); seq++ {
		s.put(seq, 0)
	}
	return s
}

func (s *store) put(seq uint64, version int) Entry {
	e := Entry{Seq: seq, JSON: fmt.Appendf(nil, `{"seq":%d,"v":%d}`, seq, version)}
	s.json[seq] = e.JSON
	return e
}

func (s *store) last() uint64 { return uint64(len(s.json)) }

// page is what the store answers: at most limit entries older than before
// (0: from the newest), newest first, and whether older ones remain.
func (s *store) page(before uint64, limit int) ([]Entry, bool) {
	top := s.last()
	if before != 0 {
		top = min(top, before-1)
	}
	var out []Entry
	for seq := top; seq >= 1; seq-- {
		if len(out) == limit {
			return out, true
		}
		out = append(out, Entry{Seq: seq, JSON: s.json[seq]})
	}
	return out, false
}

// read is the owner's miss: the store's page, then Fill.
func (s *store) read(w *Window, before uint64, limit int) {
	p, more := s.page(before, limit)
	w.Fill(before, p, more)
}

// agrees checks every page the window answers against the store, and
// returns which (before, limit) it answered.
func agrees(t *testing.T, w *Window, s *store) map[[2]int]bool {
	t.Helper()
	hit := map[[2]int]bool{}
	for before := 0; before <= int(s.last())+1; before++ {
		for limit := 1; limit <= int(s.last())+1; limit++ {
			got, last, more, ok := w.Page(uint64(before), limit, nil)
			if !ok {
				continue
			}
			hit[[2]int{before, limit}] = true
			want, wantMore := s.page(uint64(before), limit)
			if len(got) != len(want) || more != wantMore {
				t.Fatalf("page before %d limit %d: %d messages more %v, store %d more %v", before, limit, len(got), more, len(want), wantMore)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i].JSON) {
					t.Fatalf("page before %d limit %d message %d: %s, store %s", before, limit, i, got[i], want[i].JSON)
				}
			}
			if len(want) > 0 && last != want[len(want)-1].Seq {
				t.Fatalf("page before %d limit %d: last %d, store %d", before, limit, last, want[len(want)-1].Seq)
			}
		}
	}
	return hit
}

func TestWindowAnswersOnlyWhatTheStoreWould(t *testing.T) {
	type page struct {
		before, limit int
		hit           bool
	}
	tests := []struct {
		name  string
		max   int // MaxMessages; 0: the default
		n     int // messages in the store
		steps func(w *Window, s *store)
		pages []page
	}{
		{"an empty window misses every page", 0, 10, func(*Window, *store) {}, []page{{0, 5, false}, {0, 50, false}}},
		{"the newest page read fills an empty window", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4) },
			[]page{{0, 4, true}, {0, 3, true}, {3, 2, false}, {0, 5, false}, {11, 4, true}}},
		{"a page further down does not fill an empty window", 0, 10, func(w *Window, s *store) { s.read(w, 5, 3) },
			[]page{{5, 3, false}, {0, 1, false}}},
		{"the page right below extends the window", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); s.read(w, 7, 4) },
			[]page{{0, 8, true}, {7, 4, true}, {3, 1, false}}},
		{"a page reaching into the window extends it", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); s.read(w, 9, 5) },
			[]page{{0, 7, true}, {7, 3, true}, {5, 2, false}}},
		{"a page below a gap is left out", 0, 10, func(w *Window, s *store) { s.read(w, 0, 2); s.read(w, 5, 2) },
			[]page{{0, 2, true}, {5, 2, false}, {0, 3, false}}},
		{"a page that goes on below what is kept misses", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4) },
			[]page{{0, 5, false}, {9, 3, false}, {9, 2, true}}},
		{"a window of the whole history answers its end with no more", 0, 10, func(w *Window, s *store) { s.read(w, 0, 20) },
			[]page{{0, 10, true}, {0, 11, true}, {3, 5, true}, {1, 5, true}}},
		{"a page of exactly what is kept says more below", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4) },
			[]page{{0, 4, true}}},
		{"a post is kept as the newest", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); w.Append(s.put(11, 0)) },
			[]page{{0, 5, true}, {0, 6, false}}},
		{"a post to a window that keeps nothing stays out", 0, 10, func(w *Window, s *store) { w.Append(s.put(11, 0)) },
			[]page{{0, 1, false}}},
		{"an edit replaces the kept form", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); w.Replace(s.put(9, 1)) },
			[]page{{0, 4, true}}},
		{"a change older than the window leaves it", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); w.Replace(s.put(2, 1)) },
			[]page{{0, 4, true}}},
		{"posts beyond the bound drop the oldest eighth and more", 8, 8, func(w *Window, s *store) {
			s.read(w, 0, 8)
			w.Append(s.put(9, 0))
		}, []page{{0, 7, true}, {0, 8, false}, {3, 1, false}}},
		{"a page extends a window only up to its bound", 6, 20, func(w *Window, s *store) { s.read(w, 0, 4); s.read(w, 17, 4) },
			[]page{{0, 6, true}, {0, 7, false}}},
		{"a post out of order empties the window", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); w.Append(Entry{Seq: 5, JSON: []byte("x")}) },
			[]page{{0, 1, false}}},
		{"a change the window should hold and lacks empties it", 0, 10, func(w *Window, s *store) {
			s.read(w, 0, 20)
			w.Replace(Entry{Seq: 12, JSON: []byte("x")})
		}, []page{{0, 1, false}}},
		{"drop empties the window", 0, 10, func(w *Window, s *store) { s.read(w, 0, 4); w.Drop() }, []page{{0, 1, false}}},
		{"an empty conversation's first read keeps its end", 0, 0, func(w *Window, s *store) { s.read(w, 0, 5); w.Append(s.put(1, 0)) },
			[]page{{0, 1, true}, {0, 2, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(Options{Bytes: 1 << 30, MaxMessages: tt.max})
			w, s := b.NewWindow(), newStore(tt.n)
			tt.steps(w, s)
			hit := agrees(t, w, s)
			for _, p := range tt.pages {
				if hit[[2]int{p.before, p.limit}] != p.hit {
					t.Errorf("page before %d limit %d: answered %v, want %v", p.before, p.limit, !p.hit, p.hit)
				}
			}
		})
	}
}

// Random reads, posts and changes, with every page checked after each.
func TestWindowAgreesUnderRandomUse(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		b := NewBudget(Options{Bytes: 1 << 30, MaxMessages: 5 + r.IntN(30), MaxWindowBytes: int64(100 + r.IntN(600))})
		w, s := b.NewWindow(), newStore(r.IntN(20))
		for step := range 60 {
			switch r.IntN(4) {
			case 0:
				w.Append(s.put(s.last()+1, 0))
			case 1:
				if s.last() > 0 {
					w.Replace(s.put(1+r.Uint64N(s.last()), step))
				}
			default:
				before := uint64(0)
				if r.IntN(2) == 0 {
					before = r.Uint64N(s.last() + 2)
				}
				limit := 1 + r.IntN(12)
				if _, _, _, ok := w.Page(before, limit, nil); !ok {
					s.read(w, before, limit)
				}
			}
			agrees(t, w, s)
		}
	}
}

func TestBudget(t *testing.T) {
	full := func(b *Budget, s *store) *Window { w := b.NewWindow(); s.read(w, 0, 100); return w }
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"the bytes counted are every entry's JSON, its slot and the window's own", func(t *testing.T) {
			b := NewBudget(Options{Bytes: 1 << 20})
			s := newStore(10)
			w := full(b, s)
			var json int64
			for _, e := range s.json {
				json += int64(len(e))
			}
			w.mu.Lock()
			want := windowOverhead + int64(cap(w.entries))*entrySize + json
			w.mu.Unlock()
			if got := b.Bytes(); got != want {
				t.Fatalf("bytes %d, want %d", got, want)
			}
		}},
		{"a window emptied gives its bytes back", func(t *testing.T) {
			b := NewBudget(Options{Bytes: 1 << 20})
			w := full(b, newStore(10))
			w.Drop()
			if s := b.Stats(); s.Bytes != 0 || s.Windows != 0 {
				t.Fatalf("after drop: %+v", s)
			}
		}},
		{"a post, an edit and a trim are counted", func(t *testing.T) {
			b := NewBudget(Options{Bytes: 1 << 20, MaxMessages: 8})
			s := newStore(8)
			w := full(b, s)
			w.Append(s.put(9, 0))
			w.Replace(s.put(9, 12345))
			w.mu.Lock()
			want := windowOverhead + int64(cap(w.entries))*entrySize + w.json
			var json int64
			for _, e := range w.entries {
				json += int64(len(e.JSON))
			}
			if json != w.json {
				t.Errorf("json %d counted, %d kept", w.json, json)
			}
			w.mu.Unlock()
			if got := b.Bytes(); got != want {
				t.Fatalf("bytes %d, want %d", got, want)
			}
		}},
		{"beyond the budget the least recently used window is emptied", func(t *testing.T) {
			one := NewBudget(Options{Bytes: 1 << 20})
			full(one, newStore(10))
			size := one.Bytes()
			b := NewBudget(Options{Bytes: 2*size + size/2})
			s := newStore(10)
			w1, w2 := full(b, s), full(b, s)
			w1.Page(0, 1, nil) // w1 is now the most recently used
			full(b, s)
			if !w1.Keeps() || w2.Keeps() {
				t.Fatalf("kept: w1 %v w2 %v, want only w1", w1.Keeps(), w2.Keeps())
			}
			if st := b.Stats(); st.Bytes != 2*size || st.Evictions != 1 || st.Windows != 2 {
				t.Fatalf("stats %+v, want %d bytes in 2 windows, 1 eviction", st, 2*size)
			}
		}},
		{"a window larger than the whole budget is not kept", func(t *testing.T) {
			b := NewBudget(Options{Bytes: 100})
			w := full(b, newStore(10))
			if w.Keeps() || b.Bytes() != 0 {
				t.Fatalf("kept %v, %d bytes", w.Keeps(), b.Bytes())
			}
		}},
		{"hits and misses are counted", func(t *testing.T) {
			b := NewBudget(Options{Bytes: 1 << 20})
			w := full(b, newStore(10))
			w.Page(0, 5, nil)
			w.Page(0, 50, nil)
			w.Drop()
			w.Page(0, 5, nil)
			if s := b.Stats(); s.Hits != 2 || s.Misses != 1 {
				t.Fatalf("hits %d misses %d, want 2 and 1", s.Hits, s.Misses)
			}
		}},
		{"no budget keeps nothing", func(t *testing.T) {
			b := NewBudget(Options{Bytes: 0})
			w := b.NewWindow()
			newStore(3).read(w, 0, 5)
			if _, _, _, ok := w.Page(0, 1, nil); ok || w.Keeps() || b.Bytes() != 0 {
				t.Fatal("a budget of 0 bytes kept something")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// Owners and evictions at once (run with -race): afterwards the budget
// counts exactly what the windows keep, and no more than its bound.
func TestBudgetUnderConcurrentOwners(t *testing.T) {
	b := NewBudget(Options{Bytes: 4 << 10, MaxMessages: 50})
	windows := make([]*Window, 16)
	var wg sync.WaitGroup
	for i := range windows {
		windows[i] = b.NewWindow()
		wg.Add(1)
		go func(w *Window, seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 1))
			s := newStore(10)
			for range 2000 {
				switch r.IntN(3) {
				case 0:
					w.Append(s.put(s.last()+1, 0))
				case 1:
					w.Replace(s.put(1+r.Uint64N(s.last()), 1))
				default:
					if _, _, _, ok := w.Page(0, 5, nil); !ok {
						s.read(w, 0, 5)
					}
				}
			}
		}(windows[i], uint64(i))
	}
	wg.Wait()
	var sum int64
	for _, w := range windows {
		w.mu.Lock()
		sum += w.bytes
		w.mu.Unlock()
	}
	if got := b.Bytes(); got != sum || got > 4<<10 {
		t.Fatalf("budget counts %d, windows keep %d, bound %d", got, sum, 4<<10)
	}
}

// What the budget counts is what the heap holds: filling far more windows
// than the budget takes leaves a live heap of about the budget, not of
// what was filled.
func TestBudgetBoundsTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 120 MB")
	}
	const bound = 32 << 20
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	base := heap()
	b := NewBudget(Options{Bytes: bound})
	windows := make([]*Window, 4000)
	for i := range windows {
		windows[i] = b.NewWindow()
		read := make([]Entry, 100)
		for j := range read {
			read[j] = Entry{Seq: uint64(100 - j), JSON: bytes.Repeat([]byte{'x'}, 250+j)}
		}
		windows[i].Fill(0, read, false)
	}
	grown := heap() - base
	if kept := b.Bytes(); kept > bound || grown > bound*5/4 || grown < kept*3/4 {
		t.Fatalf("budget %d counts %d kept; the heap grew by %d", bound, kept, grown)
	}
	t.Logf("bound %d, counted %d, heap grew %d", bound, b.Bytes(), grown)
	runtime.KeepAlive(windows)
}
