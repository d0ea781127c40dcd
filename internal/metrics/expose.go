package metrics

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"sync"
)

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Type is a metric family's type in the exposition.
type Type string

const (
	TypeCounter   Type = "counter"
	TypeGauge     Type = "gauge"
	TypeHistogram Type = "histogram"
)

// Labels is a series' label set rendered once, ahead of time, as the text
// between the braces: `route="POST /api/v1/messages",status="201"`.
type Labels string

// Label renders one label pair, escaping the value as the format asks.
func Label(name, value string) Labels {
	return Labels(name + `="` + labelEscaper.Replace(value) + `"`)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// With returns l followed by m.
func (l Labels) With(m Labels) Labels {
	switch {
	case l == "":
		return m
	case m == "":
		return l
	}
	return l + "," + m
}

// Writer writes families in the text format. Each family is announced once
// (Family), then its samples follow.
type Writer struct {
	b bytes.Buffer
}

// Family starts a family: its HELP and TYPE lines.
func (w *Writer) Family(name, help string, typ Type) {
	w.b.WriteString("# HELP ")
	w.b.WriteString(name)
	w.b.WriteByte(' ')
	w.b.WriteString(helpEscaper.Replace(help))
	w.b.WriteString("\n# TYPE ")
	w.b.WriteString(name)
	w.b.WriteByte(' ')
	w.b.WriteString(string(typ))
	w.b.WriteByte('\n')
}

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// Sample writes one sample of the current family.
func (w *Writer) Sample(name string, l Labels, v float64) {
	w.b.WriteString(name)
	if l != "" {
		w.b.WriteByte('{')
		w.b.WriteString(string(l))
		w.b.WriteByte('}')
	}
	w.b.WriteByte(' ')
	w.b.Write(appendValue(w.b.AvailableBuffer(), v))
	w.b.WriteByte('\n')
}

// Uint writes one sample whose value is a count.
func (w *Writer) Uint(name string, l Labels, v uint64) {
	w.Sample(name, l, float64(v))
}

// Counter writes a family of one unlabelled counter: its HELP and TYPE
// lines and its count.
func (w *Writer) Counter(name, help string, v uint64) {
	w.Family(name, help, TypeCounter)
	w.Uint(name, "", v)
}

// Gauge writes a family of one unlabelled gauge.
func (w *Writer) Gauge(name, help string, v uint64) {
	w.Family(name, help, TypeGauge)
	w.Uint(name, "", v)
}

// Histogram writes the samples of one histogram series of the current
// family (name without the _bucket, _sum and _count suffixes).
func (w *Writer) Histogram(name string, l Labels, s HistogramSnapshot) {
	for i, b := range s.Bounds {
		w.Sample(name+"_bucket", l.With(Labels(`le="`+string(appendValue(nil, b))+`"`)), float64(s.Cumulative[i]))
	}
	w.Sample(name+"_bucket", l.With(`le="+Inf"`), float64(s.Count()))
	w.Sample(name+"_sum", l, s.Sum)
	w.Sample(name+"_count", l, float64(s.Count()))
}

// Raw appends text already in the exposition format (another library's
// families).
func (w *Writer) Raw(b []byte) { w.b.Write(b) }

// Bytes returns what was written.
func (w *Writer) Bytes() []byte { return w.b.Bytes() }

func appendValue(dst []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case isInt(v):
		return strconv.AppendInt(dst, int64(v), 10)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}

// Collector writes some families at scrape time.
type Collector func(*Writer)

// Registry is the node's set of collectors: each layer registers what it
// counts once, at startup, and a scrape runs them all in that order. A
// family name must belong to one collector only.
type Registry struct {
	mu         sync.Mutex
	collectors []Collector
}

// Register adds c to the scrape.
func (r *Registry) Register(c Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
}

// Gather runs every collector and returns the exposition.
func (r *Registry) Gather() []byte {
	r.mu.Lock()
	cs := r.collectors
	r.mu.Unlock()
	var w Writer
	for _, c := range cs {
		c(&w)
	}
	return w.Bytes()
}
