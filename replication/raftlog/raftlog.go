// Package raftlog owns the raft log of a node's groups on disk, apart from
// Pebble: an append-only file log of every group's entries and hard
// states, in checksummed records, cut into segments. It replaces the log
// keys a memtable inserted and a WAL wrote twice (CockroachDB and TiKV
// gave their raft logs a store of their own for the same reason): a cycle
// appends its records in one write and one fdatasync.
//
// Records (little-endian): length of the body (4 bytes), CRC32C of the body
// (4), then the body: kind (1), group (2), payload. Kinds:
//
//   - entries: flags (1; bit 0: drop the group's earlier entries first),
//     first index (8), count (uvarint), then per entry term (uvarint),
//     type (1), data length (uvarint), data. Replay truncates the group's
//     entries at the first index and appends these.
//   - hard state: term, vote, commit (8 each).
//   - reset: flags (1; bit 0: drop the hard state too). Every entry of the
//     group recorded before it is dropped.
//
// Open replays the segments in order. A record that is short, zero or fails
// its checksum ends the last segment: the tail of a write a crash tore,
// never synced, so never acknowledged; Open cuts it off. The same in an
// older segment is corruption. Open never appends to an old segment: it
// starts a new one, and so does a Write that would grow the current one
// past the segment size. Each segment starts with the hard state of every
// group, so an old segment is needed only for its entries: once every
// group released (Release) or reset the entries it holds, it is deleted,
// oldest first, after the BeforeDelete hook made durable whatever made
// them unneeded.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Record kinds.
const (
	kindEntries   byte = 1
	kindHardState byte = 2
	kindReset     byte = 3
)

const (
	headerLen = 8     // length, CRC
	bodyFixed = 1 + 2 // kind, group

	flagReset  = 1 // entries: drop the group's earlier entries
	flagDropHS = 1 // reset: drop the hard state too

	segSuffix = ".log"

	// DefaultSegmentSize is the size past which a Write starts a segment.
	DefaultSegmentSize = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a record that does not decode in a segment that is
// not the last.
var ErrCorrupt = errors.New("raftlog: corrupt record")

// Options configures Open.
type Options struct {
	// SegmentSize (default DefaultSegmentSize): a Write that would grow the
	// current segment past it starts a new one.
	SegmentSize int64
	// BeforeDelete is called before old segments are deleted; it must make
	// durable the state that made their entries unneeded (the caller's
	// compaction marks). Nil: nothing to do.
	BeforeDelete func() error
}

// Replayed is what the log holds of one group.
type Replayed struct {
	Entries   []*pb.Entry   // contiguous, oldest first
	HardState *pb.HardState // nil if none was recorded
}

// Log is the open log. It is not safe for concurrent use: one goroutine
// (the replication driver) appends, writes and releases.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options

	segs []*segment // oldest first; the last is the current one
	f    vfs.File   // the current segment
	size int64      // bytes written to f

	buf      []byte // records not written yet
	ops      []op   // their effects, applied once written
	unsynced bool   // f holds data not synced
	err      error  // a failed write or sync: the log is unusable

	hs       map[uint16]*pb.HardState // as of the last Write
	released map[uint16]uint64
}

// segment is one file and, per group, the highest index of an entry it
// holds that no later reset dropped.
type segment struct {
	seq  uint64
	last map[uint16]uint64
}

// op is the effect of a buffered record (or of a Release made while
// records were buffered), applied in order once they are written.
type op struct {
	kind    byte // a record kind, or opRelease
	g       uint16
	index   uint64 // entries: the last index; release: the index
	reset   bool   // entries: flagReset; reset: flagDropHS
	hs      *pb.HardState
	release bool
}

func segName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	return seq, err == nil
}

