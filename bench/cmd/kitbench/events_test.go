package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

// A post's latency runs from its 2xx to its event's arrival, whichever
// of the two the bench learns first.
func TestArrivalsPairPostsWithTheirEvents(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		steps func(a *arrivals)
		want  time.Duration
	}{
		{"answer, then event", func(a *arrivals) {
			a.answered(7, t0)
			a.arrive(7, t0.Add(30*time.Millisecond))
		}, 30 * time.Millisecond},
		{"event before the client noted the answer", func(a *arrivals) {
			a.arrive(7, t0.Add(30*time.Millisecond))
			a.answered(7, t0)
		}, 30 * time.Millisecond},
		{"an event that came first by the clocks counts as 0", func(a *arrivals) {
			a.arrive(7, t0)
			a.answered(7, t0.Add(time.Millisecond))
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newArrivals()
			tc.steps(a)
			var h loadgen.Histogram
			n, last := a.done(&h)
			if n != 1 || h.Count() != 1 || last.IsZero() {
				t.Fatalf("%d events, %d latencies, last %v", n, h.Count(), last)
			}
			if got := h.Max(); got < tc.want-tc.want/100 || got > tc.want+tc.want/100 {
				t.Fatalf("latency %v, want %v", got, tc.want)
			}
		})
	}
}

// wait returns as soon as the events asked for arrived, and gives up at
// its timeout.
func TestArrivalsWait(t *testing.T) {
	a := newArrivals()
	go func() {
		for i := range uint64(3) {
			a.arrive(i, time.Now())
		}
	}()
	done := make(chan struct{})
	go func() { a.wait(context.Background(), 3, time.Minute); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("wait did not return once 3 events arrived")
	}
	start := time.Now()
	a.wait(context.Background(), 4, 50*time.Millisecond)
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("wait returned before its timeout with an event missing")
	}
}

// The receiver answers 200 over https with the certificate it wrote for
// --delivery-ca, and reports each bench post's event to the current run.
func TestEventReceiver(t *testing.T) {
	r, err := startEventReceiver(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	a := newArrivals()
	r.tracker.Store(a)
	ca, err := os.ReadFile(r.caPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("the receiver's PEM holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
	for _, text := range []string{benchText + "42", "set-up post"} {
		body, _ := json.Marshal(map[string]any{"type": "message.posted", "data": map[string]any{"message": map[string]any{"text": text}}})
		resp, err := client.Post("https://"+r.addr+"/events", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: status %d", text, resp.StatusCode)
		}
	}
	a.answered(42, time.Now())
	var h loadgen.Histogram
	if n, _ := a.done(&h); n != 1 || h.Count() != 1 {
		t.Fatalf("%d events and %d latencies, want the bench post's alone", n, h.Count())
	}
}

// The Kit of the subscribed side subscribes to message.posted at the
// receiver; the other's manifest is unchanged.
func TestWithEvents(t *testing.T) {
	if got := withEvents(benchManifest, ""); got != benchManifest {
		t.Fatalf("no endpoint changed the manifest: %s", got)
	}
	var m struct {
		Events    []string          `json:"events"`
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(withEvents(benchManifest, "https://127.0.0.1:1/events")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Events) != 1 || m.Events[0] != "message.posted" || m.Endpoints["events"] != "https://127.0.0.1:1/events" {
		t.Fatalf("events %v, endpoints %v", m.Events, m.Endpoints)
	}
}

// spreadOver gives conversation i to installation i mod n: every
// conversation to exactly one, the shares within one of each other.
func TestSpreadOver(t *testing.T) {
	convs := []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6"}
	for _, tc := range []struct {
		name string
		n    int
		want [][]string
	}{
		{"one installation takes every conversation", 1, [][]string{convs}},
		{"round-robin, the first shares one more", 3, [][]string{{"c0", "c3", "c6"}, {"c1", "c4"}, {"c2", "c5"}}},
		{"as many installations as conversations: one each", 7, [][]string{{"c0"}, {"c1"}, {"c2"}, {"c3"}, {"c4"}, {"c5"}, {"c6"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := spreadOver(convs, tc.n)
			if len(got) != len(tc.want) {
				t.Fatalf("%d shares, want %d", len(got), len(tc.want))
			}
			for k := range got {
				if strings.Join(got[k], ",") != strings.Join(tc.want[k], ",") {
					t.Fatalf("share %d = %v, want %v", k, got[k], tc.want[k])
				}
			}
		})
	}
}

// Each installation of the events scenario has an endpoint of its own on
// the receiver.
func TestEventEndpointsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for k := range 8 {
		ep := eventEndpoint("https://127.0.0.1:1", k)
		if seen[ep] || !strings.HasPrefix(ep, "https://127.0.0.1:1/events/") {
			t.Fatalf("endpoint %d: %s (seen %v)", k, ep, seen)
		}
		seen[ep] = true
	}
}

// A side's store bytes are per post, over every round; a side that could
// not read a node's counters, or made no post, has no figure rather than
// a wrong one.
func TestEventsSideStorePerPost(t *testing.T) {
	for _, tc := range []struct {
		name string
		side eventsSide
		want *storeBytes
	}{
		{"each counter per post", eventsSide{posts: 4, store: [3]uint64{4000, 800, 2000}, storeOK: true},
			&storeBytes{WAL: 1000, Flushed: 200, Compacted: 500}},
		{"a counter not read gives no figure", eventsSide{posts: 4, store: [3]uint64{4000, 800, 2000}}, nil},
		{"no post gives no figure", eventsSide{storeOK: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.side.storePerPost()
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("%+v, want %+v", got, tc.want)
			}
		})
	}
}

// The events line gives both sides' store bytes when both were measured.
func TestEventsReportPrintsStoreBytes(t *testing.T) {
	s := &scenarioReport{Name: "events-10-conversations", Kitd: &runStats{CPUMicrosPerRequest: 90}}
	e := &eventsReport{Plain: &runStats{CPUMicrosPerRequest: 30}, CPURatio: 3, Posts: 10, Events: 10,
		PlainStore: &storeBytes{WAL: 206, Flushed: 35, Compacted: 60}, Store: &storeBytes{WAL: 930, Flushed: 190, Compacted: 550}}
	var out strings.Builder
	e.print(&out, s)
	if want := "WAL 930 / 206, flushed 190 / 35, compacted 550 / 60"; !strings.Contains(out.String(), want) {
		t.Fatalf("printed:\n%s\nwant %q", out.String(), want)
	}
	e.PlainStore = nil
	out.Reset()
	e.print(&out, s)
	if strings.Contains(out.String(), "store's bytes") {
		t.Fatalf("printed store bytes with one side unmeasured:\n%s", out.String())
	}
}

// Closed loops and an open loop have goals of their own (issue 29), and
// the events line says which.
func TestEventsReportPrintsItsLoadsGoals(t *testing.T) {
	s := &scenarioReport{Name: "events-10-conversations", Kitd: &runStats{CPUMicrosPerRequest: 90}}
	for _, tc := range []struct {
		name string
		rate float64
		want []string
	}{
		{"closed loops", 0, []string{"(goal ≤ 2.00x)", "(goal ≤ 100.0ms)"}},
		{"an open loop", 3000, []string{"(goal ≤ 1.17x)", "(goal ≤ 10.0ms)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &eventsReport{Plain: &runStats{CPUMicrosPerRequest: 30}, CPURatio: 3, Rate: tc.rate}
			var out strings.Builder
			e.print(&out, s)
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("printed:\n%s\nwant %q", out.String(), w)
				}
			}
		})
	}
}
