package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

const dir = "raft"

func ents(term, from, to uint64) []pb.Entry {
	var out []pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, pb.Entry{Index: i, Term: term, Type: pb.EntryNormal, Data: []byte{byte(i), byte(term)}})
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: term, Vote: vote, Commit: commit}
}

func sameEntry(a, b pb.Entry) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data)
}

// sameHardState reports whether a and b are both absent or hold the same
// state.
func sameHardState(a, b *pb.HardState) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func open(t *testing.T, fs vfs.FS, opts Options) (*Log, map[uint16]*Replayed) {
	t.Helper()
	l, groups, err := Open(fs, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, groups
}

func write(t *testing.T, l *Log, sync bool) {
	t.Helper()
	if err := l.Write(sync); err != nil {
		t.Fatal(err)
	}
}

// span is what a group's replayed entries should be: indexes first..last
// of one term each, as runs.
type run struct{ term, from, to uint64 }

func wantEntries(t *testing.T, got *Replayed, runs ...run) {
	t.Helper()
	var want []pb.Entry
	for _, r := range runs {
		want = append(want, ents(r.term, r.from, r.to)...)
	}
	var have []pb.Entry
	if got != nil {
		have = got.Entries
	}
	if !slices.EqualFunc(have, want, sameEntry) {
		t.Fatalf("entries %v, want %v", have, want)
	}
}

func segments(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if _, ok := parseSegName(n); ok {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs
}

// appendBytes adds raw bytes at the end of a segment file, as a torn write
// leaves them.
func appendBytes(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(fs.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, st.Size()); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

func TestLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, fs vfs.FS)
	}{
		{"replay returns the entries and hard state written", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 3))
			l.Append(2, ents(1, 1, 1))
			l.Append(1, ents(1, 4, 5))
			l.SetHardState(1, hardState(1, 7, 4))
			write(t, l, true)
			l.Close()
			_, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 1, 5})
			wantEntries(t, got[2], run{1, 1, 1})
			if !sameHardState(got[1].HardState, hardState(1, 7, 4)) || got[2].HardState != nil {
				t.Fatalf("hard states %v, %v", got[1].HardState, got[2].HardState)
			}
		}},
		{"a conflicting append truncates the group's entries at its first index", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 5))
			write(t, l, true)
			l.Append(1, ents(2, 3, 4))
			write(t, l, true)
			l.Close()
			_, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 1, 2}, run{2, 3, 4})
		}},
		{"a reset drops the group's earlier entries and keeps its hard state", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 5))
			l.Append(2, ents(1, 1, 2))
			l.SetHardState(1, hardState(1, 1, 5))
			l.Reset(1, false)
			l.Append(1, ents(2, 9, 10))
			write(t, l, true)
			l.Close()
			_, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{2, 9, 10})
			wantEntries(t, got[2], run{1, 1, 2})
			if !sameHardState(got[1].HardState, hardState(1, 1, 5)) {
				t.Fatalf("hard state %v", got[1].HardState)
			}
		}},
		{"a reset that drops the hard state forgets the group", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 5))
			l.SetHardState(1, hardState(1, 1, 5))
			l.Reset(1, true)
			write(t, l, true)
			l.Close()
			_, got := open(t, fs, Options{})
			if got[1] != nil {
				t.Fatalf("group 1 replayed after its reset: %+v", got[1])
			}
		}},
		{"a rewrite replaces every entry of the group", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 5))
			write(t, l, true)
			l.Rewrite(1, ents(1, 4, 5))
			write(t, l, true)
			l.Close()
			_, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 4, 5})
		}},
		{"a torn tail ends the last segment silently, and is cut", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 3))
			write(t, l, true)
			l.Close()
			segs := segments(t, fs)
			// A record header promising more than the file holds.
			appendBytes(t, fs, segs[len(segs)-1], []byte{200, 0, 0, 0, 1, 2, 3, 4, 1, 1})
			l, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 1, 3})
			l.Close()
			// Once no longer the last segment, it reads whole.
			_, got = open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 1, 3})
		}},
		{"a zeroed tail ends the last segment silently", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 3))
			write(t, l, true)
			l.Close()
			segs := segments(t, fs)
			appendBytes(t, fs, segs[len(segs)-1], make([]byte, 4096))
			_, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 1, 3})
		}},
		{"a record with a bad checksum in an older segment is corruption", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{})
			l.Append(1, ents(1, 1, 3))
			write(t, l, true)
			l.Close()
			l, _ = open(t, fs, Options{}) // the first segment is no longer the last
			l.Close()
			first := segments(t, fs)[0]
			f, err := fs.OpenReadWrite(fs.PathJoin(dir, first), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0xff}, segHeaderLen+headerLen+5); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if _, _, err := Open(fs, dir, Options{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		}},
		{"a new segment starts with every group's hard state", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{SegmentSize: 256})
			l.SetHardState(1, hardState(3, 1, 0))
			l.SetHardState(2, hardState(4, 2, 0))
			write(t, l, true)
			for i := uint64(1); i <= 20; i++ {
				l.Append(1, ents(3, i, i))
				write(t, l, true)
			}
			if err := l.Release(1, 20); err != nil {
				t.Fatal(err)
			}
			if n := len(segments(t, fs)); n != 1 {
				t.Fatalf("%d segments once every entry is released, want 1", n)
			}
			l.Close()
			_, got := open(t, fs, Options{})
			if !sameHardState(got[1].HardState, hardState(3, 1, 0)) || !sameHardState(got[2].HardState, hardState(4, 2, 0)) {
				t.Fatalf("hard states %v, %v after the old segments went", got[1].HardState, got[2].HardState)
			}
			if e := got[1].Entries; len(e) == 0 || e[len(e)-1].Index != 20 {
				t.Fatalf("entries %v: want the current segment's, up to 20", e)
			}
		}},
		{"a segment goes only once every group released its entries, after the hook", func(t *testing.T, fs vfs.FS) {
			var hooked []int
			var l *Log
			l, _ = open(t, fs, Options{SegmentSize: 100, BeforeDelete: func() error {
				hooked = append(hooked, len(segments(t, fs)))
				return nil
			}})
			l.Append(1, ents(1, 1, 5))
			l.Append(2, ents(1, 1, 5))
			write(t, l, true)
			l.Append(1, ents(1, 6, 20)) // rolls
			write(t, l, true)
			before := len(segments(t, fs))
			if err := l.Release(1, 20); err != nil {
				t.Fatal(err)
			}
			if n := len(segments(t, fs)); n != before || len(hooked) != 0 {
				t.Fatalf("%d segments (was %d), hook called %d times, while group 2 holds entries", n, before, len(hooked))
			}
			if err := l.Release(2, 4); err != nil {
				t.Fatal(err)
			}
			if n := len(segments(t, fs)); n != before {
				t.Fatalf("a segment went with entry 5 of group 2 unreleased")
			}
			if err := l.Release(2, 5); err != nil {
				t.Fatal(err)
			}
			if n := len(segments(t, fs)); n != before-1 || len(hooked) != 1 || hooked[0] != before {
				t.Fatalf("%d segments (was %d), hook calls %v: want one deleted after the hook", n, before, hooked)
			}
		}},
		{"a failing hook deletes nothing", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{SegmentSize: 100, BeforeDelete: func() error { return errors.New("no") }})
			l.Append(1, ents(1, 1, 5))
			write(t, l, true)
			l.Append(1, ents(1, 6, 20))
			write(t, l, true)
			before := len(segments(t, fs))
			if err := l.Release(1, 20); err == nil {
				t.Fatal("Release ignored the hook's error")
			}
			if n := len(segments(t, fs)); n != before {
				t.Fatalf("%d segments, was %d", n, before)
			}
		}},
		{"a reset releases the group's entries in older segments", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{SegmentSize: 100})
			l.Append(1, ents(1, 1, 20))
			write(t, l, true)
			l.Append(2, ents(1, 1, 1)) // rolls
			write(t, l, true)
			l.Reset(1, false)
			write(t, l, true)
			if n := len(segments(t, fs)); n != 1 {
				t.Fatalf("%d segments after the reset, want the current one", n)
			}
		}},
		{"the groups pinning old segments are named", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{SegmentSize: 100})
			l.Append(1, ents(1, 1, 1)) // an idle group
			write(t, l, true)
			for i := uint64(1); i <= 30; i++ {
				l.Append(2, ents(1, i, i))
				write(t, l, true)
				if err := l.Release(2, i); err != nil {
					t.Fatal(err)
				}
			}
			if got := l.Pinning(2); !slices.Equal(got, []uint16{1}) {
				t.Fatalf("Pinning = %v, want [1]", got)
			}
			l.Rewrite(1, ents(1, 1, 1))
			write(t, l, true)
			if n := len(segments(t, fs)); n != 1 {
				t.Fatalf("%d segments after the rewrite, want 1", n)
			}
			l.Close()
			_, got := open(t, fs, Options{})
			wantEntries(t, got[1], run{1, 1, 1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, vfs.NewMem()) })
	}
}

