package e2e

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/kitverify"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// receiver is a Kit's events endpoint on loopback: an https server whose
// certificate the server under test trusts (--delivery-ca) and whose host
// it may reach (--delivery-allow). answer decides each request's fate.
type receiver struct {
	srv    *httptest.Server
	caPath string
	answer atomic.Pointer[func(n int) (status int, wait time.Duration, hangUp bool)]
	// reply is the body of each answer; nil: none (a member action's Kit
	// answers with a message: e2e/member_actions_test.go).
	reply atomic.Pointer[[]byte]

	mu      sync.Mutex
	got     []delivered
	n       int
	holding atomic.Int32
	maxHeld atomic.Int32
}

type delivered struct {
	header http.Header
	body   []byte
	event  map[string]any
	path   string
	ok     bool      // answered 2xx in time
	at     time.Time // when it arrived
}

func newReceiver(t *testing.T) *receiver { return newReceiverTB(t) }

func newReceiverTB(t testing.TB) *receiver {
	t.Helper()
	r := &receiver{}
	r.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	r.caPath = filepath.Join(t.TempDir(), "receiver-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.caPath, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// kitTimeout is the --delivery-timeout (kitTimeoutArgs) of the servers
// whose tests have a Kit answer too late: the contract's 3 s shortened, so
// that such a test waits 1.5 s and not 3.5, yet long enough that a Kit's
// prompt answer is never late on a loaded machine.
const kitTimeout = 1500 * time.Millisecond

var kitTimeoutArgs = []string{"--delivery-timeout", kitTimeout.String()}

// tooLate is a Kit's wait (receiver.answerWith, toolKit.answerWith) past
// kitTimeout: slowly ends it as soon as kitd hangs up.
const tooLate = kitTimeout + 20*time.Second

// slowly waits d, a fake Kit's own slowness, or until the client gave the
// request up: a late answer waits for kitd's deadline, not a fixed time.
func slowly(req *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
	}
}

func (r *receiver) answerWith(f func(n int) (int, time.Duration, bool)) { r.answer.Store(&f) }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	held := r.holding.Add(1)
	defer r.holding.Add(-1)
	for {
		m := r.maxHeld.Load()
		if held <= m || r.maxHeld.CompareAndSwap(m, held) {
			break
		}
	}
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.n++
	n := r.n
	status, wait, hangUp := (*r.answer.Load())(n)
	d := delivered{header: req.Header.Clone(), body: body, path: req.URL.Path, ok: status/100 == 2 && wait < kitTimeout && !hangUp, at: time.Now()}
	_ = json.Unmarshal(body, &d.event)
	r.got = append(r.got, d)
	r.mu.Unlock()
	slowly(req, wait) // the receiver's own slowness, part of what is tested
	if hangUp {
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	if b := r.reply.Load(); b != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(*b)
		return
	}
	w.WriteHeader(status)
}

// replyWith sets the body of every answer from now on; nil: none.
func (r *receiver) replyWith(body []byte) {
	if body == nil {
		r.reply.Store(nil)
		return
	}
	r.reply.Store(&body)
}

func (r *receiver) received() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// deliveryServer starts a server that may deliver to rcv (or, with
// refuse, a server that is not told about it).
func deliveryServer(t *testing.T, rcv *receiver, refuse bool, dir string, args ...string) (*Server, ServerOpts) {
	opts := ServerOpts{DataDir: dir, OpToken: "op_" + randToken(), Limits: "off", Args: append([]string{"--delivery-ca", rcv.caPath}, args...)}
	if !refuse {
		opts.Args = append(opts.Args, "--delivery-allow", strings.TrimPrefix(rcv.srv.URL, "https://"))
	}
	return startServerOpts(t, opts), opts
}

// eventsSetup installs a Kit subscribed to message.posted whose endpoint
// is rcv, with its bot in convs conversations, and its signing secret.
type eventsSetup struct {
	w      *Workspace
	kit    *Kit
	in     *Install
	convs  []string
	secret string
}