// Open replays the log in dir (creating it if needed) and starts a new
// segment. It returns what the log holds of every group.
func Open(fs vfs.FS, dir string, opts Options) (*Log, map[uint16]*Replayed, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	if err := syncDir(fs, fs.PathDir(dir)); err != nil { // the new directory's entry
		return nil, nil, fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("raftlog: list %s: %w", dir, err)
	}
	var seqs []uint64
	for _, name := range names {
		if seq, ok := parseSegName(name); ok {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)

	l := &Log{fs: fs, dir: dir, opts: opts, hs: map[uint16]*pb.HardState{}, released: map[uint16]uint64{}}
	groups := map[uint16]*Replayed{}
	for i, seq := range seqs {
		seg := &segment{seq: seq, last: map[uint16]uint64{}}
		l.segs = append(l.segs, seg)
		data, err := l.readSegment(seq)
		if err != nil {
			return nil, nil, err
		}
		valid, err := l.replay(data, groups)
		if err != nil && i < len(seqs)-1 {
			return nil, nil, fmt.Errorf("raftlog: segment %s at offset %d: %w", segName(seq), valid, err)
		}
		if valid < len(data) {
			// A torn tail: cut it, so that the segment reads whole once it
			// is no longer the last.
			if err := l.rewrite(seq, data[:valid]); err != nil {
				return nil, nil, err
			}
		}
	}
	next := uint64(1)
	if len(seqs) > 0 {
		next = seqs[len(seqs)-1] + 1
	}
	if err := l.startSegment(next); err != nil {
		return nil, nil, err
	}
	if err := l.Write(true); err != nil {
		return nil, nil, err
	}
	return l, groups, nil
}

func (l *Log) path(seq uint64) string { return l.fs.PathJoin(l.dir, segName(seq)) }

func (l *Log) readSegment(seq uint64) ([]byte, error) {
	f, err := l.fs.Open(l.path(seq))
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", segName(seq), err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("raftlog: read %s: %w", segName(seq), err)
	}
	return data, nil
}

// rewrite replaces segment seq by data, through a synced temporary file.
func (l *Log) rewrite(seq uint64, data []byte) error {
	tmp := l.path(seq) + ".tmp"
	f, err := l.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("raftlog: cut the torn tail of %s: %w", segName(seq), err)
	}
	_, err = f.Write(slices.Clone(data)) // vfs.File.Write may modify its argument
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = l.fs.Rename(tmp, l.path(seq))
	}
	if err == nil {
		err = l.syncDir()
	}
	if err != nil {
		return fmt.Errorf("raftlog: cut the torn tail of %s: %w", segName(seq), err)
	}
	return nil
}

