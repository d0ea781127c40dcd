// Package raftlog owns the raft log of a node's groups on disk, apart from
// Pebble: an append-only file log of every group's entries and hard
// states, in checksummed records, cut into segments. It replaces the log
// keys a memtable inserted and a WAL wrote twice (CockroachDB and TiKV
// gave their raft logs a store of their own for the same reason): a cycle
// appends its records in one write and one fdatasync.
//
// A segment starts with a header (little-endian): magic "krl\xff" (4
// bytes; read as the length of a record of the first format, more than
// any segment holds), format version (4, today 1), the segment's seq (8,
// the number in its name), CRC32C of those 16 bytes (4). Records follow:
// length of the body (4 bytes), checksum (4), then the body: kind (1),
// group (2), payload. The checksum is the CRC32C of the segment's seq (8),
// the length and the body, so that a record a file held in an earlier
// life (below) fails it. Kinds:
//
//   - entries: flags (1; bit 0: drop the group's earlier entries first),
//     first index (8), count (uvarint), then per entry term (uvarint),
//     type (1), data length (uvarint), data. Replay truncates the group's
//     entries at the first index and appends these.
//   - hard state: term, vote, commit (8 each).
//   - reset: flags (1; bit 0: drop the hard state too). Every entry of the
//     group recorded before it is dropped.
//   - end (group 0, no payload): the segment is closed. Written, and
//     synced, before the next segment is written.
//
// Segment files are recycled, as Pebble recycles its WAL files: up to two
// deleted segments are kept, renamed <seq>.free, and a new segment is
// such a file renamed and written over from its start, so that a sync
// writes into blocks the file has and commits no change of its size or
// extents. What follows the new records is the file's earlier content:
// records of another seq, which end the data as a torn tail does.
//
// With Options.Preallocate, a segment also starts life in a file whose
// blocks are written. When no file is kept for the next segment, a
// goroutine prepares a spare: zeros of the segment size written, synced,
// renamed <seq>.free (from <seq>.free.tmp, which Open deletes: a crash
// never leaves a file half prepared under the name of a kept one), the
// directory synced. It starts once a sixteenth of the current segment is
// written if the segment's file was created (it grows: a node that writes
// little never writes a spare), and the writer leaves that segment for the
// spare as soon as it is ready: a fresh node pays for growing files only
// until its first spare is written. Otherwise it starts once the current
// segment is half written, so that a node that writes little writes one
// spare, not two. A spare's seq comes from the same count as the segments', so no
// name is used twice.
//
// Open replays the segments in order. A record that is short, zero or fails
// its checksum ends the data. In the last segment, that is the tail of a
// write a crash tore, never synced, so never acknowledged (or the recycled
// file's old content; a header of another seq: the segment's first write
// did not land, it holds nothing): Open closes the segment there with an
// end record, synced. In an older segment, data that ends before its end
// record, or a header not its own, is corruption (ErrCorrupt). Open
// appends no record to an old segment but that end: it starts a new one,
// and so does a Write that would grow the current one past the segment
// size. Each segment starts with the hard state of every group, so an old
// segment is needed only for its entries: once every group released
// (Release) or reset the entries it holds, it is deleted (or kept for
// reuse), oldest first, after the BeforeDelete hook made durable whatever
// made them unneeded.
//
// Segments of the first format (no header, the checksum of the body alone,
// no end record) replay as they always did: a torn tail of the last is cut
// off, a bad record in an older one is corruption. They are deleted, never
// recycled, so that no record of that format is ever read as a current one.
package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Record kinds.
const (
	kindEntries   byte = 1
	kindHardState byte = 2
	kindReset     byte = 3
	kindEnd       byte = 4
)

const (
	headerLen    = 8     // a record's length, checksum
	bodyFixed    = 1 + 2 // kind, group
	segHeaderLen = 20    // magic, version, seq, CRC
	version      = 1     // of the segment format with a header

	flagReset  = 1 // entries: drop the group's earlier entries
	flagDropHS = 1 // reset: drop the hard state too

	segSuffix  = ".log"
	freeSuffix = ".free" // a deleted segment's file, or a spare, kept for reuse
	tmpSuffix  = ".tmp"  // a file being written, to be renamed: Open deletes it

	// zeroChunk is how many zeros a spare's preparation writes at once.
	zeroChunk = 1 << 20

	// recycled is how many deleted segments' files are kept for reuse: as
	// Pebble keeps WAL files, enough for the segments a release deletes at
	// once, few enough not to hold much disk.
	recycled = 2

	// DefaultSegmentSize is the size past which a Write starts a segment.
	DefaultSegmentSize = 64 << 20
)

