// Package loadgen is the engine of kitd's load generator (bench/cmd/kitbench).
//
// It holds these pieces:
//
//   - Histogram, a fixed-size log-linear latency histogram (in the spirit of
//     HdrHistogram) that yields percentiles with under 0.4 % relative error
//     without keeping every sample;
//   - Scenario, a named request shape that can be replayed against any
//     address (kitd or the trivial reference server);
//   - Run, a closed-loop runner: one goroutine per connection, each sending
//     its next request as soon as the previous answer arrives, for a fixed
//     duration, counting every non-2xx answer or transport failure as an
//     error;
//   - RunOpen, an open-loop runner: requests come due at a fixed rate on
//     the clock whether or not earlier ones were answered, and each one's
//     latency runs from its due time, so queueing in the server shows
//     (coordinated omission corrected);
//   - Live, counters a caller may read during a run, for a progress line.
//
// The package depends only on the standard library and fasthttp.
package loadgen