// A crash keeps what a Write with sync returned, and of the rest at most a
// prefix of whole records.
func TestCrashKeepsWhatWasSynced(t *testing.T) {
	for _, keep := range []int{0, 50, 100} {
		mem := vfs.NewCrashableMem()
		l, _ := open(t, mem, Options{SegmentSize: 1 << 10})
		var synced uint64
		for i := uint64(1); i <= 100; i++ {
			l.Append(1, ents(1, i, i))
			sync := i%3 == 0
			write(t, l, sync)
			if sync {
				synced = i
			}
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(1, uint64(keep)))})
		_, got := open(t, crashed, Options{})
		n := uint64(len(got[1].Entries))
		if n < synced || n > 100 {
			t.Fatalf("keep %d%%: %d entries after the crash, %d were synced", keep, n, synced)
		}
		wantEntries(t, got[1], run{1, 1, n})
		if keep == 0 && n != synced {
			t.Fatalf("%d entries after a crash that kept nothing unsynced, want %d", n, synced)
		}
	}
}

// A segment goes only once the records that replaced its entries are
// synced: a crash right after keeps them.
func TestDeletionWaitsForTheSync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, _ := open(t, mem, Options{SegmentSize: 100})
	l.Append(1, ents(1, 1, 20))
	write(t, l, true)
	l.Append(2, ents(1, 1, 1)) // rolls
	write(t, l, true)
	l.Rewrite(1, ents(1, 20, 20))
	write(t, l, false)
	if err := l.Release(2, 1); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(1, 1))})
	_, got := open(t, crashed, Options{})
	wantEntries(t, got[1], run{1, 20, 20})
}