var (
	crcTable = crc32.MakeTable(crc32.Castagnoli)
	segMagic = []byte{'k', 'r', 'l', 0xff}
)

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
	// NoRecycle deletes old segments' files instead of keeping some for
	// the next segments (a benchmark's baseline).
	NoRecycle bool
	// Preallocate prepares, on a goroutine of the log's own, a spare file
	// of SegmentSize zeros when the log keeps no file for its next segment,
	// so that a segment's syncs write into blocks its file has (package
	// comment).
	// It costs SegmentSize of disk, and that much written, a spare: off
	// for a filesystem in memory.
	Preallocate bool
}

// Replayed is what the log holds of one group.
type Replayed struct {
	Entries   []pb.Entry    // contiguous, oldest first
	HardState *pb.HardState // nil if none was recorded
}

// Log is the open log. It is not safe for concurrent use: one goroutine
// (the replication driver) appends, writes and releases. A spare's
// preparation shares nothing with it but the spare: the writer polls its
// done channel and only then reads its result.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options

	segs []*segment // oldest first; the last is the current one
	f    vfs.File   // the current segment
	size int64      // bytes written to f
	seed uint32     // the current segment's checksum seed (seedOf)
	free []uint64   // the seqs of the files kept for reuse
	next uint64     // the seq of the next file named: past every seq on disk
	// grows: the current segment's file was created, and Preallocate is
	// on: it is left for a kept file as soon as there is one.
	grows bool
	spare *spare // a preparation in flight, nil if none
	// spareFailed: the current segment's preparation failed (a full disk?);
	// the next segment's tries again, not every write.
	spareFailed bool

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
	seq        uint64
	last       map[uint16]uint64
	recyclable bool // of the format with a header
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

// spare is a preparation of a spare file, on its own goroutine.
type spare struct {
	seq  uint64
	stop chan struct{} // closed: give up, and delete the file
	done chan struct{} // closed when it ended; err is then set
	err  error
}

func segName(seq uint64) string  { return fmt.Sprintf("%020d%s", seq, segSuffix) }
func freeName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, freeSuffix) }

func parseSegName(name string) (uint64, bool) { return parseName(name, segSuffix) }

func parseName(name, suffix string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
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
	var seqs, free []uint64
	next := uint64(1) // a seq is never used twice
	for _, name := range names {
		if seq, ok := parseSegName(name); ok {
			seqs = append(seqs, seq)
			next = max(next, seq+1)
		} else if seq, ok := parseName(name, freeSuffix); ok {
			free = append(free, seq)
			next = max(next, seq+1)
		} else if strings.HasSuffix(name, tmpSuffix) {
			// A spare's preparation, or a rewrite, a crash cut short.
			if seq, ok := parseName(name, freeSuffix+tmpSuffix); ok {
				next = max(next, seq+1)
			}
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return nil, nil, fmt.Errorf("raftlog: delete %s: %w", name, err)
			}
		}
	}
	slices.Sort(seqs)
	slices.Sort(free)

	l := &Log{fs: fs, dir: dir, opts: opts, next: next, hs: map[uint16]*pb.HardState{}, released: map[uint16]uint64{}}
	groups := map[uint16]*Replayed{}
	for i, seq := range seqs {
		if err := l.replaySegment(seq, i == len(seqs)-1, groups); err != nil {
			return nil, nil, err
		}
	}
	keep := recycled
	if opts.NoRecycle {
		keep = 0
	}
	for i, seq := range slices.Backward(free) {
		// A file kept twice (a crash kept both names of a rename) is
		// the segment's.
		if len(l.free) < keep && !slices.Contains(seqs, seq) {
			l.free = append(l.free, seq)
			continue
		}
		if err := fs.Remove(l.freePath(free[i])); err != nil {
			return nil, nil, fmt.Errorf("raftlog: delete %s: %w", freeName(seq), err)
		}
	}
	if err := l.startSegment(); err != nil {
		return nil, nil, err
	}
	if err := l.Write(true); err != nil {
		return nil, nil, err
	}
	l.prepareSpare()
	return l, groups, nil
}

