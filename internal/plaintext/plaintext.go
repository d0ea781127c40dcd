// Package plaintext says which characters a human-readable name or text
// may hold: the one rule of the manifest's names and the operator's.
package plaintext

import "unicode"

// Forbidden reports whether r may not appear in a name (multiline false)
// or a longer text (multiline true, which may hold line breaks and tabs):
// control characters, and the bidirectional overrides and isolates, which
// could make a name read differently from what was submitted (a consent
// page, a member list).
func Forbidden(r rune, multiline bool) bool {
	return r < 0x20 && !(multiline && (r == '\n' || r == '\t')) ||
		r >= 0x7f && (unicode.IsControl(r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069)
}
