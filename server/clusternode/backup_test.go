package clusternode

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
)

// TestBackupReadPages: the holder's side of BackupRead, one rule a row.
func TestBackupReadPages(t *testing.T) {
	const p = partition.ID(5)
	lower, _ := partition.KeyRange(p)
	keyOf := func(i int) []byte { return fmt.Appendf(bytes.Clone(lower), "k%04d", i) }
	setup := func(t *testing.T) (*persistence.Store, func() (*persistence.Snapshot, error)) {
		store, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		b := store.NewBatch()
		value := bytes.Repeat([]byte{'v'}, 100<<10)
		for i := range 30 { // 3 MB: three pages at least
			b.Set(keyOf(i), value)
		}
		next, _ := partition.KeyRange(p + 1)
		b.Set(append(next, 'x'), []byte("another partition's"))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return store, func() (*persistence.Snapshot, error) { return store.NewSnapshot(), nil }
	}
	readAll := func(t *testing.T, br *backupReads, key backupReadKey, take func() (*persistence.Snapshot, error), between func()) [][]byte {
		var keys [][]byte
		var after []byte
		for pages := 0; ; pages++ {
			out, err := br.page(key, after, take)
			if err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			keys = append(keys, out.Keys...)
			if !out.More {
				if pages < 2 {
					t.Fatalf("%d pages, want several", pages+1)
				}
				return keys
			}
			after = out.Keys[len(out.Keys)-1]
			between()
		}
	}

	t.Run("every page comes from the first page's snapshot", func(t *testing.T) {
		store, take := setup(t)
		br := &backupReads{}
		n := 0
		keys := readAll(t, br, backupReadKey{"b1", p}, take, func() {
			b := store.NewBatch()
			b.Delete(keyOf(29))
			b.Set(keyOf(100+n), []byte("written after the first page"))
			n++
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		})
		if len(keys) != 30 || !bytes.Equal(keys[29], keyOf(29)) {
			t.Fatalf("%d keys read, the last %q; want the 30 of the snapshot", len(keys), keys[len(keys)-1])
		}
	})
	t.Run("a read that ended is released", func(t *testing.T) {
		_, take := setup(t)
		br := &backupReads{}
		readAll(t, br, backupReadKey{"b1", p}, take, func() {})
		if len(br.open) != 0 {
			t.Fatalf("%d snapshots kept after the last page", len(br.open))
		}
	})
	t.Run("a later page without its snapshot is refused", func(t *testing.T) {
		_, take := setup(t)
		if _, err := (&backupReads{}).page(backupReadKey{"b1", p}, keyOf(3), take); err == nil {
			t.Fatal("a page after a key was answered from no snapshot")
		}
	})
	t.Run("an after outside the partition is refused", func(t *testing.T) {
		_, take := setup(t)
		br := &backupReads{}
		if _, err := br.page(backupReadKey{"b1", p}, nil, take); err != nil {
			t.Fatal(err)
		}
		if _, err := br.page(backupReadKey{"b1", p}, []byte("p/\x00\x06/x"), take); err == nil {
			t.Fatal("a page after another partition's key was answered")
		}
	})
	t.Run("an idle read is released", func(t *testing.T) {
		_, take := setup(t)
		br := &backupReads{}
		if _, err := br.page(backupReadKey{"b1", p}, nil, take); err != nil {
			t.Fatal(err)
		}
		br.mu.Lock()
		br.expire(time.Now().Add(backupReadIdle + time.Second))
		left := len(br.open)
		br.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d idle snapshots kept", left)
		}
	})
}