func (l *Log) path(seq uint64) string     { return l.fs.PathJoin(l.dir, segName(seq)) }
func (l *Log) freePath(seq uint64) string { return l.fs.PathJoin(l.dir, freeName(seq)) }

// replaySegment replays segment seq into groups and leaves it closed, so
// that it reads whole once it is no longer the last.
func (l *Log) replaySegment(seq uint64, last bool, groups map[uint16]*Replayed) error {
	seg := &segment{seq: seq, last: map[uint16]uint64{}}
	l.segs = append(l.segs, seg)
	data, err := l.readSegment(seq)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(data, segMagic) {
		// The first format (or the first write of a new file, torn).
		valid, _, err := l.replay(data, 0, 0, false, groups)
		if err != nil && !last {
			return fmt.Errorf("raftlog: segment %s at offset %d: %w", segName(seq), valid, err)
		}
		if valid < len(data) {
			// A torn tail: cut it.
			return l.rewrite(seq, data[:valid])
		}
		return nil
	}
	seg.recyclable = true
	headed := len(data) >= segHeaderLen &&
		crc32.Checksum(data[:segHeaderLen-4], crcTable) == binary.LittleEndian.Uint32(data[segHeaderLen-4:])
	if headed {
		if v := binary.LittleEndian.Uint32(data[4:]); v != version {
			return fmt.Errorf("raftlog: segment %s: format version %d unknown", segName(seq), v)
		}
		headed = binary.LittleEndian.Uint64(data[8:]) == seq
	}
	if !headed {
		// The first write of the segment did not land: the file holds
		// nothing of its own (a recycled file holds its earlier life's).
		if !last {
			return fmt.Errorf("raftlog: segment %s: %w: header", segName(seq), ErrCorrupt)
		}
		return l.closeSegment(seq, 0)
	}
	valid, ended, err := l.replay(data, segHeaderLen, seedOf(seq), true, groups)
	switch {
	case ended:
		return nil
	case !last:
		if err == nil {
			err = fmt.Errorf("%w: no end record", ErrCorrupt)
		}
		return fmt.Errorf("raftlog: segment %s at offset %d: %w", segName(seq), valid, err)
	}
	return l.closeSegment(seq, valid)
}

// closeSegment writes an end record at offset off of segment seq (the
// header first, at 0, if off is within it), over whatever a crash left
// there, and syncs it.
func (l *Log) closeSegment(seq uint64, off int) error {
	var b []byte
	if off < segHeaderLen {
		off, b = 0, appendSegHeader(b, seq)
	}
	b = appendRecord(b, seedOf(seq), kindEnd, 0, nil)
	f, err := l.fs.OpenReadWrite(l.path(seq), vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.WriteAt(b, int64(off))
		err = errors.Join(err, f.SyncData(), f.Close())
	}
	if err != nil {
		return fmt.Errorf("raftlog: close %s: %w", segName(seq), err)
	}
	return nil
}

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

