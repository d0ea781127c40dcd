// Package backup is kitd's backup file: what GET /ops/v1/backup streams and
// `kitd restore` reads back into a data directory (README, "Backup and
// restore"). It knows the file's framing and how to restore one; which
// records and files go into a backup is its makers' business (Node here
// for a node alone, server/clusternode for a cluster).
//
// # The file
//
// A magic line and a format version byte, then frames, each a kind byte
// and its fields, every field a uvarint length and its bytes:
//
//	"kitd backup\n" 0x01
//	'H' header      JSON of Header
//	'F' name data   a file of the data directory (the secret key)
//	'R' key value   one record of the store, any number, in any order
//	'T' trailer     records and files (8 bytes big-endian each), then the
//	                SHA-256 of every byte before this field
//
// and nothing after the trailer. The file is written as it is read from
// the store, never held in memory; the trailer is what tells a whole file
// from one cut short (a download that broke off ends at a frame boundary
// as easily as inside one), and its hash a file altered anywhere.
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// magic starts every backup; formatVersion follows it.
const (
	magic         = "kitd backup\n"
	formatVersion = 1
)

// Frame kinds.
const (
	kindHeader  = 'H'
	kindFile    = 'F'
	kindRecord  = 'R'
	kindTrailer = 'T'
)

// Bounds of one field, checked before it is read: a larger length is a
// corrupt file, not a reason to allocate. A record's value is at most a
// file chunk (768 KiB) today; the bound leaves room.
const (
	maxHeader   = 64 << 10
	maxFileName = 64
	maxFileData = 1 << 20
	maxKey      = 64 << 10
	maxValue    = 16 << 20
	trailerLen  = 8 + 8 + sha256.Size
)

// Header says what a backup holds and where it comes from.
type Header struct {
	Kitd       string    `json:"kitd"`       // the version of the kitd that made it
	CreatedAt  time.Time `json:"createdAt"`  // when the backup began
	Source     string    `json:"source"`     // SourceNode or SourceCluster
	Partitions int       `json:"partitions"` // the partition count of its key layout
}

// Sources of a backup.
const (
	SourceNode    = "node"    // a node alone (with or without --replicate)
	SourceCluster = "cluster" // every partition of a cluster, each from its leader
)

// ErrCorrupt is wrapped by every refusal of a file that is not a whole,
// unaltered backup.
var ErrCorrupt = errors.New("backup: not a whole, unaltered kitd backup")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Writer writes a backup to a stream. It buffers: nothing is complete
// until Close wrote the trailer.
type Writer struct {
	out     io.Writer
	bw      *bufio.Writer // into out and h
	h       hash.Hash
	records uint64
	files   uint64
	n       [binary.MaxVarintLen64]byte
}

// NewWriter writes the magic and h to out.
func NewWriter(out io.Writer, h Header) (*Writer, error) {
	w := &Writer{out: out, h: sha256.New()}
	w.bw = bufio.NewWriterSize(io.MultiWriter(w.h, out), 256<<10)
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	w.bw.WriteString(magic)
	w.bw.WriteByte(formatVersion)
	if err := w.frame(kindHeader, hj); err != nil {
		return nil, err
	}
	return w, nil
}

// File adds a file of the data directory: name is [a-z][a-z0-9-]*, which
// no file of Pebble's is.
func (w *Writer) File(name string, data []byte) error {
	if !validFileName(name) || len(data) > maxFileData {
		return fmt.Errorf("backup: file %q cannot travel in a backup", name)
	}
	w.files++
	return w.frame(kindFile, []byte(name), data)
}

// Record adds one record of the store.
func (w *Writer) Record(k, v []byte) error {
	if len(k) > maxKey || len(v) > maxValue {
		return fmt.Errorf("backup: a record of %d+%d bytes is over the format's bounds", len(k), len(v))
	}
	w.records++
	return w.frame(kindRecord, k, v)
}

// Close writes the trailer. It does not close the stream.
func (w *Writer) Close() error {
	w.bw.WriteByte(kindTrailer) // hashed, as Read hashes it
	if err := w.bw.Flush(); err != nil {
		return err
	}
	t := make([]byte, 0, 1+trailerLen)
	t = append(t, trailerLen)
	t = binary.BigEndian.AppendUint64(t, w.records)
	t = binary.BigEndian.AppendUint64(t, w.files)
	t = w.h.Sum(t)
	_, err := w.out.Write(t)
	return err
}

func (w *Writer) frame(kind byte, fields ...[]byte) error {
	w.bw.WriteByte(kind)
	for _, f := range fields {
		w.bw.Write(w.n[:binary.PutUvarint(w.n[:], uint64(len(f)))])
		if _, err := w.bw.Write(f); err != nil {
			return err
		}
	}
	return nil
}