func newEventsSetup(t *testing.T, s *Server, rcv *receiver, convs int) *eventsSetup {
	return newEventsSetupSigned(t, s, rcv, convs, true)
}

func newEventsSetupTB(t testing.TB, s *Server, rcv *receiver, convs int) *eventsSetup {
	return newEventsSetupSigned(t, s, rcv, convs, true)
}

// newEventsSetupSigned is newEventsSetup; signed false leaves the Kit
// without a signing secret.
func newEventsSetupSigned(t testing.TB, s *Server, rcv *receiver, convs int, signed bool) *eventsSetup {
	t.Helper()
	e := &eventsSetup{w: newWorkspace(t, s)}
	e.kit = &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: baseScopes}
	e.kit.Manifest = manifest(e.kit.Slug, e.kit.Version, baseScopes)
	e.kit.Manifest["events"] = []string{"message.posted"}
	e.kit.Manifest["endpoints"] = map[string]any{"events": rcv.srv.URL + "/events"}
	r := e.w.uploadVersion(t, e.kit.Manifest, true)
	want(t, r, 201)
	e.kit.ID = r.Str("kitId")
	if signed {
		r = s.ops(t, "POST", "/ops/v1/kits/"+e.kit.ID+"/signing-secret", nil)
		want(t, r, 201)
		e.secret = r.Str("signingSecret")
	}
	for range convs {
		e.convs = append(e.convs, e.w.channel(t, "public", e.w.Owner.ID, e.w.Mem.ID).ID)
	}
	e.in = e.w.install(t, e.kit, e.convs...)
	return e
}

// deliveryLog is the Kit's developer log entries of source delivery,
// oldest first.
func deliveryLog(t *testing.T, s *Server, e *eventsSetup) []any {
	t.Helper()
	r := s.api(t, e.w.Dev, "GET", "/dev/kits/"+e.kit.ID+"/logs?source=delivery&limit=100", nil, nil)
	want(t, r, 200)
	entries := jarr(r.JSON, "entries")
	slices.Reverse(entries)
	return entries
}

// docs/deliveries.md "Delivery": signed with the Go verifier's algorithm, the
// installation named, every event once with sequences 1..n, and each
// conversation's events in the order of its writes, under concurrent
// posts into several conversations.
func TestDeliveriesAreSignedOrderedAndGapless(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 4)
	const perConv = 15
	var wg sync.WaitGroup
	for _, c := range e.convs {
		wg.Go(func() {
			for i := range perConv {
				e.in.post(t, c, fmt.Sprint(i))
			}
		})
	}
	wg.Wait()
	total := perConv * len(e.convs)
	eventually.True(t, "every event", func() bool { return len(rcv.received()) >= total })

	got := rcv.received()
	if len(got) != total {
		t.Fatalf("%d deliveries, want %d (no retry was needed)", len(got), total)
	}
	seqs := map[float64]bool{}
	ids := map[string]bool{}
	next := map[string]int{}
	for _, d := range got {
		if err := kitverify.Verify(d.header.Get(kitverify.Header), d.body, time.Now(), e.secret); err != nil {
			t.Fatalf("signature %q: %v", d.header.Get(kitverify.Header), err)
		}
		if h := d.header.Get("Service-Installation-Id"); h != e.in.ID {
			t.Fatalf("Service-Installation-Id %q, want %q", h, e.in.ID)
		}
		if d.header.Get("Service-Delivery-Id") == "" || d.header.Get("Service-Retry-Num") != "" {
			t.Fatalf("headers %v", d.header)
		}
		ev := d.event
		if jstr(ev, "type") != "message.posted" || jstr(ev, "installationId") != e.in.ID || jstr(ev, "occurredAt") == "" {
			t.Fatalf("event %s", d.body)
		}
		seqs[ev["sequence"].(float64)] = true
		ids[jstr(ev, "eventId")] = true
		msg := ev["data"].(map[string]any)["message"]
		conv := jstr(msg, "conversationId")
		if want := fmt.Sprint(next[conv]); jstr(msg, "text") != want {
			t.Fatalf("conversation %s: received %q, want %q next", conv, jstr(msg, "text"), want)
		}
		next[conv]++
	}
	for i := 1; i <= total; i++ {
		if !seqs[float64(i)] {
			t.Fatalf("sequence %d missing: %d sequences for %d events", i, len(seqs), total)
		}
	}
	if len(ids) != total {
		t.Fatalf("%d distinct eventIds for %d events", len(ids), total)
	}
	// A rotation: both secrets sign during the overlap.
	r := s.ops(t, "POST", "/ops/v1/kits/"+e.kit.ID+"/signing-secret", nil)
	want(t, r, 201)
	newSecret := r.Str("signingSecret")
	e.in.post(t, e.convs[0], "after the rotation")
	eventually.True(t, "the event after the rotation", func() bool { return len(rcv.received()) > total })
	last := rcv.received()[total]
	for _, secret := range []string{newSecret, e.secret} {
		if err := kitverify.Verify(last.header.Get(kitverify.Header), last.body, time.Now(), secret); err != nil {
			t.Errorf("after a rotation, %v with one of the two secrets", err)
		}
	}
	if n := strings.Count(last.header.Get(kitverify.Header), "v1="); n != 2 {
		t.Errorf("%d v1 values during the overlap, want 2", n)
	}
}

