package jsontext

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// TestSpecialMask checks that the lowest bit of specialMask marks exactly
// the first byte in strClass, for words mixing special and plain bytes.
func TestSpecialMask(t *testing.T) {
	pool := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 0x7e, 0x7f, 0x80, 0xc2, 0xff, 'a'}
	var w [8]byte
	seed := uint32(1)
	for range 200000 {
		for i := range w {
			seed = seed*1664525 + 1013904223
			w[i] = pool[seed>>28]
		}
		want := 8
		for i, c := range w {
			if strClass[c] {
				want = i
				break
			}
		}
		got := 8
		if m := specialMask(binary.LittleEndian.Uint64(w[:])); m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("% x: first special byte %d, mask says %d", w, want, got)
		}
	}
}
