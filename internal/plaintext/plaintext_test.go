package plaintext

import "testing"

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         rune
		multiline bool
		forbidden bool
	}{
		{"a letter", 'a', false, false},
		{"a space", ' ', false, false},
		{"a letter of another script", 'ж', false, false},
		{"NUL", 0, false, true},
		{"a line break in a name", '\n', false, true},
		{"a line break in a text", '\n', true, false},
		{"a tab in a text", '\t', true, false},
		{"a carriage return in a text", '\r', true, true},
		{"DEL", 0x7f, true, true},
		{"a C1 control", 0x85, true, true},
		{"a right-to-left override", 0x202e, false, true},
		{"a first-strong isolate", 0x2068, true, true},
		{"a zero-width joiner, which emoji need", 0x200d, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Forbidden(tc.r, tc.multiline); got != tc.forbidden {
				t.Fatalf("Forbidden(%U, %v) = %v, want %v", tc.r, tc.multiline, got, tc.forbidden)
			}
		})
	}
}
