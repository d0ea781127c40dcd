package deliveries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/kitverify"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestCallRules(t *testing.T) {
	const secret = "kss_test-secret"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := kitverify.Verify(r.Header.Get(kitverify.Header), body, time.Now(), secret); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Service-Installation-Id") != "inst-1" {
			http.Error(w, "no installation id", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"text":"done"}`))
		case "/fail":
			http.Error(w, "no", http.StatusInternalServerError)
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/huge":
			w.Write([]byte(strings.Repeat("x", MaxAnswer+1)))
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	s := New(Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}})
	refusing := New(Config{Clock: clock.System(), RootCAs: roots})
	untrusting := New(Config{Clock: clock.System(), Allow: []string{"127.0.0.1"}})
	impatient := New(Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}, Timeout: 100 * time.Millisecond})
	soon, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	silent := silentListener(t) // accepts, never answers the handshake

	for _, tc := range []struct {
		name     string
		s        *Sender
		ctx      context.Context
		url      string
		secrets  []string
		wantBody string
		reason   string
		status   int
	}{
		{"a signed 2xx answer is the Kit's answer", s, nil, srv.URL + "/ok", []string{secret}, `{"text":"done"}`, "", 0},
		{"the request is signed with every secret of the overlap", s, nil, srv.URL + "/ok", []string{"kss_other", secret}, `{"text":"done"}`, "", 0},
		{"a 5xx is an http error", s, nil, srv.URL + "/fail", []string{secret}, "", ReasonHTTP, 500},
		{"a wrong signature's refusal is an http error", s, nil, srv.URL + "/ok", []string{"kss_wrong"}, "", ReasonHTTP, 401},
		{"a redirect is not followed: an http error", s, nil, srv.URL + "/redirect", []string{secret}, "", ReasonHTTP, 302},
		{"an answer larger than MaxAnswer is refused", s, nil, srv.URL + "/huge", []string{secret}, "", ReasonHTTP, 200},
		{"plain http is never called", s, nil, strings.Replace(srv.URL, "https:", "http:", 1) + "/ok", []string{secret}, "", ReasonConnection, 0},
		{"a loopback address not allowed is refused", refusing, nil, srv.URL + "/ok", []string{secret}, "", ReasonConnection, 0},
		{"a certificate the roots do not trust is a TLS error", untrusting, nil, srv.URL + "/ok", []string{secret}, "", ReasonTLS, 0},
		{"no answer by the caller's deadline is a timeout", s, soon, srv.URL + "/slow", []string{secret}, "", ReasonTimeout, 0},
		{"no answer within Config.Timeout is a timeout", impatient, nil, srv.URL + "/slow", []string{secret}, "", ReasonTimeout, 0},
		{"an answer within Config.Timeout counts", impatient, nil, srv.URL + "/ok", []string{secret}, `{"text":"done"}`, "", 0},
		{"a TLS handshake never answered is a timeout within Config.Timeout", impatient, nil, "https://" + silent + "/ok", []string{secret}, "", ReasonTimeout, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			var a Answer
			if u.Scheme != "https" {
				a, err = tc.s.call(ctx, Call{URL: tc.url, InstallationID: "inst-1"})
			} else {
				a, err = tc.s.post(u, Call{URL: tc.url, InstallationID: "inst-1", Body: []byte(`{"type":"command"}`)}, tc.secrets, tc.s.deadlineOf(ctx))
			}
			if tc.reason == "" {
				if err != nil || string(a.Body) != tc.wantBody {
					t.Fatalf("answer %q, %v; want %q", a.Body, err, tc.wantBody)
				}
				return
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Reason != tc.reason || ce.Status != tc.status {
				t.Fatalf("error %v, want reason %s status %d", err, tc.reason, tc.status)
			}
		})
	}
}

// silentListener is an endpoint that accepts TCP connections and never
// writes on them (an overloaded Kit, a broken proxy); it returns its
// address.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	})
	return ln.Addr().String()
}

// An event's answer is not read: a 2xx counts whatever its body, where a
// call's answer over MaxAnswer is refused (TestCallRules).
func TestAnEventsAnswerIsNotRead(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", MaxAnswer+1)))
	}))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	s := New(Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}})
	u, err := url.Parse(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	status, _, err := s.https.post(time.Now(), kitRequest{url: u, body: []byte(`{}`), secrets: []string{"kss_x"}, deadline: time.Now().Add(Timeout)}, false)
	if err != nil || status != 200 {
		t.Fatalf("status %d, %v; want 200 and no error", status, err)
	}
}

// A connection the Kit closed while idle fails no request: nothing of it
// was sent, and it goes on another connection, an event as a call, past
// every pooled connection the Kit closed.
func TestAConnectionClosedWhileIdleFailsNoRequest(t *testing.T) {
	const first = 3 // requests in flight together, each on a connection of its own
	var requests atomic.Int32
	together := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case first:
			close(together)
		case 1, 2:
			select {
			case <-together:
			case <-time.After(10 * time.Second):
			}
		}
	}))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	s := New(Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}})
	s.https = newKitClients(roots, []string{"127.0.0.1"}, 50*time.Millisecond)
	u, err := url.Parse(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	post := func(keep bool) error {
		status, _, err := s.https.post(time.Now(), kitRequest{url: u, body: []byte(`{}`), secrets: []string{"kss_x"}, deadline: time.Now().Add(Timeout)}, keep)
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d", status)
		}
		return err
	}
	var wg sync.WaitGroup
	for range first {
		wg.Go(func() {
			if err := post(false); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := s.https.allowed.ConnsCount(); n != first {
		t.Fatalf("%d pooled connections, want %d", n, first)
	}
	for i, keep := range []bool{false, true} {
		srv.CloseClientConnections()       // the Kit closes every idle connection
		time.Sleep(100 * time.Millisecond) // past the client's idle time, so that it looks first
		if err := post(keep); err != nil {
			t.Fatalf("request %d after a rest: %v", i+1, err)
		}
	}
	if n := requests.Load(); n != 5 {
		t.Fatalf("the Kit answered %d requests, want 5", n)
	}
}

// fasthttp dials with no timeout (0) for a request that waited for a
// connection as another closed (MaxConnWaitTimeout): the dial then takes
// the attempt's own bound rather than failing at once.
func TestADialWithoutATimeoutTakesTheAttempts(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	c := kitClient(srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, nil, time.Minute)
	addr := strings.TrimPrefix(srv.URL, "https://")
	for _, timeout := range []time.Duration{time.Second, 0} {
		conn, err := c.DialTimeout(addr, timeout)
		if err != nil {
			t.Fatalf("a dial with timeout %v: %v", timeout, err)
		}
		conn.Close()
	}
}

// SPEC.md 6: the 50 in flight per Kit count its deliveries, and a slash
// command, an interaction or a tool call is one: a call takes one of the
// Kit's slots on this node, as an event's attempt does, waiting no later
// than its own deadline. With every slot held it is not made
// (ReasonInFlightLimit, the member's 502); 14 commands of one Kit had
// reached the receiver at once.
func TestACallTakesOneOfItsKitsSlots(t *testing.T) {
	const secret = "kss_test-secret"
	var requests atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write([]byte(`{"text":"done"}`))
	}))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	s := startCallSender(t, Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}, Timeout: eventually.Within}, newInstallationSlots(MaxInFlightPerKit+1))
	now := time.Now()
	_, gen, _ := s.signing.get("kit", now)
	s.signing.put("kit", []string{secret}, gen, now)
	callWithin := func(ctx context.Context) error {
		_, _, err := s.Call(ctx, Call{KitID: "kit", InstallationID: "inst-1", URL: srv.URL + "/ok", Body: []byte(`{"type":"command"}`)})
		return err
	}
	// A call that finds no slot waits until its deadline: a short one. One
	// that gets a slot has eventually.Within: the contract's 3 s for a TLS
	// round trip is a bound a starved race build may pass.
	call := func() error { return callWithin(context.Background()) }
	soon, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()

	var held []func()
	for range MaxInFlightPerKit {
		held = append(held, s.kitSlot("kit"))
	}
	var ce *CallError
	if err := callWithin(soon); !errors.As(err, &ce) || ce.Reason != ReasonInFlightLimit {
		t.Fatalf("a call with the Kit's %d slots held: %v, want reason %s", MaxInFlightPerKit, err, ReasonInFlightLimit)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the Kit past its limit", n)
	}
	if release, ok := s.kitSlotBy("other-kit", time.Now().Add(time.Second)); !ok {
		t.Fatal("another Kit's call waited for this Kit's slots")
	} else {
		release()
	}
	held[0]()
	if err := call(); err != nil {
		t.Fatalf("a call once a slot was given back: %v", err)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests, want the one call", n)
	}
	// The call gave its slot back: the event that waits for it gets it.
	got := make(chan func(), 1)
	go func() { got <- s.kitSlot("kit") }()
	(<-got)()
	for _, release := range held[1:] {
		release()
	}
}

// A call that gave up at its deadline takes no wake-up from one that
// still waits: every waiter is woken when a slot is given back.
func TestASlotGivenBackReachesTheCallThatStillWaits(t *testing.T) {
	s := New(Config{})
	var held []func()
	for range MaxInFlightPerKit {
		held = append(held, s.kitSlot("kit"))
	}
	short := make(chan bool, 1)
	go func() { _, ok := s.kitSlotBy("kit", time.Now().Add(20*time.Millisecond)); short <- ok }()
	long := make(chan func(), 1)
	go func() {
		if release, ok := s.kitSlotBy("kit", time.Now().Add(time.Minute)); ok {
			long <- release
		}
	}()
	if <-short {
		t.Fatal("a call took a slot none gave back")
	}
	held[0]()
	(<-long)()
	for _, release := range held[1:] {
		release()
	}
}

// A slot given back wakes one waiter, not all: a Kit with a backlog has
// up to 10 events of each of its installations waiting for its slots on
// a node, and waking every one of them at each slot given back, only for
// all but one to wait again, is a CPU cost that grows with the square of
// the backlog. Each wake-up reads the share once, which counts them.
func TestASlotGivenBackWakesOneWaiter(t *testing.T) {
	const waiters = 40
	s := New(Config{})
	var reads atomic.Int64
	s.ShareKitSlots(func() int { reads.Add(1); return 1 }) // one sender: the whole MaxInFlightPerKit
	var held []func()
	for range MaxInFlightPerKit {
		held = append(held, s.kitSlot("kit"))
	}
	took := make(chan func(), waiters)
	for range waiters {
		go func() { took <- s.kitSlot("kit") }()
	}
	waiting(t, waiters)
	wakeUps := int64(0)
	for i := range waiters {
		before := reads.Load()
		held[i]()
		defer (<-took)()
		waiting(t, waiters-1-i) // the others wait again
		wakeUps += reads.Load() - before
	}
	for _, release := range held[waiters:] {
		release()
	}
	if wakeUps > 2*waiters {
		t.Fatalf("%d wake-ups for %d slots given back one at a time to %d waiters, want one each", wakeUps, waiters, waiters)
	}
}

// waiting waits until n goroutines wait for a Kit's slot.
func waiting(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(eventually.Within)
	buf := make([]byte, 1<<20)
	for {
		got := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[sync.Cond.Wait") && strings.Contains(g, "(*kitSlots).take") {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait for a slot, want %d", got, n)
		}
		runtime.Gosched()
	}
}

// installationSlots is a delivery actor that grants calls its free slots
// at once, refuses them when none is, and passes on what it grants and
// what is given back.
type installationSlots struct {
	free         atomic.Int32
	taken, given chan string
}

func newInstallationSlots(free int32) *installationSlots {
	q := &installationSlots{taken: make(chan string, 100), given: make(chan string, 100)}
	q.free.Store(free)
	return q
}

func (q *installationSlots) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *kitpb.TakeCallSlot:
		granted := q.free.Load() > 0
		if granted {
			q.free.Add(-1)
			q.taken <- m.Call
		}
		ctx.Respond(&kitpb.CallSlotReply{Granted: granted})
	case *kitpb.GiveCallSlot:
		q.free.Add(1)
		q.given <- m.Call
	}
}

// startCallSender is a sender of cfg over a node whose delivery actor
// is slots.
func startCallSender(t *testing.T, cfg Config, slots actor.Actor) *Sender {
	t.Helper()
	node, err := cluster.Start(cluster.Config{}, &cluster.Kind{Name: actors.KindDelivery, New: func(string) actor.Actor { return slots }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	cfg.Node = node
	s := New(cfg)
	t.Cleanup(s.Close)
	return s
}

// A call takes one of its installation's 10 deliveries in flight (SPEC.md
// 6, docs/deliveries.md "Member actions") from the installation's
// delivery actor, before the Kit's, and gives it back once answered; with
// none granted by its deadline it is not made.
func TestACallTakesOneOfItsInstallationsSlots(t *testing.T) {
	const secret = "kss_test-secret"
	var requests atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write([]byte(`{"text":"done"}`))
	}))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	slots := newInstallationSlots(0)
	// The slots refused are refused at once: a long Timeout is only the
	// granted call's, which a starved race build may take seconds to make.
	s := startCallSender(t, Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}, Timeout: eventually.Within}, slots)
	now := time.Now()
	_, gen, _ := s.signing.get("kit", now)
	s.signing.put("kit", []string{secret}, gen, now)
	call := func() error {
		_, _, err := s.Call(context.Background(), Call{KitID: "kit", InstallationID: "inst-1", URL: srv.URL + "/ok", Body: []byte(`{"type":"command"}`)})
		return err
	}

	var ce *CallError
	if err := call(); !errors.As(err, &ce) || ce.Reason != ReasonInFlightLimit {
		t.Fatalf("a call its installation grants no slot: %v, want reason %s", err, ReasonInFlightLimit)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the Kit without a slot of its installation", n)
	}
	if release, ok := s.kitSlotBy("kit", time.Now().Add(time.Second)); !ok {
		t.Fatal("the call refused kept one of the Kit's slots")
	} else {
		release()
	}

	slots.free.Store(1)
	if err := call(); err != nil {
		t.Fatalf("a call granted a slot: %v", err)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests, want the one call", n)
	}
	taken := <-slots.taken
	select {
	case given := <-slots.given:
		if given != taken {
			t.Fatalf("gave back the slot of call %q, want %q", given, taken)
		}
	case <-time.After(eventually.Within):
		t.Fatal("the call never gave its slot back")
	}
}
