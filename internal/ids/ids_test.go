package ids

import "testing"

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		ok   bool
	}{
		{"a new id", New(), true},
		{"lower-case hex digits in 8-4-4-4-12", "0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5b", true},
		{"upper case names no record", "0193A4B2-7C1D-7E2F-8A9B-0C1D2E3F4A5B", false},
		{"one upper-case digit is enough to refuse", "0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5B", false},
		{"braces", "{0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5}", false},
		{"a urn prefix", "urn:uuid:0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5b", false},
		{"no dashes", "0193a4b27c1d7e2f8a9b0c1d2e3f4a5b", false},
		{"a dash out of place", "0193a4b27-c1d-7e2f-8a9b-0c1d2e3f4a5b", false},
		{"a letter past f", "0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5g", false},
		{"one character short", "0193a4b2-7c1d-7e2f-8a9b-0c1d2e3f4a5", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid(tc.id); got != tc.ok {
				t.Fatalf("Valid(%q) = %v, want %v", tc.id, got, tc.ok)
			}
		})
	}
}
