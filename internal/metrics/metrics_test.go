package metrics

import (
	"math"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kitd/kitd/internal/metrics/metricstest"
)

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestExposition(t *testing.T) {
	tests := []struct {
		rule  string
		write func(*Writer)
		check func(*testing.T, map[string]*dto.MetricFamily)
	}{
		{"a counter shows its count with its labels", func(w *Writer) {
			var c Counter
			c.Inc()
			c.Add(2)
			w.Family("kitd_x_total", "x.", TypeCounter)
			w.Uint("kitd_x_total", Label("route", "POST /api/v1/messages").With(Label("status", "201")), c.Load())
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			m := mfs["kitd_x_total"].GetMetric()[0]
			if m.GetCounter().GetValue() != 3 || labelOf(m, "route") != "POST /api/v1/messages" || labelOf(m, "status") != "201" {
				t.Fatalf("got %v", m)
			}
		}},
		{"a family of one counter and one of one gauge are typed as such", func(w *Writer) {
			w.Counter("kitd_c_total", "c.", 7)
			w.Gauge("kitd_g", "g.", 3)
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			c, g := mfs["kitd_c_total"], mfs["kitd_g"]
			if c.GetType() != dto.MetricType_COUNTER || c.GetMetric()[0].GetCounter().GetValue() != 7 || c.GetHelp() != "c." {
				t.Errorf("counter: %v", c)
			}
			if g.GetType() != dto.MetricType_GAUGE || g.GetMetric()[0].GetGauge().GetValue() != 3 || g.GetHelp() != "g." {
				t.Errorf("gauge: %v", g)
			}
		}},
		{"a label value is escaped and reads back as it was", func(w *Writer) {
			w.Family("kitd_y", "y.", TypeGauge)
			w.Sample("kitd_y", Label("v", "a\"b\\c\nd"), 1.5)
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			m := mfs["kitd_y"].GetMetric()[0]
			if labelOf(m, "v") != "a\"b\\c\nd" || m.GetGauge().GetValue() != 1.5 {
				t.Fatalf("got %v", m)
			}
		}},
		{"histogram buckets are cumulative and +Inf is the count", func(w *Writer) {
			h := NewHistogram(LatencyBuckets)
			h.ObserveDuration(50 * time.Microsecond)
			h.ObserveDuration(3 * time.Millisecond)
			h.ObserveDuration(time.Minute)
			w.Family("kitd_h_seconds", "h.", TypeHistogram)
			w.Histogram("kitd_h_seconds", Label("route", "r"), h.Snapshot())
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			hist := mfs["kitd_h_seconds"].GetMetric()[0].GetHistogram()
			if hist.GetSampleCount() != 3 {
				t.Fatalf("count %d, want 3", hist.GetSampleCount())
			}
			want := map[float64]uint64{0.0001: 1, 0.0025: 1, 0.005: 2, 10: 2}
			for _, b := range hist.GetBucket() {
				if n, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != n {
					t.Errorf("le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), n)
				}
			}
			if s := hist.GetSampleSum(); math.Abs(s-(60.003050)) > 1e-9 {
				t.Errorf("sum %v s, want 60.00305", s)
			}
		}},
		{"an observation equal to a bound counts under that bound", func(w *Writer) {
			h := NewHistogram(SizeBuckets)
			h.Observe(512)
			w.Family("kitd_b_bytes", "b.", TypeHistogram)
			w.Histogram("kitd_b_bytes", "", h.Snapshot())
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			for _, b := range mfs["kitd_b_bytes"].GetMetric()[0].GetHistogram().GetBucket() {
				if want := uint64(0); b.GetUpperBound() == 128 && b.GetCumulativeCount() != want ||
					b.GetUpperBound() == 512 && b.GetCumulativeCount() != 1 {
					t.Errorf("le=%v: %d", b.GetUpperBound(), b.GetCumulativeCount())
				}
			}
		}},
		{"kitd_build_info is 1 with the version, commit and Go version", func(w *Writer) {
			BuildInfo("1.2.3", "64fd719+modified", "go1.26.8")(w)
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			m := mfs["kitd_build_info"].GetMetric()[0]
			if m.GetGauge().GetValue() != 1 || labelOf(m, "version") != "1.2.3" || labelOf(m, "commit") != "64fd719+modified" || labelOf(m, "goversion") != "go1.26.8" {
				t.Fatalf("got %v", m)
			}
		}},
		{"the Go runtime and process families are there", func(w *Writer) {
			Runtime()(w)
		}, func(t *testing.T, mfs map[string]*dto.MetricFamily) {
			for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds"} {
				if mfs[name] == nil {
					t.Errorf("no %s", name)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var w Writer
			tt.write(&w)
			tt.check(t, metricstest.Parse(t, w.Bytes()))
		})
	}
}

// A finer histogram folded into coarser bounds never places a count under a
// bound it may exceed.
func TestRebucket(t *testing.T) {
	fine := []float64{0.0001, 0.0002, 0.0003, 0.0004, 0.007, 0.02}
	cum := []uint64{1, 2, 3, 4, 5, 6}
	s := Rebucket(fine, cum, 7, 1.5, []float64{0.00025, 0.001, 0.01})
	if want := []uint64{2, 4, 5, 7}; !slices.Equal(s.Cumulative, want) {
		t.Fatalf("cumulative %v, want %v", s.Cumulative, want)
	}
}

// Counting is on every request's path: it must not allocate.
func TestCountingAllocatesNothing(t *testing.T) {
	var c Counter
	h := NewHistogram(LatencyBuckets)
	if n := testing.AllocsPerRun(100, func() {
		c.Inc()
		h.ObserveDuration(time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}
