package ids

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestMessageIDs(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		tag  uint32
		seq  uint64
	}{
		{"the first message", 0x12345678, 1},
		{"tag of all zero bits", 0, 7},
		{"tag of all one bits", 0xffffffff, 7},
		{"the largest position", 0xa5a5a5a5, MaxMessageSeq},
		{"a position across every payload byte", 0x0000ffff, 0x2aaaaaaaaaa},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := NewMessage(t0, tt.tag, tt.seq)
			if !Valid(id) {
				t.Fatalf("NewMessage = %q, not a canonical UUID", id)
			}
			if id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
				t.Errorf("NewMessage = %q, want version 7 of the RFC variant", id)
			}
			if id[:13] != PrefixAt(t0) {
				t.Errorf("NewMessage = %q, want the timestamp of t (prefix %s)", id, PrefixAt(t0))
			}
			tag, seq, ok := ParseMessage(id)
			if !ok || tag != tt.tag || seq != tt.seq {
				t.Errorf("ParseMessage(%q) = %#x, %d, %v; want %#x, %d, true", id, tag, seq, ok, tt.tag, tt.seq)
			}
		})
	}
}

func TestMessageIDsRoundTripAnyTagAndPosition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		tag, seq := r.Uint32(), 1+r.Uint64N(MaxMessageSeq)
		gotTag, gotSeq, ok := ParseMessage(NewMessage(time.Unix(0, r.Int64()), tag, seq))
		if !ok || gotTag != tag || gotSeq != seq {
			t.Fatalf("round trip of tag %#x seq %d = %#x, %d, %v", tag, seq, gotTag, gotSeq, ok)
		}
	}
}

func TestParseMessageRefuses(t *testing.T) {
	tests := []struct{ name, id string }{
		{"empty", ""},
		{"not a UUID", "not-a-uuid-but-36-characters-long-xx"},
		{"a version 4 UUID", "1b4e28ba-2fa1-41d2-883f-0016d3cca427"},
		{"a UUIDv7 of another variant", "0193a4b2-6c00-7000-c000-000000000001"},
		{"position 0", NewMessage(time.Now(), 42, 0)},
		{"the braced form", "{" + NewMessage(time.Now(), 42, 1) + "}"},
		{"upper case hex with a dash missing", strings.Replace(strings.ToUpper(NewMessage(time.Now(), 42, 1)), "-", "", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tag, seq, ok := ParseMessage(tt.id); ok {
				t.Errorf("ParseMessage(%q) = %#x, %d, true; want not ok", tt.id, tag, seq)
			}
		})
	}
}

func TestMessageTagIsStable(t *testing.T) {
	// Every stored message id carries its conversation's tag: the function
	// must never change, so its value is pinned here.
	if got := MessageTag("0193a4b2-6c00-7abc-8def-0123456789ab"); got != 0x03a1f551 {
		t.Fatalf("MessageTag = %#x, want 0x03a1f551 (first four bytes of SHA-256)", got)
	}
}

// Every storage key is built with a tag: it must not allocate.
func TestMessageTagAllocatesNothing(t *testing.T) {
	id := New()
	if n := testing.AllocsPerRun(100, func() { MessageTag(id) }); n != 0 {
		t.Fatalf("MessageTag allocates %v times", n)
	}
}
