package metrics

import (
	"bytes"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// Runtime is the collector of the Go runtime's and the process's families
// (go_goroutines, go_memstats_*, go_gc_duration_seconds, process_*), as
// client_golang's collectors name them, so that the dashboards every Go
// service is watched with work unchanged. They are read only at scrape
// time; nothing of client_golang runs while requests are served.
func Runtime() Collector {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return func(w *Writer) {
		// On an error (no /proc for the process collector), what could
		// be gathered is still worth showing.
		mfs, _ := reg.Gather()
		var b bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				return
			}
		}
		w.Raw(b.Bytes())
	}
}