// replay applies the records of one segment (the last of l.segs) from
// offset off to groups; seeded: checksums of the format with a header. It
// returns the offset past the records it read whole (past the end record,
// if it read one), whether it read the end record, and why it stopped
// short of it, if it did.
func (l *Log) replay(data []byte, off int, seed uint32, seeded bool, groups map[uint16]*Replayed) (int, bool, error) {
	for off < len(data) {
		if len(data)-off < headerLen {
			return off, false, fmt.Errorf("%w: short header", ErrCorrupt)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n < bodyFixed || n > len(data)-off-headerLen {
			return off, false, fmt.Errorf("%w: length %d", ErrCorrupt, n)
		}
		body := data[off+headerLen : off+headerLen+n]
		want := crc32.Checksum(body, crcTable)
		if seeded {
			want = recordSum(seed, data[off:off+4], body)
		}
		if want != sum {
			return off, false, fmt.Errorf("%w: checksum", ErrCorrupt)
		}
		if seeded && body[0] == kindEnd {
			if n != bodyFixed {
				return off, false, fmt.Errorf("%w: end record of %d bytes", ErrCorrupt, n)
			}
			return off + headerLen + n, true, nil
		}
		if err := l.replayRecord(body, groups); err != nil {
			return off, false, err
		}
		off += headerLen + n
	}
	return off, false, nil
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
		l.apply(op{kind: kindEntries, g: g, index: ents[len(ents)-1].Index, reset: flags&flagReset != 0})
	case kindHardState:
		if len(p) != 24 {
			return fmt.Errorf("%w: hard state of %d bytes", ErrCorrupt, len(p))
		}
		r.HardState = &pb.HardState{
			Term:   binary.LittleEndian.Uint64(p),
			Vote:   binary.LittleEndian.Uint64(p[8:]),
			Commit: binary.LittleEndian.Uint64(p[16:]),
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
func spliceEntries(have, ents []pb.Entry) []pb.Entry {
	first := ents[0].Index
	if len(have) == 0 || first < have[0].Index || first > have[len(have)-1].Index+1 {
		return ents
	}
	return append(have[:first-have[0].Index], ents...)
}

func decodeEntries(p []byte) (byte, []pb.Entry, error) {
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
	ents := make([]pb.Entry, 0, count)
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
		ents = append(ents, pb.Entry{
			Index: first + i, Term: term, Type: typ,
			Data: slices.Clone(p[n : n+int(size)]), // not the whole segment's bytes
		})
		p = p[n+int(size):]
	}
	if len(p) != 0 {
		return 0, nil, bad("trailing bytes")
	}
	return flags, ents, nil
}

// record appends a record to the buffer, for the current segment; fill
// appends the payload.
func (l *Log) record(kind byte, g uint16, fill func([]byte) []byte) {
	l.buf = appendRecord(l.buf, l.seed, kind, g, fill)
}

// appendRecord appends a record of a segment whose checksum seed is seed;
// fill (if not nil) appends the payload.
func appendRecord(b []byte, seed uint32, kind byte, g uint16, fill func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	b = append(b, kind)
	b = binary.LittleEndian.AppendUint16(b, g)
	if fill != nil {
		b = fill(b)
	}
	seal(b[start:], seed)
	return b
}

// seal sets the length and checksum of the record rec.
func seal(rec []byte, seed uint32) {
	binary.LittleEndian.PutUint32(rec, uint32(len(rec)-headerLen))
	binary.LittleEndian.PutUint32(rec[4:], recordSum(seed, rec[:4], rec[headerLen:]))
}

// reseal checksums the records in b again, for a segment whose seed is
// seed.
func reseal(b []byte, seed uint32) {
	for len(b) > 0 {
		n := headerLen + int(binary.LittleEndian.Uint32(b))
		seal(b[:n], seed)
		b = b[n:]
	}
}

// seedOf is the checksum of segment seq's seq: a record's checksum goes on
// from it over the record's length and body.
func seedOf(seq uint64) uint32 {
	return crc32.Checksum(binary.LittleEndian.AppendUint64(nil, seq), crcTable)
}

func recordSum(seed uint32, length, body []byte) uint32 {
	return crc32.Update(crc32.Update(seed, crcTable, length), crcTable, body)
}

func appendSegHeader(b []byte, seq uint64) []byte {
	start := len(b)
	b = append(b, segMagic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], crcTable))
}

// Append buffers a run of group g's entries (contiguous indexes): on
// replay they replace the group's entries from the first one on.
func (l *Log) Append(g uint16, ents []pb.Entry) { l.appendEntries(g, ents, false) }

// Rewrite buffers all of group g's entries: on replay, they replace every
// entry the group had before. One record, so no crash keeps the reset
// without the entries.
func (l *Log) Rewrite(g uint16, ents []pb.Entry) {
	if len(ents) == 0 {
		l.Reset(g, false)
		return
	}
	l.appendEntries(g, ents, true)
}

