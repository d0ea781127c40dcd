package ids

import (
	"strings"
	"testing"
	"time"
)

func TestNewAt(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ok   func() bool
	}{
		{"an id of t is a valid UUID", func() bool { return Valid(NewAt(t0)) }},
		{"an id of t starts with the prefix of t", func() bool { return NewAt(t0)[:13] == PrefixAt(t0) }},
		{"ids of a later millisecond sort after", func() bool { return NewAt(t0) < NewAt(t0.Add(time.Millisecond)) }},
		{"ids of an earlier millisecond sort before the prefix", func() bool { return NewAt(t0.Add(-time.Millisecond)) < PrefixAt(t0) }},
		{"ids of the same millisecond sort in creation order", func() bool {
			prev := NewAt(t0)
			for range 1000 {
				next := NewAt(t0)
				if next <= prev {
					return false
				}
				prev = next
			}
			return true
		}},
		{"an id is a version 7 UUID of the RFC variant", func() bool {
			id := NewAt(t0)
			return id[14] == '7' && strings.ContainsRune("89ab", rune(id[19]))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok() {
				t.Fatal("rule broken")
			}
		})
	}
}

func TestNonce(t *testing.T) {
	seen := make(map[uint64]bool)
	for range 10000 {
		n := Nonce()
		if n == 0 || seen[n] {
			t.Fatalf("nonce %d: zero or repeated", n)
		}
		seen[n] = true
	}
}