func (l *Log) syncDir() error { return syncDir(l.fs, l.dir) }

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// replay applies the records of one segment (the last of l.segs) to
// groups. It returns the length of the records it read whole, and why it
// stopped short of the end, if it did.
func (l *Log) replay(data []byte, groups map[uint16]*Replayed) (int, error) {
	off := 0
	for off < len(data) {
		if len(data)-off < headerLen {
			return off, fmt.Errorf("%w: short header", ErrCorrupt)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n < bodyFixed || n > len(data)-off-headerLen {
			return off, fmt.Errorf("%w: length %d", ErrCorrupt, n)
		}
		body := data[off+headerLen : off+headerLen+n]
		if crc32.Checksum(body, crcTable) != sum {
			return off, fmt.Errorf("%w: checksum", ErrCorrupt)
		}
		if err := l.replayRecord(body, groups); err != nil {
			return off, err
		}
		off += headerLen + n
	}
	return off, nil
}

func (l *Log) replayRecord(body []byte, groups map[uint16]*Replayed) error {
	kind, g, p := body[0], binary.LittleEndian.Uint16(body[1:]), body[bodyFixed:]
	r := groups[g]
	if r == nil {
		r = &Replayed{}
		groups[g] = r
	}
	switch kind {
	case kindEntries:
		flags, ents, err := decodeEntries(p)
		if err != nil {
			return err
		}
		if flags&flagReset != 0 {
			r.Entries = nil
		}
		r.Entries = spliceEntries(r.Entries, ents)
		l.apply(op{kind: kindEntries, g: g, index: ents[len(ents)-1].GetIndex(), reset: flags&flagReset != 0})
	case kindHardState:
		if len(p) != 24 {
			return fmt.Errorf("%w: hard state of %d bytes", ErrCorrupt, len(p))
		}
		r.HardState = &pb.HardState{
			Term:   proto.Uint64(binary.LittleEndian.Uint64(p)),
			Vote:   proto.Uint64(binary.LittleEndian.Uint64(p[8:])),
			Commit: proto.Uint64(binary.LittleEndian.Uint64(p[16:])),
		}
		l.apply(op{kind: kindHardState, g: g, hs: r.HardState})
	case kindReset:
		if len(p) != 1 {
			return fmt.Errorf("%w: reset of %d bytes", ErrCorrupt, len(p))
		}
		r.Entries = nil
		if p[0]&flagDropHS != 0 {
			delete(groups, g)
		}
		l.apply(op{kind: kindReset, g: g, reset: p[0]&flagDropHS != 0})
	default:
		return fmt.Errorf("%w: kind %d", ErrCorrupt, kind)
	}
	return nil
}

// spliceEntries truncates have at the first index of ents and appends
// them; ents that do not touch have (a gap, or a start before it) replace
// it.
func spliceEntries(have, ents []*pb.Entry) []*pb.Entry {
	first := ents[0].GetIndex()
	if len(have) == 0 || first < have[0].GetIndex() || first > have[len(have)-1].GetIndex()+1 {
		return ents
	}
	return append(have[:first-have[0].GetIndex()], ents...)
}

func decodeEntries(p []byte) (byte, []*pb.Entry, error) {
	bad := func(what string) error { return fmt.Errorf("%w: entries: %s", ErrCorrupt, what) }
	if len(p) < 9 {
		return 0, nil, bad("short")
	}
	flags, first := p[0], binary.LittleEndian.Uint64(p[1:])
	p = p[9:]
	count, n := binary.Uvarint(p)
	if n <= 0 || count == 0 || count > uint64(len(p)) {
		return 0, nil, bad("count")
	}
	p = p[n:]
	ents := make([]*pb.Entry, 0, count)
	for i := range count {
		term, n := binary.Uvarint(p)
		if n <= 0 || len(p) < n+1 {
			return 0, nil, bad("term")
		}
		typ := pb.EntryType(p[n])
		p = p[n+1:]
		size, n := binary.Uvarint(p)
		if n <= 0 || size > uint64(len(p)-n) {
			return 0, nil, bad("data")
		}
		ents = append(ents, &pb.Entry{
			Index: proto.Uint64(first + i), Term: proto.Uint64(term), Type: typ.Enum(),
			Data: slices.Clone(p[n : n+int(size)]), // not the whole segment's bytes
		})
		p = p[n+int(size):]
	}
	if len(p) != 0 {
		return 0, nil, bad("trailing bytes")
	}
	return flags, ents, nil
}

// record appends a record's header and body to the buffer; fill appends
// the payload.
func (l *Log) record(kind byte, g uint16, fill func([]byte) []byte) {
	start := len(l.buf)
	l.buf = append(l.buf, make([]byte, headerLen)...)
	l.buf = append(l.buf, kind)
	l.buf = binary.LittleEndian.AppendUint16(l.buf, g)
	l.buf = fill(l.buf)
	body := l.buf[start+headerLen:]
	binary.LittleEndian.PutUint32(l.buf[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(l.buf[start+4:], crc32.Checksum(body, crcTable))
}

// Append buffers a run of group g's entries (contiguous indexes): on
// replay they replace the group's entries from the first one on.
func (l *Log) Append(g uint16, ents []*pb.Entry) { l.appendEntries(g, ents, false) }

// Rewrite buffers all of group g's entries: on replay, they replace every
// entry the group had before. One record, so no crash keeps the reset
// without the entries.
func (l *Log) Rewrite(g uint16, ents []*pb.Entry) {
	if len(ents) == 0 {
		l.Reset(g, false)
		return
	}
	l.appendEntries(g, ents, true)
}

func (l *Log) appendEntries(g uint16, ents []*pb.Entry, reset bool) {
	if len(ents) == 0 {
		return
	}
	var flags byte
	if reset {
		flags = flagReset
	}
	l.record(kindEntries, g, func(b []byte) []byte {
		b = append(b, flags)
		b = binary.LittleEndian.AppendUint64(b, ents[0].GetIndex())
		b = binary.AppendUvarint(b, uint64(len(ents)))
		for _, e := range ents {
			b = binary.AppendUvarint(b, e.GetTerm())
			b = append(b, byte(e.GetType()))
			b = binary.AppendUvarint(b, uint64(len(e.GetData())))
			b = append(b, e.GetData()...)
		}
		return b
	})
	l.ops = append(l.ops, op{kind: kindEntries, g: g, index: ents[len(ents)-1].GetIndex(), reset: reset})
}

// SetHardState buffers group g's hard state.
func (l *Log) SetHardState(g uint16, hs *pb.HardState) {
	hs = proto.CloneOf(hs)
	l.record(kindHardState, g, func(b []byte) []byte { return appendHardState(b, hs) })
	l.ops = append(l.ops, op{kind: kindHardState, g: g, hs: hs})
}

func appendHardState(b []byte, hs *pb.HardState) []byte {
	b = binary.LittleEndian.AppendUint64(b, hs.GetTerm())
	b = binary.LittleEndian.AppendUint64(b, hs.GetVote())
	return binary.LittleEndian.AppendUint64(b, hs.GetCommit())
}

// Reset buffers the end of every entry group g has (a snapshot replaced
// them), and of its hard state too with dropHardState (the node forgot the
// group).
func (l *Log) Reset(g uint16, dropHardState bool) {
	var flags byte
	if dropHardState {
		flags = flagDropHS
	}
	l.record(kindReset, g, func(b []byte) []byte { return append(b, flags) })
	l.ops = append(l.ops, op{kind: kindReset, g: g, reset: dropHardState})
}

// Release says group g no longer needs its entries up to index: the
// caller's state past them is written (BeforeDelete makes it durable
// before a segment goes). It takes effect after the records buffered
// before it are written.
func (l *Log) Release(g uint16, index uint64) error {
	if len(l.buf) > 0 {
		l.ops = append(l.ops, op{release: true, g: g, index: index})
		return nil
	}
	l.apply(op{release: true, g: g, index: index})
	return l.deleteReleased()
}

// apply takes the effect of a written record, or of a release.
func (l *Log) apply(o op) {
	cur := l.segs[len(l.segs)-1]
	switch {
	case o.release:
		l.released[o.g] = max(l.released[o.g], o.index)
	case o.kind == kindEntries:
		if o.reset {
			l.forgetEntries(o.g)
		}
		cur.last[o.g] = max(cur.last[o.g], o.index)
	case o.kind == kindHardState:
		l.hs[o.g] = o.hs
	case o.kind == kindReset:
		l.forgetEntries(o.g)
		if o.reset {
			delete(l.hs, o.g)
		}
	}
}

// forgetEntries drops group g's entries from every segment's account.
func (l *Log) forgetEntries(g uint16) {
	for _, s := range l.segs {
		delete(s.last, g)
	}
	delete(l.released, g)
}

// Write writes the buffered records in one write, and syncs them with
// sync. A failed write or sync leaves the log unusable: every later call
// returns the error.
func (l *Log) Write(sync bool) error {
	if l.err != nil {
		return l.err
	}
	if len(l.buf) > 0 {
		if l.size > 0 && l.size+int64(len(l.buf)) > l.opts.SegmentSize {
			if l.err = l.roll(); l.err != nil {
				return l.err
			}
		}
		if _, err := l.f.Write(l.buf); err != nil {
			l.err = fmt.Errorf("raftlog: write: %w", err)
			return l.err
		}
		l.size += int64(len(l.buf))
		l.buf = l.buf[:0]
		l.unsynced = true
		for _, o := range l.ops {
			l.apply(o)
		}
		clear(l.ops)
		l.ops = l.ops[:0]
	}
	if !sync || !l.unsynced {
		return nil
	}
	if err := l.f.SyncData(); err != nil {
		l.err = fmt.Errorf("raftlog: sync: %w", err)
		return l.err
	}
	l.unsynced = false
	return l.deleteReleased()
}

// roll closes the current segment (synced) and starts the next. The new
// segment's first records are the hard states, so that no older one is
// needed for them.
func (l *Log) roll() error {
	if l.unsynced {
		if err := l.f.SyncData(); err != nil {
			return fmt.Errorf("raftlog: sync: %w", err)
		}
		l.unsynced = false
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("raftlog: close segment: %w", err)
	}
	pending := l.buf
	l.buf = nil
	err := l.startSegment(l.segs[len(l.segs)-1].seq + 1)
	l.buf = append(l.buf, pending...)
	return err
}

// startSegment creates segment seq and buffers the hard state of every
// group as its first records.
func (l *Log) startSegment(seq uint64) error {
	f, err := l.fs.Create(l.path(seq), vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("raftlog: create %s: %w", segName(seq), err)
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		return fmt.Errorf("raftlog: create %s: %w", segName(seq), err)
	}
	l.f, l.size = f, 0
	l.segs = append(l.segs, &segment{seq: seq, last: map[uint16]uint64{}})
	gs := make([]uint16, 0, len(l.hs))
	for g := range l.hs {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	for _, g := range gs {
		hs := l.hs[g]
		l.record(kindHardState, g, func(b []byte) []byte { return appendHardState(b, hs) })
	}
	return nil
}

// deleteReleased deletes the oldest segments while every entry they hold
// is released, after BeforeDelete, and after a sync of the current segment
// (the resets, rewrites and hard states that replace theirs are durable).
func (l *Log) deleteReleased() error {
	n := 0
	for n < len(l.segs)-1 && l.releasedAll(l.segs[n]) {
		n++
	}
	if n == 0 {
		return nil
	}
	if l.unsynced {
		if err := l.f.SyncData(); err != nil {
			l.err = fmt.Errorf("raftlog: sync: %w", err)
			return l.err
		}
		l.unsynced = false
	}
	if l.opts.BeforeDelete != nil {
		if err := l.opts.BeforeDelete(); err != nil {
			return fmt.Errorf("raftlog: before deleting segments: %w", err)
		}
	}
	for _, s := range l.segs[:n] {
		if err := l.fs.Remove(l.path(s.seq)); err != nil {
			return fmt.Errorf("raftlog: delete %s: %w", segName(s.seq), err)
		}
	}
	l.segs = slices.Delete(l.segs, 0, n)
	return nil
}

func (l *Log) releasedAll(s *segment) bool {
	for g, last := range s.last {
		if l.released[g] < last {
			return false
		}
	}
	return true
}

// Pinning returns the groups whose unreleased entries keep the oldest
// segment, once more than keep segments are older than the current one:
// the caller rewrites their live entries (Rewrite), so that a group that
// stopped writing does not keep every later segment on disk.
func (l *Log) Pinning(keep int) []uint16 {
	if len(l.segs)-1 <= keep {
		return nil
	}
	var gs []uint16
	for g, last := range l.segs[0].last {
		if l.released[g] < last {
			gs = append(gs, g)
		}
	}
	slices.Sort(gs)
	return gs
}

// HardState returns the last hard state of group g written (nil if none).
func (l *Log) HardState(g uint16) *pb.HardState { return l.hs[g] }

// Segments returns how many segment files the log has.
func (l *Log) Segments() int { return len(l.segs) }

// Close closes the current segment. It adds no durability: what a Write
// with sync returned is durable already.
func (l *Log) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