// An installation moved to a version with another events endpoint has its
// next event sent there, though the sender keeps what it looked up of the
// installation (it is told of the change).
func TestAnUpgradedInstallationsNextEventGoesToTheNewEndpoint(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 1)
	e.in.post(t, e.convs[0], "to 1.0.0")
	eventually.True(t, "the first event", func() bool { return len(rcv.received()) == 1 })

	m := manifest(e.kit.Slug, "1.0.1", baseScopes)
	m["events"] = []string{"message.posted"}
	m["endpoints"] = map[string]any{"events": rcv.srv.URL + "/events-v2"}
	want(t, e.w.uploadVersion(t, m, true), 201)
	want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+e.w.ID+"/installations", map[string]any{"kitId": e.kit.ID}), 201)
	e.in.post(t, e.convs[0], "to 1.0.1")
	eventually.True(t, "the second event", func() bool { return len(rcv.received()) == 2 })
	for i, want := range []string{"/events", "/events-v2"} {
		if got := rcv.received()[i]; got.path != want {
			t.Errorf("event %q went to %s, want %s", jstr(got.event, "data.message.text"), got.path, want)
		}
	}
}

// docs/decisions.md "Events": installation.updated is judged by the old or
// the new subscription, so a version that stops subscribing still tells
// the Kit. The new version has no events endpoint then: the event goes to
// the endpoint of the version that subscribed.
func TestInstallationUpdatedReachesAKitWhoseNewVersionStopsSubscribing(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	w := newWorkspace(t, s)
	k, _ := w.receivingKit(t, rcv, []string{"installation.updated"}, baseScopes...)
	w.install(t, k)

	// 1.0.1 subscribes to nothing and so declares no events endpoint.
	want(t, w.uploadVersion(t, manifest(k.Slug, "1.0.1", baseScopes), true), 201)
	want(t, s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": k.ID}), 201)

	if !eventually.Holds(eventually.Within, func() bool { return len(rcv.received()) >= 1 }) {
		r := s.api(t, w.Dev, "GET", "/dev/kits/"+k.ID+"/logs?source=delivery&limit=10", nil, nil)
		t.Fatalf("installation.updated never reached the Kit; delivery log: %s", r.Body)
	}
	if got := jstr(rcv.received()[0].event, "type"); got != "installation.updated" {
		t.Fatalf("received %q, want installation.updated", got)
	}
}

// Only a 2xx within the timeout (3 s; kitTimeout here) counts; a failed attempt is retried on the service
// clock (about 10 s later) with Service-Retry-Num and Service-Retry-Reason,
// and every attempt is in the developer log.
func TestDeliveryRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		first      func() (int, time.Duration, bool)
		reason     string
		httpStatus float64
	}{
		{"a 500 is retried", func() (int, time.Duration, bool) { return 500, 0, false }, "http_error", 500},
		{"a 3xx is not followed and is retried", func() (int, time.Duration, bool) { return 302, 0, false }, "http_error", 302},
		{"a closed connection is retried", func() (int, time.Duration, bool) { return 0, 0, true }, "connection_failed", 0},
		{"an answer after the timeout is retried", func() (int, time.Duration, bool) { return 200, tooLate, false }, "http_timeout", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t)
			rcv.answerWith(func(n int) (int, time.Duration, bool) {
				if n == 1 {
					return tc.first()
				}
				return 200, 0, false
			})
			s, _ := deliveryServer(t, rcv, false, "", kitTimeoutArgs...)
			e := newEventsSetup(t, s, rcv, 1)
			e.in.post(t, e.convs[0], "retried")
			eventually.True(t, "the first attempt's log entry", func() bool { return len(deliveryLog(t, s, e)) >= 1 })
			if n := len(rcv.received()); n != 1 {
				t.Fatalf("%d attempts before the retry is due", n)
			}
			advance(t, s, 9*time.Second) // under the first wait (10 s less 20%)
			advance(t, s, 4*time.Second)
			eventually.True(t, "the retry", func() bool { return len(rcv.received()) >= 2 })
			retry := rcv.received()[1]
			if retry.header.Get("Service-Retry-Num") != "1" || retry.header.Get("Service-Retry-Reason") != tc.reason {
				t.Fatalf("retry headers Service-Retry-Num %q, Service-Retry-Reason %q; want 1, %s",
					retry.header.Get("Service-Retry-Num"), retry.header.Get("Service-Retry-Reason"), tc.reason)
			}
			if err := kitverify.Verify(retry.header.Get(kitverify.Header), retry.body, time.Now(), e.secret); err != nil {
				t.Fatal(err)
			}
			if jstr(retry.event, "eventId") != jstr(rcv.received()[0].event, "eventId") {
				t.Fatal("the retry carries another eventId")
			}
			eventually.True(t, "the retry's log entry", func() bool { return len(deliveryLog(t, s, e)) >= 2 })
			log := deliveryLog(t, s, e)
			first, second := log[0], log[1]
			if jstr(first, "level") != "error" || jstr(first, "errorCode") != tc.reason || first.(map[string]any)["attempt"] != 1.0 ||
				jstr(first, "installationId") != e.in.ID || first.(map[string]any)["durationMs"] == nil {
				t.Errorf("first attempt logged as %v", first)
			}
			if hs := first.(map[string]any)["httpStatus"]; tc.httpStatus != 0 && hs != tc.httpStatus || tc.httpStatus == 0 && hs != nil {
				t.Errorf("first attempt httpStatus %v, want %v", hs, tc.httpStatus)
			}
			if jstr(second, "level") != "info" || second.(map[string]any)["attempt"] != 2.0 || second.(map[string]any)["httpStatus"] != 200.0 {
				t.Errorf("second attempt logged as %v", second)
			}
		})
	}
}