func (l *Log) appendEntries(g uint16, ents []pb.Entry, reset bool) {
	if len(ents) == 0 {
		return
	}
	var flags byte
	if reset {
		flags = flagReset
	}
	l.record(kindEntries, g, func(b []byte) []byte {
		b = append(b, flags)
		b = binary.LittleEndian.AppendUint64(b, ents[0].Index)
		b = binary.AppendUvarint(b, uint64(len(ents)))
		for _, e := range ents {
			b = binary.AppendUvarint(b, e.Term)
			b = append(b, byte(e.Type))
			b = binary.AppendUvarint(b, uint64(len(e.Data)))
			b = append(b, e.Data...)
		}
		return b
	})
	l.ops = append(l.ops, op{kind: kindEntries, g: g, index: ents[len(ents)-1].Index, reset: reset})
}

// SetHardState buffers group g's hard state.
func (l *Log) SetHardState(g uint16, hs *pb.HardState) {
	hs = new(*hs)
	l.record(kindHardState, g, func(b []byte) []byte { return appendHardState(b, hs) })
	l.ops = append(l.ops, op{kind: kindHardState, g: g, hs: hs})
}

func appendHardState(b []byte, hs *pb.HardState) []byte {
	b = binary.LittleEndian.AppendUint64(b, hs.Term)
	b = binary.LittleEndian.AppendUint64(b, hs.Vote)
	return binary.LittleEndian.AppendUint64(b, hs.Commit)
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
		if l.size > segHeaderLen && (l.size+int64(len(l.buf)) > l.opts.SegmentSize || l.spareReady()) {
			if l.err = l.roll(); l.err != nil {
				return l.err
			}
		}
		if _, err := l.f.Write(l.buf); err != nil {
			l.err = fmt.Errorf("raftlog: write: %w", err)
			return l.err
		}
		l.size += int64(len(l.buf))
		l.prepareSpare()
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

// roll closes the current segment with an end record, synced before
// anything of the next is written (an older segment without one is
// corrupt), and starts the next. The new segment's first records are the
// hard states, so that no older one is needed for them.
func (l *Log) roll() error {
	pending := l.buf
	l.buf = appendRecord(nil, l.seed, kindEnd, 0, nil)
	_, err := l.f.Write(l.buf)
	if err == nil {
		err = l.f.SyncData()
	}
	if err != nil {
		return fmt.Errorf("raftlog: close segment: %w", err)
	}
	l.unsynced = false
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("raftlog: close segment: %w", err)
	}
	l.buf = l.buf[:0]
	l.takeSpare()
	err = l.startSegment()
	reseal(pending, l.seed) // checksummed for the old segment
	l.buf = append(l.buf, pending...)
	return err
}

// spareReady reports whether the current segment's file grows and a kept
// file is there to take its place.
func (l *Log) spareReady() bool {
	if !l.grows {
		return false
	}
	l.takeSpare()
	return len(l.free) > 0
}

// takeSpare adds the spare to the kept files if its preparation ended
// well. One that failed left no file: the log goes on without it, and the
// next segment tries again. (Nothing reports the error: the log works
// without a spare, and a full disk fails its writes soon enough.)
func (l *Log) takeSpare() {
	sp := l.spare
	if sp == nil {
		return
	}
	select {
	case <-sp.done:
	default:
		return
	}
	l.spare = nil
	if sp.err != nil {
		l.spareFailed = true
		return
	}
	l.free = append(l.free, sp.seq)
}

// prepareSpare starts the preparation of a spare if the option is on, no
// file is kept for the next segment and none is being prepared: for a
// segment whose file grows, once it holds a sixteenth of the segment
// size, so that a node that writes little (one a test starts, a node
// alone on --replicate that is hardly used) never writes a segment of
// zeros; for another once it is half written, so that a node that writes
// little writes one spare, not two.
func (l *Log) prepareSpare() {
	if !l.opts.Preallocate || len(l.free) > 0 || l.spare != nil || l.spareFailed ||
		l.grows && l.size < l.opts.SegmentSize/16 ||
		!l.grows && l.size < l.opts.SegmentSize/2 {
		return
	}
	sp := &spare{seq: l.next, stop: make(chan struct{}), done: make(chan struct{})}
	l.next++
	l.spare = sp
	go func() {
		defer close(sp.done)
		sp.err = writeSpare(l.fs, l.dir, sp.seq, l.opts.SegmentSize, sp.stop)
	}()
}

