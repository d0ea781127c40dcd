package persistence

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/metrics/metricstest"
)

// scrape reads the store's families back with Prometheus' text parser.
func scrape(t *testing.T, s *Store) map[string]*dto.MetricFamily {
	t.Helper()
	var w metrics.Writer
	s.Collect(&w)
	return metricstest.Parse(t, w.Bytes())
}

func histCount(mfs map[string]*dto.MetricFamily, name string) uint64 {
	if mf := mfs[name]; mf != nil {
		return mf.GetMetric()[0].GetHistogram().GetSampleCount()
	}
	return 0
}

func TestStoreMetrics(t *testing.T) {
	tests := []struct {
		rule   string
		write  func(t *testing.T, s *Store)
		commit uint64 // commits counted afterwards
	}{
		{"a synced commit is counted with its size", func(t *testing.T, s *Store) {
			setAll(t, s, "a", "1")
		}, 1},
		{"an applied batch is counted once its sync was waited for", func(t *testing.T, s *Store) {
			b := s.NewBatch()
			b.Set([]byte("a"), []byte("1"))
			d, err := b.Apply()
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Wait(); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"an empty batch commits nothing and counts nothing", func(t *testing.T, s *Store) {
			commit(t, s.NewBatch())
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			s := openMem(t)
			tt.write(t, s)
			mfs := scrape(t, s)
			if got := histCount(mfs, "kitd_pebble_commit_duration_seconds"); got != tt.commit {
				t.Errorf("commits %d, want %d", got, tt.commit)
			}
			if got := histCount(mfs, "kitd_pebble_batch_bytes"); got != tt.commit {
				t.Errorf("batch sizes %d, want %d", got, tt.commit)
			}
			if tt.commit > 0 {
				// Pebble's log writer may record the fsync's latency after it
				// has woken the commit that waited for it.
				eventually.True(t, "a WAL sync counted", func() bool {
					return scrape(t, s)["kitd_pebble_wal_syncs_total"].GetMetric()[0].GetCounter().GetValue() >= 1
				})
			}
			for _, name := range []string{"kitd_pebble_compaction_debt_bytes", "kitd_pebble_wal_fsync_duration_seconds", "kitd_pebble_write_stalls_total"} {
				if mfs[name] == nil {
					t.Errorf("no %s", name)
				}
			}
		})
	}
}

// Flushes and compactions are counted with the bytes they write, and
// compactions by the kind that picked them: the store's write
// amplification, and what drives it (docs/decisions.md "Metrics").
func TestStoreCompactionMetrics(t *testing.T) {
	s := openMem(t)
	for _, v := range []string{"1", "2"} { // two overlapping tables in L0
		setAll(t, s, "a", v, "b", v)
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Merging the two takes a compaction that rewrites them (Pebble may
	// have started one of its own already).
	if err := s.db.Compact(context.Background(), []byte("a"), []byte("c"), false); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, s)

	value := metricstest.Value
	if got := value(after, "kitd_pebble_flush_bytes_written_total"); got <= 0 {
		t.Errorf("two flushes wrote %v bytes", got)
	}
	if got := value(after, "kitd_pebble_compaction_bytes_written_total"); got <= 0 {
		t.Errorf("a compaction of two tables wrote %v bytes", got)
	}
	if got, total := value(after, "kitd_pebble_compactions_by_kind_total", "kind", "default"), value(after, "kitd_pebble_compactions_total"); got < 1 || total < got {
		t.Errorf("default compactions %v of %v, want the manual one", got, total)
	}
	kinds := map[string]bool{}
	for _, m := range after["kitd_pebble_compactions_by_kind_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			kinds[l.GetValue()] = true
		}
	}
	for _, kind := range []string{"default", "delete_only", "elision_only", "copy", "move", "read", "tombstone_density", "rewrite", "multi_level", "blob_file_rewrite"} {
		if !kinds[kind] {
			t.Errorf("no series for kind %q", kind)
		}
	}
}