// GET /metrics after deliveries (docs/decisions.md "Metrics"): a failed
// attempt counts as retry_scheduled with its reason and leaves its event
// in the backlog; the retry that passes counts as delivered and empties
// it; each attempt's latency is observed.
func TestDeliveryMetricsMove(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	rcv.answerWith(func(n int) (int, time.Duration, bool) {
		if n == 1 {
			return 500, 0, false
		}
		return 200, 0, false
	})
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 1)
	before := scrapeMetrics(t, s)
	moved := func(family string, labels ...string) float64 {
		return metricstest.Value(scrapeMetrics(t, s), family, labels...) - metricstest.Value(before, family, labels...)
	}
	e.in.post(t, e.convs[0], "counted")
	eventually.True(t, "the failed attempt's count", func() bool {
		return moved("kitd_delivery_attempts_total", "outcome", "retry_scheduled") == 1
	})
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"kitd_delivery_attempt_failures_total", []string{"reason", "http_error"}, 1},
		{"kitd_delivery_attempt_duration_seconds", nil, 1},
		{"kitd_delivery_backlog_events", nil, 1},
		{"kitd_delivery_installation_backlog_events", nil, 1},
		{"kitd_delivery_endpoints_paused", nil, 0},
	} {
		if got := moved(c.family, c.labels...); got != c.want {
			t.Errorf("after the failure %s%v moved by %v, want %v", c.family, c.labels, got, c.want)
		}
	}
	advance(t, s, 13*time.Second) // past the first wait (10 s and at most 20%)
	eventually.True(t, "the retry's count", func() bool {
		return moved("kitd_delivery_attempts_total", "outcome", "delivered") == 1
	})
	eventually.True(t, "an empty backlog", func() bool { return moved("kitd_delivery_backlog_events") == 0 })
	if got := moved("kitd_delivery_attempt_duration_seconds"); got != 2 {
		t.Errorf("%v attempts observed, want 2", got)
	}
}