// files returns the names in dir with the suffix, sorted.
func files(t *testing.T, fs vfs.FS, suffix string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if _, ok := parseName(n, suffix); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func readFile(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAt(t *testing.T, fs vfs.FS, name string, b []byte, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(fs.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// churn has group 1 write entries from..to, one a synced write, releasing
// each: segments roll and go, and their files are reused.
func churn(t *testing.T, l *Log, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		l.Append(1, ents(1, i, i))
		write(t, l, true)
		if err := l.Release(1, i); err != nil {
			t.Fatal(err)
		}
	}
}

// createCounter counts the files created, and keeps their names (a
// spare's preparation creates from its own goroutine).
type createCounter struct {
	vfs.FS
	mu    sync.Mutex
	n     int
	names []string
}

func (c *createCounter) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	c.mu.Lock()
	c.n++
	c.names = append(c.names, c.FS.PathBase(name))
	c.mu.Unlock()
	return c.FS.Create(name, cat)
}

// created returns how many files with the suffix were created.
func (c *createCounter) created(suffix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, name := range c.names {
		if strings.HasSuffix(name, suffix) {
			n++
		}
	}
	return n
}

// olderSegments writes group 1's entries 1..15 over a few segments, and
// returns the names of the segments, closed.
func olderSegments(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	l, _ := open(t, fs, Options{SegmentSize: 128})
	for i := uint64(1); i <= 15; i++ {
		l.Append(1, ents(1, i, i))
		write(t, l, true)
	}
	l.Close()
	segs := segments(t, fs)
	if len(segs) < 3 {
		t.Fatalf("segments %v: want 3 or more", segs)
	}
	return segs
}

func TestRecycling(t *testing.T) {
	const segSize = 256
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, fs vfs.FS)
	}{
		{"deleted segments' files are the next segments", func(t *testing.T, fs vfs.FS) {
			c := &createCounter{FS: fs}
			l, _ := open(t, c, Options{SegmentSize: segSize})
			churn(t, l, 1, 200)
			if c.n > 1+recycled {
				t.Fatalf("%d files created for %d segments, want at most %d", c.n, l.segs[len(l.segs)-1].seq, 1+recycled)
			}
			if free := files(t, fs, freeSuffix); len(free) > recycled {
				t.Fatalf("%d files kept, want at most %d", len(free), recycled)
			}
			l.Close()
			_, got := open(t, fs, Options{})
			if e := got[1].Entries; len(e) == 0 || e[len(e)-1].Index != 200 {
				t.Fatalf("entries %v: want them up to 200", e)
			}
		}},
		{"a recycled file's records after the new tail are not replayed", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{SegmentSize: segSize})
			churn(t, l, 1, 100)
			// Group 2's entry is a record of the same size as group 1's,
			// so the tail ends where a record of the earlier life starts.
			l.Append(2, ents(5, 1, 1))
			write(t, l, true)
			st, err := fs.Stat(l.path(l.segs[len(l.segs)-1].seq))
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() <= l.size {
				t.Fatalf("the current segment's file (%d bytes) holds nothing past its %d bytes: not recycled", st.Size(), l.size)
			}
			l.Close()
			_, got := open(t, fs, Options{})
			if e := got[1].Entries; len(e) == 0 || e[len(e)-1].Index != 100 {
				t.Fatalf("group 1's entries %v: want them up to 100", e)
			}
			wantEntries(t, got[2], run{5, 1, 1})
		}},
		{"a torn tail in a recycled last segment is cut, and the segment then reads whole", func(t *testing.T, fs vfs.FS) {
			l, _ := open(t, fs, Options{SegmentSize: segSize})
			churn(t, l, 1, 100)
			last, size := segName(l.segs[len(l.segs)-1].seq), l.size
			l.Close()
			// A record header promising more than the write left.
			writeAt(t, fs, last, []byte{200, 0, 0, 0, 1, 2, 3, 4, 1, 1}, size)
			l, got := open(t, fs, Options{})
			if e := got[1].Entries; len(e) == 0 || e[len(e)-1].Index != 100 {
				t.Fatalf("entries %v: want them up to 100", e)
			}
			l.Append(1, ents(1, 101, 101))
			write(t, l, true)
			l.Close()
			// The segment is no longer the last.
			_, got = open(t, fs, Options{})
			if e := got[1].Entries; len(e) == 0 || e[len(e)-1].Index != 101 {
				t.Fatalf("entries %v: want them up to 101", e)
			}
		}},
		{"a garbled record before the end record of an older segment is corruption", func(t *testing.T, fs vfs.FS) {
			segs := olderSegments(t, fs)
			writeAt(t, fs, segs[1], []byte{0xff}, segHeaderLen+headerLen+5)
			if _, _, err := Open(fs, dir, Options{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		}},
		{"a record of another segment before the end record of an older segment is corruption", func(t *testing.T, fs vfs.FS) {
			segs := olderSegments(t, fs)
			// The first entry record of the second segment, at the place of
			// the first one's: whole, but of another seq.
			rec := readFile(t, fs, segs[1])[segHeaderLen:]
			rec = rec[:headerLen+int(binary.LittleEndian.Uint32(rec))]
			writeAt(t, fs, segs[0], rec, segHeaderLen)
			if _, _, err := Open(fs, dir, Options{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		}},
		{"an older segment without its end record is corruption", func(t *testing.T, fs vfs.FS) {
			segs := olderSegments(t, fs)
			data := readFile(t, fs, segs[0])
			end := appendRecord(nil, 0, kindEnd, 0, nil)
			f, err := fs.Create(fs.PathJoin(dir, segs[0]), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(data[:len(data)-len(end)]); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if _, _, err := Open(fs, dir, Options{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
		}},
		{"segments of the first format replay, and are deleted, never recycled", func(t *testing.T, fs vfs.FS) {
			// Written by the build before the header (SegmentSize 200).
			src := "testdata/format0"
			names, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			var old []string
			for _, n := range names {
				b, err := os.ReadFile(filepath.Join(src, n.Name()))
				if err != nil {
					t.Fatal(err)
				}
				f, err := fs.Create(fs.PathJoin(dir, n.Name()), vfs.WriteCategoryUnspecified)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(b); err != nil {
					t.Fatal(err)
				}
				f.Close()
				old = append(old, n.Name())
			}
			appendBytes(t, fs, old[len(old)-1], []byte{200, 0, 0, 0, 1, 2, 3, 4, 1, 1}) // a torn tail
			check := func(got map[uint16]*Replayed, last uint64) {
				t.Helper()
				wantEntries(t, got[1], run{2, 1, 12}, run{1, 13, last})
				wantEntries(t, got[2], run{1, 1, 3})
				if !sameHardState(got[1].HardState, hardState(2, 1, 3)) || !sameHardState(got[2].HardState, hardState(1, 2, 0)) {
					t.Fatalf("hard states %v, %v", got[1].HardState, got[2].HardState)
				}
			}
			l, got := open(t, fs, Options{SegmentSize: 200})
			check(got, 12)
			l.Append(1, ents(1, 13, 13))
			write(t, l, true)
			l.Close()
			l, got = open(t, fs, Options{SegmentSize: 200})
			check(got, 13)
			churn(t, l, 14, 60)
			if err := l.Release(2, 3); err != nil {
				t.Fatal(err)
			}
			churn(t, l, 61, 80)
			segs := segments(t, fs)
			for _, n := range old {
				if slices.Contains(segs, n) {
					t.Fatalf("segment %s of the first format kept once released", n)
				}
			}
			for _, n := range files(t, fs, freeSuffix) {
				if !bytes.HasPrefix(readFile(t, fs, n), segMagic) {
					t.Fatalf("a file of the first format, %s, kept for reuse", n)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, vfs.NewMem()) })
	}
}

// stepFS calls step after every change it makes to the files: a crash may
// come between any two.
type stepFS struct {
	vfs.FS
	step func()
}

type stepFile struct {
	vfs.File
	step func()
}

func (s stepFS) wrap(f vfs.File, err error) (vfs.File, error) {
	s.step()
	if err != nil {
		return nil, err
	}
	return stepFile{f, s.step}, nil
}

func (s stepFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return s.wrap(s.FS.Create(name, cat))
}

func (s stepFS) ReuseForWrite(old, name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return s.wrap(s.FS.ReuseForWrite(old, name, cat))
}

func (s stepFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return s.wrap(s.FS.OpenReadWrite(name, cat, opts...))
}

func (s stepFS) OpenDir(name string) (vfs.File, error) { return s.wrap(s.FS.OpenDir(name)) }

func (s stepFS) Rename(old, name string) error {
	defer s.step()
	return s.FS.Rename(old, name)
}

func (s stepFS) Remove(name string) error {
	defer s.step()
	return s.FS.Remove(name)
}

func (f stepFile) Write(p []byte) (int, error) {
	defer f.step()
	return f.File.Write(p)
}

func (f stepFile) WriteAt(p []byte, off int64) (int, error) {
	defer f.step()
	return f.File.WriteAt(p, off)
}

func (f stepFile) Sync() error {
	defer f.step()
	return f.File.Sync()
}

func (f stepFile) SyncData() error {
	defer f.step()
	return f.File.SyncData()
}

// A crash at any step of a write, a roll, a reuse or a deletion loses no
// entry a Write with sync returned, and leaves a log that opens again
// after it opened once.
func TestCrashAtEveryStep(t *testing.T) {
	type crash struct {
		fs              *vfs.MemFS
		synced, written uint64
	}
	mem := vfs.NewCrashableMem()
	var crashes []crash
	var synced, written uint64
	rng := rand.New(rand.NewPCG(1, 2))
	step := func() {
		for _, keep := range []int{0, 50, 100} {
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rng})
			crashes = append(crashes, crash{fs, synced, written})
		}
	}
	l, _ := open(t, stepFS{mem, step}, Options{SegmentSize: 200})
	for i := uint64(1); i <= 60; i++ {
		l.Append(1, ents(1, i, i))
		written = i
		sync := i%2 == 0
		write(t, l, sync)
		if sync {
			synced = i
			if err := l.Release(1, i-4); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(files(t, mem, freeSuffix)); n == 0 {
		t.Fatal("no file kept for reuse")
	}
	for i, c := range crashes {
		for round := range 2 {
			l, got, err := Open(c.fs, dir, Options{SegmentSize: 200})
			if err != nil {
				t.Fatalf("crash %d, open %d: %v", i, round, err)
			}
			var e []pb.Entry
			if got[1] != nil {
				e = got[1].Entries
			}
			n := uint64(0)
			if len(e) > 0 {
				n = e[len(e)-1].Index
				wantEntries(t, got[1], run{1, e[0].Index, n})
			}
			if n < c.synced || n > c.written {
				t.Fatalf("crash %d, open %d: entries up to %d; %d were synced, %d written", i, round, n, c.synced, c.written)
			}
			l.Close()
		}
	}
}

// waitSpare waits for the spare being prepared.
// writeUntilSpare writes entries of group 1 from index i on, the first
// large enough to fill a sixteenth of the segment, until a spare is being
// prepared, and returns the next index.
func writeUntilSpare(t *testing.T, l *Log, i uint64) uint64 {
	t.Helper()
	for ; l.spare == nil; i++ {
		if l.size >= l.opts.SegmentSize {
			t.Fatal("a segment's worth written and no spare being prepared")
		}
		e := ents(1, i, i)
		e[0].Data = make([]byte, max(2, l.opts.SegmentSize/16-l.size))
		l.Append(1, e)
		write(t, l, true)
	}
	return i
}

func waitSpare(t *testing.T, l *Log) {
	t.Helper()
	sp := l.spare
	if sp == nil {
		t.Fatal("no spare being prepared")
	}
	select {
	case <-sp.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the spare's preparation did not end in 10 s")
	}
	if sp.err != nil {
		t.Fatal(sp.err)
	}
}

// wantWhole fails unless every file kept for reuse is a deleted segment's
// or a whole spare: size zeros.
func wantWhole(t *testing.T, fs vfs.FS, size int64) {
	t.Helper()
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return // a crash before the directory's entry was synced
	}
	for _, name := range files(t, fs, freeSuffix) {
		b := readFile(t, fs, name)
		if bytes.HasPrefix(b, segMagic) {
			continue
		}
		if int64(len(b)) != size || slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
			t.Fatalf("%s kept for reuse: %d bytes, want %d zeros", name, len(b), size)
		}
	}
}

// gateFS holds the first write to a file being prepared until gate is
// closed, and says when it is held.
type gateFS struct {
	vfs.FS
	held chan struct{} // buffered
	gate chan struct{}
}

type gateFile struct {
	vfs.File
	fs gateFS
}

func (g gateFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, cat)
	if err != nil || !strings.HasSuffix(name, tmpSuffix) {
		return f, err
	}
	return gateFile{f, g}, nil
}

func (f gateFile) Write(p []byte) (int, error) {
	select {
	case f.fs.held <- struct{}{}:
	default:
	}
	<-f.fs.gate
	return f.File.Write(p)
}

// failTmpFS fails every write to a file being prepared.
type failTmpFS struct{ vfs.FS }

type failFile struct{ vfs.File }

func (f failTmpFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, cat)
	if err != nil || !strings.HasSuffix(name, tmpSuffix) {
		return file, err
	}
	return failFile{file}, nil
}

func (failFile) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// maxSeq is the highest seq a name in dir starts with.
func maxSeq(t *testing.T, fs vfs.FS) uint64 {
	t.Helper()
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0 // a crash before the directory's entry was synced
	}
	if err != nil {
		t.Fatal(err)
	}
	var top uint64
	for _, n := range names {
		if len(n) > 20 {
			if seq, err := strconv.ParseUint(n[:20], 10, 64); err == nil {
				top = max(top, seq)
			}
		}
	}
	return top
}

func TestPreallocate(t *testing.T) {
	const segSize = 512
	pre := Options{SegmentSize: segSize, Preallocate: true}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, mem *vfs.MemFS)
	}{
		{"a roll takes the spare prepared: no segment file is created", func(t *testing.T, mem *vfs.MemFS) {
			c := &createCounter{FS: mem}
			l, _ := open(t, c, pre)
			for i := uint64(1); i <= 100; i++ {
				if l.spare != nil {
					waitSpare(t, l)
				}
				l.Append(1, ents(1, i, i))
				write(t, l, true)
			}
			if n := l.segs[len(l.segs)-1].seq; n < 4 {
				t.Fatalf("the log is at segment %d: it rolled too few times to tell", n)
			}
			if n := c.created(segSuffix); n != 1 {
				t.Fatalf("%d segment files created, want the first one only", n)
			}
			l.Close()
			_, got := open(t, mem, Options{})
			wantEntries(t, got[1], run{1, 1, 100})
		}},
		{"a log that wrote less than a sixteenth of a segment prepares no spare", func(t *testing.T, mem *vfs.MemFS) {
			l, _ := open(t, mem, Options{SegmentSize: 64 << 10, Preallocate: true})
			defer l.Close()
			i := uint64(1)
			for ; l.size < l.opts.SegmentSize/16; i++ {
				if l.spare != nil {
					t.Fatalf("a spare being prepared with the segment at %d bytes of %d", l.size, l.opts.SegmentSize)
				}
				l.Append(1, ents(1, i, i))
				write(t, l, true)
			}
			if l.spare == nil {
				t.Fatalf("no spare being prepared with the segment at %d bytes of %d", l.size, l.opts.SegmentSize)
			}
		}},
		{"a segment whose file grows is left for the spare once it is ready", func(t *testing.T, mem *vfs.MemFS) {
			l, _ := open(t, mem, pre)
			l.Append(1, ents(1, 1, 1))
			write(t, l, true)
			waitSpare(t, l)
			l.Append(1, ents(1, 2, 2))
			write(t, l, true)
			if len(l.segs) != 2 || l.grows {
				t.Fatalf("%d segments, the current one grows: %v; want the spare as the second", len(l.segs), l.grows)
			}
			l.Close()
			_, got := open(t, mem, Options{})
			wantEntries(t, got[1], run{1, 1, 2})
		}},
		{"the next spare waits until the segment in a spare's file is half written", func(t *testing.T, mem *vfs.MemFS) {
			l, _ := open(t, mem, Options{SegmentSize: 4 << 10, Preallocate: true})
			i := writeUntilSpare(t, l, 1)
			waitSpare(t, l)
			l.Append(1, ents(1, i, i)) // rolls onto the spare
			write(t, l, true)
			if l.grows {
				t.Fatal("the spare not taken")
			}
			for i++; l.size < l.opts.SegmentSize/2; i++ {
				if l.spare != nil {
					t.Fatalf("a spare being prepared with the segment at %d bytes of %d", l.size, l.opts.SegmentSize)
				}
				l.Append(1, ents(1, i, i))
				write(t, l, true)
			}
			if l.spare == nil {
				t.Fatalf("no spare being prepared with the segment at %d bytes of %d", l.size, l.opts.SegmentSize)
			}
		}},
		{"a spare prepared before a Close is the next Open's segment", func(t *testing.T, mem *vfs.MemFS) {
			l, _ := open(t, mem, pre)
			writeUntilSpare(t, l, 1)
			spare := freeName(l.spare.seq)
			waitSpare(t, l)
			l.Close()
			c := &createCounter{FS: mem}
			open(t, c, Options{SegmentSize: segSize})
			if n := c.created(segSuffix); n != 0 || slices.Contains(files(t, mem, freeSuffix), spare) {
				t.Fatalf("%d segment files created, %s kept: want the spare taken", n, spare)
			}
		}},
		{"a preparation cut by a crash is never a kept file, and its seq is not used again", func(t *testing.T, mem *vfs.MemFS) {
			// Three writes of zeros, the last short.
			const size = 2*zeroChunk + 4096
			var mu sync.Mutex // the writer's steps and the preparation's
			var crashes []*vfs.MemFS
			rng := rand.New(rand.NewPCG(1, 3))
			step := func() {
				mu.Lock()
				defer mu.Unlock()
				for _, keep := range []int{0, 50, 100} {
					crashes = append(crashes, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rng}))
				}
			}
			l, _ := open(t, stepFS{mem, step}, Options{SegmentSize: size, Preallocate: true})
			writeUntilSpare(t, l, 1)
			waitSpare(t, l)
			l.Close()
			for i, fs := range crashes {
				wantWhole(t, fs, size)
				top := maxSeq(t, fs)
				l, _, err := Open(fs, dir, Options{SegmentSize: size})
				if err != nil {
					t.Fatalf("crash %d: %v", i, err)
				}
				if tmp := files(t, fs, freeSuffix+tmpSuffix); len(tmp) > 0 {
					t.Fatalf("crash %d: %v left after Open", i, tmp)
				}
				if seq := l.segs[len(l.segs)-1].seq; seq <= top {
					t.Fatalf("crash %d: new segment %d, a file named %d was on disk", i, seq, top)
				}
				l.Close()
			}
		}},
		{"Close stops a preparation in flight and leaves no file of it", func(t *testing.T, mem *vfs.MemFS) {
			g := gateFS{FS: mem, held: make(chan struct{}, 1), gate: make(chan struct{})}
			l, _ := open(t, g, Options{SegmentSize: 3 * zeroChunk, Preallocate: true})
			writeUntilSpare(t, l, 1)
			select {
			case <-g.held:
			case <-time.After(10 * time.Second):
				t.Fatal("no spare being written after 10 s")
			}
			sp := l.spare
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			select {
			case <-sp.stop: // Close asked it to stop
				close(g.gate)
			case <-time.After(10 * time.Second):
				close(g.gate)
				t.Fatal("Close did not stop the preparation in 10 s")
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			select {
			case <-sp.done:
			default:
				t.Fatal("the preparation runs on after Close returned")
			}
			names, err := mem.List(dir)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, tmpSuffix) || strings.HasSuffix(n, freeSuffix) }) {
				t.Fatalf("files %v after Close: want no spare, whole or not", names)
			}
		}},
		{"a failed preparation is tried again at the next segment, not at every write", func(t *testing.T, mem *vfs.MemFS) {
			c := &createCounter{FS: failTmpFS{mem}}
			l, _ := open(t, c, pre)
			failed := l.segs[len(l.segs)-1].seq
			for i := uint64(1); i <= 200 && c.created(tmpSuffix) < 2; i++ {
				if sp := l.spare; sp != nil {
					<-sp.done
				}
				l.Append(1, ents(1, i, i))
				write(t, l, true)
				if c.created(tmpSuffix) > 1 && l.segs[len(l.segs)-1].seq == failed {
					t.Fatalf("a failed preparation tried again in the same segment, at write %d", i)
				}
			}
			if c.created(tmpSuffix) < 2 {
				t.Fatal("a failed preparation never tried again")
			}
		}},
		{"the option off prepares nothing", func(t *testing.T, mem *vfs.MemFS) {
			c := &createCounter{FS: mem}
			l, _ := open(t, c, Options{SegmentSize: segSize})
			for i := uint64(1); i <= 100; i++ {
				if l.spare != nil {
					t.Fatal("a spare being prepared with the option off")
				}
				l.Append(1, ents(1, i, i))
				write(t, l, true)
			}
			l.Close()
			if n := c.created(tmpSuffix); n != 0 || len(files(t, mem, freeSuffix)) != 0 {
				t.Fatalf("%d files prepared, %d kept, with the option off", n, len(files(t, mem, freeSuffix)))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, vfs.NewCrashableMem()) })
	}
}