func validFileName(name string) bool {
	if name == "" || len(name) > maxFileName || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Visitor receives what Read finds, in the file's order. Nothing it was
// given is good until Read returned nil: a file may turn out cut short or
// altered at its end.
type Visitor struct {
	Header func(Header) error
	File   func(name string, data []byte) error // data is the caller's
	Record func(k, v []byte) error              // valid only during the call
}

// Summary is what a whole backup held.
type Summary struct {
	Header  Header
	Records uint64
	Files   uint64
	Bytes   int64
}

// Read reads a backup from r to its end, giving v what it holds, and
// returns an error wrapping ErrCorrupt when the stream is not a whole,
// unaltered backup (or v's error, which stops it).
func Read(r io.Reader, v Visitor) (Summary, error) {
	rd := &reader{br: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	var s Summary
	head := make([]byte, len(magic)+1)
	if err := rd.full(head); err != nil || string(head[:len(magic)]) != magic {
		return s, corrupt("it does not start as one")
	}
	if head[len(magic)] != formatVersion {
		return s, corrupt("format version %d, this build reads %d", head[len(magic)], formatVersion)
	}
	var key, val []byte
	for frames := 0; ; frames++ {
		kind, err := rd.byte()
		if err != nil {
			return s, corrupt("it ends after %d frames, before its trailer: cut short", frames)
		}
		if frames == 0 && kind != kindHeader {
			return s, corrupt("no header")
		}
		switch kind {
		case kindHeader:
			if frames != 0 {
				return s, corrupt("a second header")
			}
			hj, err := rd.field(nil, maxHeader)
			if err != nil {
				return s, err
			}
			if err := json.Unmarshal(hj, &s.Header); err != nil {
				return s, corrupt("header: %v", err)
			}
			if v.Header != nil {
				if err := v.Header(s.Header); err != nil {
					return s, err
				}
			}
		case kindFile:
			name, err := rd.field(nil, maxFileName)
			if err != nil {
				return s, err
			}
			data, err := rd.field(nil, maxFileData)
			if err != nil {
				return s, err
			}
			if !validFileName(string(name)) {
				return s, corrupt("a file name no backup writes")
			}
			s.Files++
			if v.File != nil {
				if err := v.File(string(name), data); err != nil {
					return s, err
				}
			}
		case kindRecord:
			if key, err = rd.field(key, maxKey); err != nil {
				return s, err
			}
			if val, err = rd.field(val, maxValue); err != nil {
				return s, err
			}
			s.Records++
			if v.Record != nil {
				if err := v.Record(key, val); err != nil {
					return s, err
				}
			}
		case kindTrailer:
			sum := rd.h.Sum(nil)
			t, err := rd.field(nil, trailerLen)
			if err != nil {
				return s, err
			}
			switch {
			case len(t) != trailerLen:
				return s, corrupt("a trailer of %d bytes", len(t))
			case binary.BigEndian.Uint64(t) != s.Records || binary.BigEndian.Uint64(t[8:]) != s.Files:
				return s, corrupt("its trailer counts %d records and %d files, it holds %d and %d",
					binary.BigEndian.Uint64(t), binary.BigEndian.Uint64(t[8:]), s.Records, s.Files)
			case string(t[16:]) != string(sum):
				return s, corrupt("its SHA-256 does not match its trailer's: altered")
			}
			if _, err := rd.br.ReadByte(); err != io.EOF {
				return s, corrupt("bytes after its trailer")
			}
			s.Bytes = rd.n
			return s, nil
		default:
			return s, corrupt("an unknown frame kind 0x%02x after %d frames", kind, frames)
		}
	}
}

// reader reads a backup's bytes and hashes those it consumed (a
// bufio.Reader reads ahead, so hashing below it would hash the trailer).
type reader struct {
	br *bufio.Reader
	h  hash.Hash
	n  int64
	b  [1]byte
}

func (r *reader) full(p []byte) error {
	if _, err := io.ReadFull(r.br, p); err != nil {
		return err
	}
	r.h.Write(p)
	r.n += int64(len(p))
	return nil
}

func (r *reader) byte() (byte, error) {
	c, err := r.br.ReadByte()
	if err != nil {
		return 0, err
	}
	r.b[0] = c
	r.h.Write(r.b[:])
	r.n++
	return c, nil
}

// ReadByte is r.byte for binary.ReadUvarint.
func (r *reader) ReadByte() (byte, error) { return r.byte() }

// field reads one field of at most max bytes into buf's memory.
func (r *reader) field(buf []byte, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, corrupt("it ends inside a frame: cut short")
	}
	if n > uint64(max) {
		return nil, corrupt("a field of %d bytes, over its bound of %d", n, max)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if err := r.full(buf); err != nil {
		return nil, corrupt("it ends inside a frame: cut short")
	}
	return buf, nil
}