// A receiver on a loopback address is refused unless --delivery-allow
// names its host: the check is on the address dialled.
func TestDeliveryToAPrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, true, "")
	e := newEventsSetup(t, s, rcv, 1)
	e.in.post(t, e.convs[0], "to loopback")
	eventually.True(t, "the refused attempt's log entry", func() bool { return len(deliveryLog(t, s, e)) >= 1 })
	if n := len(rcv.received()); n != 0 {
		t.Fatalf("the receiver on loopback got %d requests", n)
	}
	if got := jstr(deliveryLog(t, s, e)[0], "errorCode"); got != "connection_failed" {
		t.Fatalf("errorCode %q, want connection_failed", got)
	}
}

// A Kit without a signing secret gets nothing unsigned: each attempt fails
// with no_signing_secret in the developer log.
func TestDeliveryNeedsASigningSecret(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetupSigned(t, s, rcv, 1, false)
	e.in.post(t, e.convs[0], "unsigned")
	eventually.True(t, "the failed attempt's log entry", func() bool { return len(deliveryLog(t, s, e)) >= 1 })
	if n := len(rcv.received()); n != 0 {
		t.Fatalf("the receiver got %d unsigned requests", n)
	}
	if got := jstr(deliveryLog(t, s, e)[0], "errorCode"); got != "no_signing_secret" {
		t.Fatalf("errorCode %q, want no_signing_secret", got)
	}
}

// At most 10 deliveries of an installation are in flight at once, however
// many conversations have events waiting.
func TestDeliveriesInFlightAreCapped(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 300 * time.Millisecond, false })
	s, _ := deliveryServer(t, rcv, false, "")
	e := newEventsSetup(t, s, rcv, 25)
	var wg sync.WaitGroup
	for _, c := range e.convs {
		wg.Go(func() {
			for i := range 2 {
				e.in.post(t, c, fmt.Sprint(i))
			}
		})
	}
	wg.Wait()
	eventually.True(t, "every event", func() bool { return len(rcv.received()) >= 2*len(e.convs) })
	if m := rcv.maxHeld.Load(); m > 10 || m < 2 {
		t.Fatalf("the receiver held %d requests at once, want 2 to 10", m)
	}
}

// kill -9 with events waiting for their retry and others not yet sent:
// after a restart every event is delivered, once acknowledged, and each
// conversation's in order.
func TestDeliveriesSurviveKill9(t *testing.T) {
	t.Parallel()
	deliveriesSurviveKill9(t, "")
}

// The same with --replicate: the restart applies each partition's log
// again as this node comes to host it, and the wakes of deliveries wait
// until every actor commits through the groups, so that no delivery actor
// takes the outbox before all of it is back (server/groups.go, wakes).
func TestDeliveriesSurviveKill9Replicated(t *testing.T) {
	t.Parallel()
	deliveriesSurviveKill9(t, "", "--replicate")
}

// takenRecordsCommit is the last commit whose kitd queues an event by a
// queue record of its own that refers to its outbox entry (data layout
// 2), before taken records.
const takenRecordsCommit = "fd9ea35"

// A directory an older build left with events queued, one failed (its
// queue record holds it) and others queued behind it as references: the
// current build upgrades it and delivers every event, once acknowledged,
// each conversation's in order.
func TestDeliveriesOfAnOlderBuildsQueue(t *testing.T) {
	t.Parallel()
	deliveriesSurviveKill9(t, olderBuild(t, takenRecordsCommit))
}

