// Package metricstest reads an exposition back for tests: with
// Prometheus' own text parser, which refuses anything the format does not
// allow, and by family and labels.
package metricstest

import (
	"bytes"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses text, failing t if it is not the text format.
func Parse(t testing.TB, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, text)
	}
	return mfs
}

// Value sums the values (a histogram's: its count) of the series of family
// whose labels include the name, value pairs of labels; 0 when none does.
func Value(mfs map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	var v float64
	for _, m := range mfs[family].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if ok {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}
