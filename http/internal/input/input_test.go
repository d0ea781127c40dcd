package input

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/kiterr/kiterrtest"
)

func ptr[T any](v T) *T { return &v }

func TestRequireString(t *testing.T) {
	tests := []struct {
		name     string
		v        *string
		min, max int
		wantPath string
		wantMsg  string
	}{
		{"absent is required", nil, 1, 10, "name", "is required"},
		{"empty is refused when at least one is needed", ptr(""), 1, 10, "name", "must not be empty"},
		{"shorter than the minimum is refused", ptr("a"), 2, 10, "name", "at least 2"},
		{"the minimum is accepted", ptr("ab"), 2, 10, "-", ""},
		{"the maximum is accepted", ptr("abcdefghij"), 1, 10, "-", ""},
		{"one over the maximum is refused", ptr("abcdefghijk"), 1, 10, "name", "at most 10"},
		{"length counts characters, not bytes", ptr(strings.Repeat("é", 10)), 1, 10, "-", ""},
		{"eleven two-byte characters are over ten", ptr(strings.Repeat("é", 11)), 1, 10, "name", "at most 10"},
		{"a four-byte character counts once", ptr(strings.Repeat("🙂", 10)), 1, 10, "-", ""},
		{"two bytes of one character do not reach a minimum of two", ptr("é"), 2, 10, "name", "at least 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RequireString("name", tt.v, tt.min, tt.max)
			kiterrtest.WantPath(t, err, tt.wantPath)
			if err != nil && !strings.Contains(err.(*kiterr.Error).Message, tt.wantMsg) {
				t.Fatalf("message %q, want it to contain %q", err.(*kiterr.Error).Message, tt.wantMsg)
			}
		})
	}
}

func TestRequireUUID(t *testing.T) {
	tests := []struct {
		name       string
		v          *string
		wantPath   string
		wantReason string
	}{
		{"a UUID is accepted", ptr(ids.New()), "-", ""},
		{"absent is required", nil, "id", "is required"},
		{"empty is refused", ptr(""), "id", "must be a UUID"},
		{"an upper-case UUID is refused, saying why", ptr(strings.ToUpper(ids.New())), "id", "must be a UUID in lower case"},
		{"an upper-case UUID without dashes is refused", ptr(strings.ToUpper(strings.ReplaceAll(ids.New(), "-", ""))), "id", "must be a UUID"},
		{"a braced UUID is refused", ptr("{" + ids.New() + "}"), "id", "must be a UUID"},
		{"a UUID with trailing text is refused", ptr(ids.New() + "x"), "id", "must be a UUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RequireUUID("id", tt.v)
			kiterrtest.WantPath(t, err, tt.wantPath)
			if err != nil && !strings.HasSuffix(err.(*kiterr.Error).Message, tt.wantReason) {
				t.Fatalf("message %q, want it to end with %q", err.(*kiterr.Error).Message, tt.wantReason)
			}
		})
	}
}

func TestPlain(t *testing.T) {
	for _, tt := range []struct {
		name, v, wantPath string
	}{
		{"a name of any script is plain", "Zoë Ødegård 张伟 👩‍💻", "-"},
		{"NUL is refused", "a\x00b", "name"},
		{"a line break is refused", "a\nb", "name"},
		{"a C1 control is refused", "a\u0085b", "name"},
		{"a right-to-left override is refused", "evil\u202egnp.exe", "name"},
	} {
		t.Run(tt.name, func(t *testing.T) { kiterrtest.WantPath(t, Plain("name", tt.v), tt.wantPath) })
	}
}