// textOutboxKeysCommit is the last commit whose kitd keys outbox entries
// by their ids' text (data layout 3), before keys of their bytes.
const textOutboxKeysCommit = "0be2a24"

// A build of layout 3 with --replicate, killed with events queued: the
// restart applies again the raft entries it wrote past its last durable
// applied index, outbox entries of text keys among them, after the
// upgrade rewrote the store's. Each lands under the key the current build
// uses (actors.CurrentKey): every event is delivered, and the directory
// holds no key of an older layout afterwards.
func TestDeliveriesOfAnOlderReplicatedBuildsQueue(t *testing.T) {
	t.Parallel()
	s := deliveriesSurviveKill9(t, olderBuild(t, textOutboxKeysCommit), "--replicate")
	s.stopClean(t)
	store, err := persistence.Open(s.DataDir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	err = store.Scan(nil, nil, false, func(k, _ []byte) bool {
		if actors.KeyKind(k) == "" && !multiraft.NodeLocal(k) {
			t.Errorf("after the upgrade, %q is built by no constructor", k)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deliveriesSurviveKill9 runs TestDeliveriesSurviveKill9's scenario, the
// first server from bin ("": the binary under test), both with args, and
// returns the second.
func deliveriesSurviveKill9(t *testing.T, bin string, args ...string) *Server {
	rcv := newReceiver(t)
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 503, 0, false })
	dir := t.TempDir()
	opts := ServerOpts{DataDir: dir, OpToken: "op_" + randToken(), Limits: "off", Bin: bin,
		Args: append([]string{"--delivery-ca", rcv.caPath, "--delivery-allow", strings.TrimPrefix(rcv.srv.URL, "https://")}, args...)}
	s := startServerOpts(t, opts)
	opts.Bin = ""
	e := newEventsSetup(t, s, rcv, 3)
	posted := e.postRounds(t, 5)
	eventually.True(t, "a failed attempt per conversation", func() bool { return len(rcv.received()) >= len(e.convs) })
	s.kill()

	rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
	s2 := startServerOpts(t, opts)
	advance(t, s2, time.Minute)
	wantEveryEventInOrder(t, rcv, posted, "every event after the restart")
	return s2
}

// postRounds posts rounds messages into each of e's conversations, one
// round after another, and returns their ids by conversation, in order.
func (e *eventsSetup) postRounds(t *testing.T, rounds int) map[string][]string {
	t.Helper()
	posted := map[string][]string{}
	for i := range rounds {
		for _, c := range e.convs {
			msg := e.in.post(t, c, fmt.Sprint(i))
			posted[c] = append(posted[c], jstr(msg, "id"))
		}
	}
	return posted
}

// wantEveryEventInOrder waits until rcv acknowledged an event for every
// message of posted (by conversation, in order), and checks that each
// conversation's arrived in that order. The receiver dedups by eventId
// and keeps what it acknowledged.
func wantEveryEventInOrder(t *testing.T, rcv *receiver, posted map[string][]string, what string) {
	t.Helper()
	total := 0
	for _, ids := range posted {
		total += len(ids)
	}
	kept := func() map[string][]string {
		out := map[string][]string{}
		seen := map[string]bool{}
		for _, d := range rcv.received() {
			id := jstr(d.event, "eventId")
			if !d.ok || seen[id] {
				continue
			}
			seen[id] = true
			msg := d.event["data"].(map[string]any)["message"]
			out[jstr(msg, "conversationId")] = append(out[jstr(msg, "conversationId")], jstr(msg, "id"))
		}
		return out
	}
	eventually.True(t, what, func() bool {
		n := 0
		for _, ids := range kept() {
			n += len(ids)
		}
		return n >= total
	})
	got := kept()
	for c, want := range posted {
		if !slices.Equal(got[c], want) {
			t.Errorf("conversation %s: received %q, want %q", c, got[c], want)
		}
	}
}
