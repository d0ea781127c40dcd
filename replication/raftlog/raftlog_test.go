package raftlog

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const dir = "raft"

func ents(term, from, to uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(term), Type: pb.EntryNormal.Enum(), Data: []byte{byte(i), byte(term)}})
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
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
	var want []*pb.Entry
	for _, r := range runs {
		want = append(want, ents(r.term, r.from, r.to)...)
	}
	var have []*pb.Entry
	if got != nil {
		have = got.Entries
	}
	if !slices.EqualFunc(have, want, func(a, b *pb.Entry) bool { return proto.Equal(a, b) }) {
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
			if !proto.Equal(got[1].HardState, hardState(1, 7, 4)) || got[2].HardState != nil {
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
			if !proto.Equal(got[1].HardState, hardState(1, 1, 5)) {
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
			if !proto.Equal(got[1].HardState, hardState(3, 1, 0)) || !proto.Equal(got[2].HardState, hardState(4, 2, 0)) {
				t.Fatalf("hard states %v, %v after the old segments went", got[1].HardState, got[2].HardState)
			}
			if e := got[1].Entries; len(e) == 0 || e[len(e)-1].GetIndex() != 20 {
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
