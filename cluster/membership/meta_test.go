package membership

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

const testSystemID = "0123456789abcdef0123456789abcdef"

func validMeta() Meta {
	return Meta{
		HTTPAddr:   "127.0.0.1:8080",
		PeerAddr:   "127.0.0.1:9090",
		SystemID:   testSystemID,
		State:      StateAlive,
		Led:        1<<0 | 1<<63,
		Replicated: 1<<0 | 1<<7 | 1<<63,
		RaftID:     0x0123456789abcdef,
	}
}

func largestMeta() Meta {
	m := validMeta()
	m.HTTPAddr = strings.Repeat("h", maxAddrLen)
	m.PeerAddr = strings.Repeat("p", maxAddrLen)
	m.Led, m.Replicated = ^Partitions(0), ^Partitions(0)
	m.RaftID = ^uint64(0)
	return m
}

func TestMetaEncoding(t *testing.T) {
	t.Run("the largest meta fits memberlist's metadata", func(t *testing.T) {
		m := largestMeta()
		b, err := m.encode()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != maxEncodedMeta || len(b) > memberlist.MetaMaxSize {
			t.Fatalf("largest meta is %d bytes (maxEncodedMeta %d), memberlist takes %d", len(b), maxEncodedMeta, memberlist.MetaMaxSize)
		}
	})
	for _, m := range []Meta{validMeta(), largestMeta(), {SystemID: testSystemID, State: StateJoining}} {
		t.Run("a meta decodes to what was encoded", func(t *testing.T) {
			b, err := m.encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeMeta(b)
			if err != nil || got != m {
				t.Fatalf("decode(encode(%+v)) = %+v, %v", m, got, err)
			}
		})
	}
}

func TestMetaEncodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Meta)
	}{
		{"an HTTP address over 200 bytes is refused", func(m *Meta) { m.HTTPAddr = strings.Repeat("a", maxAddrLen+1) }},
		{"a peer address over 200 bytes is refused", func(m *Meta) { m.PeerAddr = strings.Repeat("a", maxAddrLen+1) }},
		{"a system id that is not 32 hex digits is refused", func(m *Meta) { m.SystemID = "node-1" }},
		{"a system id in uppercase hex is refused", func(m *Meta) { m.SystemID = strings.ToUpper(testSystemID) }},
		{"a node cannot publish itself suspect", func(m *Meta) { m.State = StateSuspect }},
		{"a node cannot publish itself dead", func(m *Meta) { m.State = StateDead }},
		{"a node cannot publish a zero state", func(m *Meta) { m.State = 0 }},
		{"a led partition must be replicated", func(m *Meta) { m.Led, m.Replicated = 1<<3, 1<<4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validMeta()
			tc.edit(&m)
			if _, err := m.encode(); !errors.Is(err, ErrMetaInvalid) {
				t.Fatalf("encode = %v, want ErrMetaInvalid", err)
			}
		})
	}
}

// unchecked encodes validMeta edited by f, breaking whatever rule f breaks.
func unchecked(f func(*Meta)) []byte {
	m := validMeta()
	f(&m)
	return m.appendTo(nil)
}

func TestMetaDecodeRefuses(t *testing.T) {
	good, err := validMeta().encode()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty metadata is refused", nil},
		{"version 0 is refused", edit(func(b []byte) []byte { b[0] = 0; return b })},
		{"a byte after the last field of version 1 is refused", append(bytes.Clone(good), 0)},
		{"an unknown state is refused", edit(func(b []byte) []byte { b[1] = 200; return b })},
		{"a system id length past the end is refused", edit(func(b []byte) []byte { b[2] = 255; return b })},
		{"a system id of another length is refused", edit(func(b []byte) []byte { b[2] = 31; return b })},
		{"an address length past the end is refused", edit(func(b []byte) []byte { b[1+1+1+systemIDLen+16] = 0xff; return b })},
		{"an HTTP address over 200 bytes is refused", unchecked(func(m *Meta) { m.HTTPAddr = strings.Repeat("a", maxAddrLen+1) })},
		{"a peer address over 200 bytes is refused", unchecked(func(m *Meta) { m.PeerAddr = strings.Repeat("a", maxAddrLen+1) })},
		{"a system id that is not hex is refused", unchecked(func(m *Meta) { m.SystemID = strings.Repeat("z", systemIDLen) })},
		{"led outside replicated is refused", unchecked(func(m *Meta) { m.Led, m.Replicated = 1<<3, 1<<4 })},
		{"a peer cannot publish itself dead", unchecked(func(m *Meta) { m.State = StateDead })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := decodeMeta(tc.b); !errors.Is(err, ErrMetaMalformed) {
				t.Fatalf("decodeMeta = %+v, %v; want ErrMetaMalformed", m, err)
			}
		})
	}
	t.Run("every truncation is refused", func(t *testing.T) {
		for n := range len(good) {
			if _, err := decodeMeta(good[:n]); !errors.Is(err, ErrMetaMalformed) {
				t.Fatalf("decodeMeta of the first %d bytes = %v; want ErrMetaMalformed", n, err)
			}
		}
	})
}

func TestMetaDecodeReadsANewerVersionsPrefix(t *testing.T) {
	b, err := validMeta().encode()
	if err != nil {
		t.Fatal(err)
	}
	b[0] = metaVersion + 1
	b = append(b, "a field of version 2"...)
	got, err := decodeMeta(b)
	if err != nil || got != validMeta() {
		t.Fatalf("decodeMeta of a version 2 meta = %+v, %v; want the version 1 fields", got, err)
	}
}

// FuzzDecodeMeta: a peer's metadata never panics the decoder, and what
// decodes is a meta this node could have published itself.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{validMeta(), largestMeta()} {
		b, _ := m.encode()
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{metaVersion + 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrMetaMalformed) {
				t.Fatalf("decodeMeta error %v is not ErrMetaMalformed", err)
			}
			return
		}
		again, err := m.encode()
		if err != nil {
			t.Fatalf("decoded meta %+v does not encode: %v", m, err)
		}
		if b[0] == metaVersion && !bytes.Equal(again, b) {
			t.Fatalf("version 1 meta does not re-encode to its bytes")
		}
	})
}
