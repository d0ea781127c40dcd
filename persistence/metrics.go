package persistence

import (
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kitd/kitd/internal/metrics"
)

// stats is what the store counts itself, beside what Pebble's Metrics
// reports: the latency and size of every synced commit (read from the
// stats Pebble keeps per batch anyway, so no extra clock read), and the
// stalls its event listener hears of.
type stats struct {
	commit     *metrics.Histogram // BatchCommitStats.TotalDuration, sync included
	batchBytes *metrics.Histogram
	writeStall metrics.Counter
	diskSlow   metrics.Counter
}

func newStats() stats {
	return stats{commit: metrics.NewHistogram(metrics.LatencyBuckets), batchBytes: metrics.NewHistogram(metrics.SizeBuckets)}
}

// committed counts a batch whose commit, WAL sync included, is done.
func (s *stats) committed(b *pebble.Batch) {
	s.commit.ObserveDuration(b.CommitStats().TotalDuration)
	s.batchBytes.Observe(int64(b.Len()))
}

// listener logs and counts what Pebble tells of trouble: errors in the
// background, a disk that stalls an operation, writes held back because
// flushes or compactions fall behind (lifecycle events of the node's log).
func (s *stats) listener(l *slog.Logger) *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			l.Warn("background error", "err", err)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			s.diskSlow.Inc()
			l.Warn("disk slow", "info", info.String())
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			s.writeStall.Inc()
			l.Warn("write stall", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			l.Info("write stall ended")
		},
	}
}

// Collect writes the store's families: its own counts and a few of
// Pebble's Metrics (the ones that say whether storage keeps up). It runs
// at scrape time only: Pebble's Metrics takes its locks and allocates.
func (s *Store) Collect(w *metrics.Writer) {
	m := s.db.Metrics()

	w.Family("kitd_pebble_commit_duration_seconds", "Synced batch commits, from the commit call to the end of its WAL sync.", metrics.TypeHistogram)
	w.Histogram("kitd_pebble_commit_duration_seconds", "", s.stats.commit.Snapshot())
	w.Family("kitd_pebble_batch_bytes", "Size of each committed batch.", metrics.TypeHistogram)
	w.Histogram("kitd_pebble_batch_bytes", "", s.stats.batchBytes.Snapshot())

	if fsync, ok := fsyncLatency(m.LogWriter.FsyncLatency); ok {
		w.Family("kitd_pebble_wal_fsync_duration_seconds", "WAL fsyncs (one covers every batch committed with it), folded from Pebble's buckets.", metrics.TypeHistogram)
		w.Histogram("kitd_pebble_wal_fsync_duration_seconds", "", fsync)
		w.Counter("kitd_pebble_wal_syncs_total", "WAL fsyncs.", fsync.Count())
	}
	counter(w, "kitd_pebble_wal_bytes_written_total", "Bytes written to the WAL.", float64(m.WAL.BytesWritten))
	gauge(w, "kitd_pebble_compaction_debt_bytes", "Estimated bytes compactions need to rewrite to bring the LSM back into shape.", float64(m.Compact.EstimatedDebt))
	gauge(w, "kitd_pebble_compactions_in_progress", "Compactions running.", float64(m.Compact.NumInProgress))
	counter(w, "kitd_pebble_compactions_total", "Compactions completed.", float64(m.Compact.Count))
	w.Family("kitd_pebble_compactions_by_kind_total", "Compactions completed, by what picked them: tombstone_density rewrites tables for their deletions.", metrics.TypeCounter)
	for _, k := range []struct {
		kind string
		n    int64
	}{
		{"default", m.Compact.DefaultCount},
		{"delete_only", m.Compact.DeleteOnlyCount},
		{"elision_only", m.Compact.ElisionOnlyCount},
		{"copy", m.Compact.CopyCount},
		{"move", m.Compact.MoveCount},
		{"read", m.Compact.ReadCount},
		{"tombstone_density", m.Compact.TombstoneDensityCount},
		{"rewrite", m.Compact.RewriteCount},
		{"multi_level", m.Compact.MultiLevelCount},
		{"blob_file_rewrite", m.Compact.BlobFileRewriteCount},
	} {
		w.Sample("kitd_pebble_compactions_by_kind_total", metrics.Label("kind", k.kind), float64(k.n))
	}
	var flushed, compacted uint64
	for _, l := range m.Levels {
		flushed += l.TableBytesFlushed
		compacted += l.TableBytesCompacted
	}
	counter(w, "kitd_pebble_flush_bytes_written_total", "Bytes flushes wrote into tables.", float64(flushed))
	counter(w, "kitd_pebble_compaction_bytes_written_total", "Bytes compactions wrote into tables; with the flushes' and the WAL's, the store's write amplification.", float64(compacted))
	counter(w, "kitd_pebble_flushes_total", "Memtable flushes completed.", float64(m.Flush.Count))
	gauge(w, "kitd_pebble_l0_sublevels", "Sublevels of L0; writes stall when they pile up.", float64(m.Levels[0].Sublevels))
	gauge(w, "kitd_pebble_read_amplification", "Sublevels of L0 plus non-empty levels below.", float64(m.ReadAmp()))
	gauge(w, "kitd_pebble_memtable_bytes", "Bytes allocated to memtables.", float64(m.MemTable.Size))
	gauge(w, "kitd_pebble_disk_usage_bytes", "Bytes the store uses on disk.", float64(m.DiskSpaceUsage()))
	counter(w, "kitd_pebble_write_stalls_total", "Times Pebble held writes back because flushes or compactions fell behind.", float64(s.stats.writeStall.Load()))
	counter(w, "kitd_pebble_disk_slow_total", "Disk operations Pebble found slow.", float64(s.stats.diskSlow.Load()))
}

func counter(w *metrics.Writer, name, help string, v float64) {
	w.Family(name, help, metrics.TypeCounter)
	w.Sample(name, "", v)
}

func gauge(w *metrics.Writer, name, help string, v float64) {
	w.Family(name, help, metrics.TypeGauge)
	w.Sample(name, "", v)
}

// fsyncLatency reads Pebble's WAL fsync histogram (nanoseconds, 100
// buckets) and folds it into metrics.LatencyBuckets in seconds.
func fsyncLatency(h prometheus.Histogram) (metrics.HistogramSnapshot, bool) {
	if h == nil {
		return metrics.HistogramSnapshot{}, false
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return metrics.HistogramSnapshot{}, false
	}
	fine := make([]float64, 0, len(m.Histogram.Bucket))
	cum := make([]uint64, 0, len(m.Histogram.Bucket))
	for _, b := range m.Histogram.Bucket {
		fine = append(fine, b.GetUpperBound()*1e-9)
		cum = append(cum, b.GetCumulativeCount())
	}
	return metrics.Rebucket(fine, cum, m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()*1e-9, metrics.LatencyBuckets.Scaled()), true
}