var errStopped = errors.New("raftlog: spare preparation stopped")

// writeSpare writes size zeros to spare seq's temporary file, syncs it and
// renames it <seq>.free: a crash leaves the whole file under that name or
// none. Stopped, or failing before the rename, it deletes the file.
func writeSpare(fs vfs.FS, dir string, seq uint64, size int64, stop <-chan struct{}) error {
	name := fs.PathJoin(dir, freeName(seq))
	tmp := name + tmpSuffix
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("raftlog: prepare %s: %w", freeName(seq), err)
	}
	err = fillZeros(f, size, stop)
	if err == nil {
		err = f.SyncData() // the data before the name
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = fs.Rename(tmp, name)
	}
	if err != nil {
		if rmErr := fs.Remove(tmp); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
		if errors.Is(err, errStopped) {
			return err
		}
		return fmt.Errorf("raftlog: prepare %s: %w", freeName(seq), err)
	}
	if err := syncDir(fs, dir); err != nil {
		// The file is whole, under its name: the next Open keeps it.
		return fmt.Errorf("raftlog: prepare %s: %w", freeName(seq), err)
	}
	return nil
}

func fillZeros(f vfs.File, size int64, stop <-chan struct{}) error {
	zeros := make([]byte, min(size, zeroChunk))
	for off := int64(0); off < size; {
		select {
		case <-stop:
			return errStopped
		default:
		}
		b := zeros[:min(int64(len(zeros)), size-off)]
		clear(b) // vfs.File.Write may modify its argument
		if _, err := f.Write(b); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

// startSegment creates the next segment, from a file kept for reuse if
// there is one, and buffers its header and the hard state of every group
// as its first records.
func (l *Log) startSegment() error {
	seq := l.next
	l.next++
	var f vfs.File
	var err error
	reused := len(l.free) > 0
	if n := len(l.free); n > 0 {
		// Written over from its start: what follows the new records is
		// the file's earlier segment, whose seq fails their checksums.
		f, err = l.fs.ReuseForWrite(l.freePath(l.free[n-1]), l.path(seq), vfs.WriteCategoryUnspecified)
		l.free = l.free[:n-1]
	} else {
		f, err = l.fs.Create(l.path(seq), vfs.WriteCategoryUnspecified)
	}
	if err != nil {
		return fmt.Errorf("raftlog: create %s: %w", segName(seq), err)
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		return fmt.Errorf("raftlog: create %s: %w", segName(seq), err)
	}
	l.f, l.size, l.seed = f, 0, seedOf(seq)
	l.grows = !reused && l.opts.Preallocate
	l.spareFailed = false
	l.segs = append(l.segs, &segment{seq: seq, last: map[uint16]uint64{}, recyclable: true})
	l.buf = appendSegHeader(l.buf, seq)
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
		if err := l.drop(s); err != nil {
			return err
		}
	}
	l.segs = slices.Delete(l.segs, 0, n)
	return nil
}

// drop deletes an old segment, or keeps its file for reuse: a segment of
// the format with a header while fewer than recycled are kept. Neither
// syncs the directory: a crash may bring the segment back, whole, and
// replay its released entries as before; the reuse syncs it before
// writing over the file.
func (l *Log) drop(s *segment) error {
	if s.recyclable && !l.opts.NoRecycle && len(l.free) < recycled {
		if err := l.fs.Rename(l.path(s.seq), l.freePath(s.seq)); err != nil {
			return fmt.Errorf("raftlog: keep %s for reuse: %w", segName(s.seq), err)
		}
		l.free = append(l.free, s.seq)
		return nil
	}
	if err := l.fs.Remove(l.path(s.seq)); err != nil {
		return fmt.Errorf("raftlog: delete %s: %w", segName(s.seq), err)
	}
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

// Close stops a spare's preparation in flight, and waits for it (it
// deletes its file, or finished it), and closes the current segment. It
// adds no durability: what a Write with sync returned is durable already.
func (l *Log) Close() error {
	if sp := l.spare; sp != nil {
		close(sp.stop)
		<-sp.done
		l.spare = nil
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
