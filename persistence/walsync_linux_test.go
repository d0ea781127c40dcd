package persistence

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestWALSyncsKeepTheirP(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if s.wal == nil {
		t.Fatal("a store on the real disk does not sync its WAL through withWALSync")
	}
	before := s.wal.syncs.Load()
	b := s.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	commit(t, b)
	b = s.NewBatch()
	b.Set([]byte("k2"), []byte("v"))
	w, err := b.Apply()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := s.wal.syncs.Load() - before; got < 1 {
		t.Fatalf("Commit and Apply+Wait issued %d raw WAL syncs, want at least 1", got)
	}
}

func TestOnlyWALFilesSyncRaw(t *testing.T) {
	dir := t.TempDir()
	fs := withWALSync(vfs.Default)
	open := map[string]func(name string) (vfs.File, error){
		"Create": func(name string) (vfs.File, error) {
			return fs.Create(name, vfs.WriteCategoryUnspecified)
		},
		"OpenReadWrite": func(name string) (vfs.File, error) {
			return fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		},
		"ReuseForWrite": func(name string) (vfs.File, error) {
			old := name + ".old"
			f, err := vfs.Default.Create(old, vfs.WriteCategoryUnspecified)
			if err != nil {
				return nil, err
			}
			f.Close()
			return fs.ReuseForWrite(old, name, vfs.WriteCategoryUnspecified)
		},
	}
	for _, tc := range []struct {
		file string
		raw  bool
	}{
		{"000004.log", true},
		{"000005-001.log", true}, // a WAL segment after a failover
		{"000006.sst", false},
		{"000007.blob", false},
		{"MANIFEST-000001", false},
		{"OPTIONS-000003", false},
	} {
		for how, openFile := range open {
			t.Run(how+"/"+tc.file, func(t *testing.T) {
				name := filepath.Join(dir, how, tc.file)
				if err := vfs.Default.MkdirAll(filepath.Dir(name), 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := openFile(name)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, raw := f.(*walFile); raw != tc.raw {
					t.Fatalf("raw WAL sync = %v, want %v", raw, tc.raw)
				}
				before := fs.syncs.Load()
				if _, err := f.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				if err := f.SyncData(); err != nil {
					t.Fatal(err)
				}
				want := uint64(0)
				if tc.raw {
					want = 1
				}
				if got := fs.syncs.Load() - before; got != want {
					t.Fatalf("SyncData made %d raw syncs, want %d", got, want)
				}
			})
		}
	}
}

func TestRawSyncDataReportsErrors(t *testing.T) {
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "000001.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	f.Close()
	if err := rawSyncData(fd); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("fdatasync of a closed file: %v, want EBADF", err)
	}
}
