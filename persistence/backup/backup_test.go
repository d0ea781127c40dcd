package backup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kitd/kitd/persistence"
)

var testHeader = Header{Kitd: "test", CreatedAt: time.Unix(1700000000, 0).UTC(), Source: SourceNode, Partitions: 64}

// sample writes a backup of a few files and records, and returns it with
// the offsets where each frame begins (the last: the trailer's).
func sample(t testing.TB) ([]byte, []int) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader)
	if err != nil {
		t.Fatal(err)
	}
	var bounds []int
	mark := func() {
		w.bw.Flush()
		bounds = append(bounds, buf.Len())
	}
	mark() // after the header
	if err := w.File("secret-key", bytes.Repeat([]byte{7}, 32)); err != nil {
		t.Fatal(err)
	}
	mark()
	for i := range 5 {
		if err := w.Record(fmt.Appendf(nil, "p/\x00\x01/k%d", i), bytes.Repeat([]byte{byte(i)}, i*10)); err != nil {
			t.Fatal(err)
		}
		mark()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), bounds
}

func TestBackupRules(t *testing.T) {
	whole, bounds := sample(t)
	flipped := func(i int) []byte {
		b := bytes.Clone(whole)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name string
		file []byte
		ok   bool
	}{
		{"a whole file reads back", whole, true},
		{"an empty file is refused", nil, false},
		{"another format version is refused", flipped(len(magic)), false},
		{"bytes after the trailer are refused", append(bytes.Clone(whole), 0), false},
		{"a trailer cut short is refused", whole[:len(whole)-1], false},
		{"no trailer is refused", whole[:bounds[len(bounds)-1]], false},
	}
	for _, b := range bounds {
		tests = append(tests, struct {
			name string
			file []byte
			ok   bool
		}{fmt.Sprintf("cut at the frame boundary %d is refused", b), whole[:b], false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read(bytes.NewReader(tt.file), Visitor{})
			if tt.ok != (err == nil) {
				t.Fatalf("Read: %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read: %v, want ErrCorrupt", err)
			}
			if tt.ok && (s.Records != 5 || s.Files != 1 || s.Header != testHeader) {
				t.Fatalf("Read: %+v", s)
			}
		})
	}
}

