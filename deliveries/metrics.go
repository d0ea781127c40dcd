package deliveries

import (
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/metrics"
)

// senderStats are the sender's metrics (docs/decisions.md "Metrics"): the
// latency of each attempt's HTTPS exchange and why attempts failed. What
// an outcome means for the event (retry, dead letter, pause) is the
// delivery actor's, which counts it (kitd_delivery_attempts_total).
type senderStats struct {
	duration *metrics.Histogram
	failures [len(failureReasons)]metrics.Counter
}

// failureReasons are the developer log's error codes of a failed attempt,
// the last one for any other.
var failureReasons = [...]string{ReasonTimeout, ReasonConnection, ReasonHTTP, ReasonTLS, "no_endpoint", "no_signing_secret", actors.MissingScope, "other"}

func newSenderStats() senderStats {
	return senderStats{duration: metrics.NewHistogram(metrics.LatencyBuckets)}
}

// fail counts a failed attempt with its error code.
func (s *senderStats) fail(code string) {
	i := len(failureReasons) - 1
	for j, r := range failureReasons {
		if r == code {
			i = j
			break
		}
	}
	s.failures[i].Inc()
}

// Collect writes the sender's families (a metrics.Collector).
func (s *Sender) Collect(w *metrics.Writer) {
	w.Family("kitd_delivery_attempt_duration_seconds", "Event delivery attempts, from the request's start to its answer read (or its failure); an attempt that could not start (no endpoint, no signing secret) is not in it.", metrics.TypeHistogram)
	w.Histogram("kitd_delivery_attempt_duration_seconds", "", s.stats.duration.Snapshot())
	w.Family("kitd_delivery_attempt_failures_total", "Failed event delivery attempts, by the developer log's errorCode.", metrics.TypeCounter)
	for i, r := range failureReasons {
		w.Uint("kitd_delivery_attempt_failures_total", metrics.Label("reason", r), s.stats.failures[i].Load())
	}
}

// observe counts one attempt that took d.
func (s *senderStats) observe(d time.Duration) { s.duration.ObserveDuration(d) }
