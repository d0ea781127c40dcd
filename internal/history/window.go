package history

import (
	"slices"
	"sync"
)

// Entry is one message kept: its position in the conversation and its
// JSON. The JSON is never changed once given to a window (a change of the
// message is a new Entry), so a page may hand it out without a copy.
type Entry struct {
	Seq  uint64
	JSON []byte
}

// Window is the newest messages of one conversation. Its owner (the
// conversation actor) calls its methods one at a time; the budget may
// empty it at any moment in between, from another goroutine, so every
// method holds its lock. A nil window keeps nothing: every page misses.
//
// The rule a loaded window keeps: entries holds every message of the
// conversation whose position is above floor, in ascending order; floor 0
// means it holds the whole history, and a floor above 0 means at least one
// older message exists (the one whose position is floor, or another).
type Window struct {
	b *Budget

	mu      sync.Mutex
	loaded  bool
	floor   uint64
	entries []Entry
	json    int64 // bytes of the entries' JSON
	bytes   int64 // what the budget counts for this window

	// Links of the budget's list, under the budget's lock.
	prev, next *Window
	listed     bool
}

// Page answers the page of at most limit messages older than before (0:
// from the newest), newest first, appended to dst: the messages' JSON,
// the position of the page's oldest one and whether older ones remain.
// ok is false when the window cannot tell the page alone: the caller then
// reads the store.
func (w *Window) Page(before uint64, limit int, dst [][]byte) (page [][]byte, last uint64, more, ok bool) {
	if w == nil {
		return dst, 0, false, false
	}
	w.mu.Lock()
	page, last, more, ok = w.page(before, limit, dst)
	w.mu.Unlock()
	if !ok {
		w.b.misses.Inc()
		return page, 0, false, false
	}
	w.b.hits.Inc()
	w.b.used(w)
	return page, last, more, true
}

func (w *Window) page(before uint64, limit int, dst [][]byte) ([][]byte, uint64, bool, bool) {
	if !w.loaded || limit <= 0 {
		return dst, 0, false, false
	}
	n := len(w.entries) // entries older than before
	if before != 0 {
		n, _ = slices.BinarySearchFunc(w.entries, before, func(e Entry, s uint64) int { return cmpSeq(e.Seq, s) })
	}
	var more bool
	switch {
	case n > limit:
		more = true
	case n == limit:
		more = w.floor != 0
	case w.floor != 0:
		return dst, 0, false, false // the page goes on below what is kept
	}
	from := max(n-limit, 0)
	for i := n - 1; i >= from; i-- {
		dst = append(dst, w.entries[i].JSON)
	}
	var last uint64
	if n > from {
		last = w.entries[from].Seq
	}
	return dst, last, more, true
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Fill keeps what the owner read from the store: read is the page of the
// messages older than before (0: from the newest), newest first, as Page
// answers it, and more whether older ones remain. An empty window keeps a
// page read from the newest; a loaded one keeps a page that reaches into
// what it keeps or starts right below it, so that walking history by
// cursor extends the window (up to its bounds). Any other page is left out.
func (w *Window) Fill(before uint64, read []Entry, more bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.fill(before, read, more)
	w.settle()
	w.done()
}

func (w *Window) fill(before uint64, read []Entry, more bool) {
	floor := uint64(0)
	if more && len(read) > 0 {
		floor = read[len(read)-1].Seq - 1
	}
	if !w.loaded {
		if before != 0 || (more && len(read) == 0) {
			return
		}
		w.loaded, w.floor = true, floor
		w.prepend(read)
		return
	}
	if before != 0 && before <= w.floor {
		return // a page further down: the window would have a gap
	}
	older := read
	for len(older) > 0 && older[0].Seq > w.floor {
		older = older[1:] // kept already
	}
	if len(older) == 0 {
		return
	}
	w.floor = floor
	w.prepend(older)
}

// prepend puts older (newest first, all below entries) before entries,
// as many as the window's bounds let it keep.
func (w *Window) prepend(older []Entry) {
	room := w.b.maxMessages - len(w.entries)
	bytes := w.b.maxBytes - w.json
	keep := 0
	for keep < len(older) && keep < room && (int64(len(older[keep].JSON)) <= bytes || len(w.entries)+keep == 0) {
		bytes -= int64(len(older[keep].JSON))
		keep++
	}
	if keep < len(older) {
		w.floor = older[keep].Seq // left out: at least that one is older
	}
	if keep == 0 {
		return
	}
	next := make([]Entry, 0, keep+len(w.entries))
	for i := keep - 1; i >= 0; i-- {
		next = append(next, older[i])
		w.json += int64(len(older[i].JSON))
	}
	w.entries = append(next, w.entries...)
}

// Keeps reports whether the window keeps messages now: its owner encodes
// a change for it only then (the budget may empty it in between, and
// Append and Replace then leave it empty).
func (w *Window) Keeps() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loaded
}