// TestEveryCutAndFlipIsRefused: a file cut at any byte, or with any one
// byte altered, is refused.
func TestEveryCutAndFlipIsRefused(t *testing.T) {
	whole, _ := sample(t)
	for i := range whole {
		if _, err := Read(bytes.NewReader(whole[:i]), Visitor{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: %v", i, len(whole), err)
		}
		b := bytes.Clone(whole)
		b[i] ^= 0x40
		if _, err := Read(bytes.NewReader(b), Visitor{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d of %d altered: %v", i, len(whole), err)
		}
	}
}

func TestRoundTripThroughAStore(t *testing.T) {
	src, err := persistence.Open(t.TempDir(), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := src.NewBatch()
	for i := range 1000 {
		b.Set(fmt.Appendf(nil, "p/\x00\x02/k%04d", i), fmt.Appendf(nil, "v%d", i))
	}
	b.Set([]byte("meta/layout"), []byte{0, 0, 0, 0, 0, 0, 0, 2})
	b.Set([]byte("r/\x00\x02/hs"), []byte("raft"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	skipRaft := func(k []byte) bool { return bytes.HasPrefix(k, []byte("r/")) }
	if err := Node(&buf, src, testHeader, []File{{"secret-key", []byte("0123456789abcdef0123456789abcdef")}}, skipRaft); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	s, err := Restore(bytes.NewReader(buf.Bytes()), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != 1001 || s.Files != 1 {
		t.Fatalf("restored %+v", s)
	}
	if key, err := os.ReadFile(filepath.Join(dir, "secret-key")); err != nil || string(key) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("secret-key: %q, %v", key, err)
	}
	dst, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	n := 0
	if err := dst.Scan(nil, nil, false, func(k, v []byte) bool {
		if bytes.HasPrefix(k, []byte("r/")) {
			t.Errorf("raft state travelled: %q", k)
		}
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1001 {
		t.Fatalf("%d records restored, want 1001", n)
	}
	if v, err := dst.Get([]byte("p/\x00\x02/k0999")); err != nil || string(v) != "v999" {
		t.Fatalf("k0999 = %q, %v", v, err)
	}
}

func TestRestoreRules(t *testing.T) {
	whole, bounds := sample(t)
	tests := []struct {
		name    string
		file    []byte
		prepare func(dir string)
		want    error
	}{
		{"a missing directory is made", whole, func(string) {}, nil},
		{"an empty directory is filled", whole, func(dir string) { os.Mkdir(dir, 0o755) }, nil},
		{"a directory that is not empty is refused", whole, func(dir string) {
			os.Mkdir(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "x"), nil, 0o600)
		}, ErrNotEmpty},
		{"a file cut short leaves nothing", whole[:bounds[3]], func(string) {}, ErrCorrupt},
		{"an altered file leaves nothing", append(bytes.Clone(whole[:len(whole)-1]), whole[len(whole)-1]^1), func(string) {}, ErrCorrupt},
		{"an altered file leaves an empty directory empty", whole[:len(whole)-3], func(dir string) { os.Mkdir(dir, 0o755) }, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			tt.prepare(dir)
			before, _ := os.ReadDir(dir)
			_, err := Restore(bytes.NewReader(tt.file), dir, nil)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Restore: %v, want %v", err, tt.want)
			}
			siblings, _ := os.ReadDir(parent)
			if len(siblings) > 1 || len(siblings) == 1 && siblings[0].Name() != "data" {
				t.Fatalf("left beside the directory: %v", siblings)
			}
			after, _ := os.ReadDir(dir)
			if tt.want != nil && len(after) != len(before) {
				t.Fatalf("the directory changed: %d entries before, %d after", len(before), len(after))
			}
			if tt.want == nil {
				if key, err := os.ReadFile(filepath.Join(dir, "secret-key")); err != nil || len(key) != 32 {
					t.Fatalf("secret-key: %v", err)
				}
			}
		})
	}
}

// A data directory is often a link to a directory on a volume of its own
// (/var/lib/kitd -> /mnt/disk/kitd). A restore fills what the link leads
// to and keeps the link: it replaced the link, leaving the volume empty
// and the data on the link's own filesystem.
func TestRestoreThroughALink(t *testing.T) {
	whole, _ := sample(t)
	for _, tc := range []struct {
		name    string
		target  func(volume string) string
		restore bool
	}{
		{"a link to an empty directory fills it", func(volume string) string {
			os.Mkdir(filepath.Join(volume, "kitd"), 0o755)
			return filepath.Join(volume, "kitd")
		}, true},
		{"a link that leads nowhere is refused", func(volume string) string { return filepath.Join(volume, "missing") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			volume, parent := t.TempDir(), t.TempDir()
			target := tc.target(volume)
			link := filepath.Join(parent, "data")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			_, err := Restore(bytes.NewReader(whole), link, nil)
			if (err == nil) != tc.restore {
				t.Fatalf("Restore: %v, want a restore: %v", err, tc.restore)
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the link is no more a link: %v, %v", fi, err)
			}
			if siblings, _ := os.ReadDir(volume); tc.restore && len(siblings) != 1 {
				t.Fatalf("beside the linked directory: %v", siblings)
			}
			if _, err := os.Stat(filepath.Join(target, "secret-key")); (err == nil) != tc.restore {
				t.Fatalf("the linked directory's secret-key: %v", err)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	whole, _ := sample(f)
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := Read(bytes.NewReader(b), Visitor{})
		if err == nil && !bytes.Equal(b, whole) {
			// Only a file with a matching SHA-256 reads: a collision
			// here would be news.
			t.Fatalf("a file other than the sample read as whole")
		}
	})
}