// Append keeps a message just committed, the newest of the conversation.
// A window that kept nothing stays so: it is filled from the store when
// it is next read.
func (w *Window) Append(e Entry) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.loaded {
		w.mu.Unlock()
		return
	}
	if n := len(w.entries); n > 0 && w.entries[n-1].Seq >= e.Seq {
		w.unload() // not the newest: the owner lost track; read the store again
	} else {
		w.entries = append(w.entries, e)
		w.json += int64(len(e.JSON))
		w.trim()
	}
	w.settle()
	w.done()
}

// trim drops the oldest entries beyond the window's bounds, an eighth of
// the bound more than needed so that a window at its bound does not move
// its entries on every post.
func (w *Window) trim() {
	n := len(w.entries)
	if n <= w.b.maxMessages && w.json <= w.b.maxBytes {
		return
	}
	drop := 0
	if n > w.b.maxMessages {
		drop = n - w.b.maxMessages*7/8
	}
	json := w.json
	for _, e := range w.entries[:drop] {
		json -= int64(len(e.JSON))
	}
	if w.json > w.b.maxBytes {
		for drop < n-1 && json > w.b.maxBytes*7/8 {
			json -= int64(len(w.entries[drop].JSON))
			drop++
		}
	}
	if drop == 0 {
		return
	}
	w.floor = w.entries[drop-1].Seq
	kept := make([]Entry, n-drop, n)
	copy(kept, w.entries[drop:])
	w.entries, w.json = kept, json
}

// Replace keeps the new JSON of a message changed by a commit (an edit, a
// delete, a reaction). A message older than the window changes nothing.
func (w *Window) Replace(e Entry) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.loaded || e.Seq <= w.floor {
		w.mu.Unlock()
		return
	}
	i, found := slices.BinarySearchFunc(w.entries, e.Seq, func(x Entry, s uint64) int { return cmpSeq(x.Seq, s) })
	if found {
		w.json += int64(len(e.JSON) - len(w.entries[i].JSON))
		w.entries[i] = e
	} else {
		w.unload() // a message the window should hold and does not
	}
	w.settle()
	w.done()
}

// Drop forgets everything kept: the owner cannot tell what the store
// holds (a commit failed), so the next page is read from it again.
func (w *Window) Drop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.unload()
	w.done()
}

// done unlocks the window after a change and tells the budget: a window
// that keeps something is the most recently used one, one that keeps
// nothing leaves the budget's list.
func (w *Window) done() {
	loaded := w.loaded
	w.mu.Unlock()
	if loaded {
		w.b.used(w)
	} else {
		w.b.forget(w)
	}
}

// unload empties the window and gives its bytes back to the budget.
func (w *Window) unload() {
	w.loaded, w.floor, w.entries, w.json = false, 0, nil, 0
	w.settle()
}

// settle tells the budget what the window keeps now.
func (w *Window) settle() {
	var bytes int64
	if w.loaded {
		bytes = windowOverhead + int64(cap(w.entries))*entrySize + w.json
	}
	w.b.total.Add(bytes - w.bytes)
	w.bytes = bytes
}
