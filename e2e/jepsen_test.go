package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kitd/kitd/e2e/jepsen"
	"github.com/kitd/kitd/internal/eventually"
)

// The Jepsen-style checks (docs/cluster.md "Tests that prove
// it"), against one node for now: the package e2e/jepsen takes a list of
// node addresses, and a cluster test gives it every node's. Each run: 16
// writers post through the nodes into 8 conversations, each post with its
// own text and Idempotency-Key, retried with the same key when its outcome
// is unknown; a fault strikes while they write; then every conversation is
// read back through every node and the history is checked
// (jepsen.Check): every 2xx message present with its id, text and
// position, one order for every reader with no gaps or duplicates, no key
// applied twice, no answer but a 2xx or a failure a client may retry.

// jepsenNode is one kitd node of a run. Clients reach it through a proxy,
// so that the node keeps its address when it restarts (on a new port), as
// a cluster node does on its fixed one, and so that a test can cut it off.
type jepsenNode struct {
	t     *testing.T
	opts  ServerOpts
	srv   *Server
	front *jepsen.Proxy
}

func startJepsenNode(t *testing.T) *jepsenNode {
	t.Helper()
	n := &jepsenNode{t: t, opts: ServerOpts{DataDir: t.TempDir(), OpToken: "op_" + randToken(), Limits: "off"}}
	n.srv = startServerOpts(t, n.opts)
	front, err := jepsen.NewProxy(n.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	n.front = front
	return n
}

// url is the node's address as the clients know it.
func (n *jepsenNode) url() string { return "http://" + n.front.Addr() }

// kill9 crashes the node: SIGKILL, nothing flushed.
func (n *jepsenNode) kill9() { n.srv.kill() }

// restart starts the node again on its data directory.
func (n *jepsenNode) restart() {
	n.t.Helper()
	n.srv = startServerOpts(n.t, n.opts)
	n.front.SetUpstream(n.srv.Addr)
}

// pause stops the process (SIGSTOP) until resume; a cleanup resumes it,
// so that the server's own cleanup can stop it.
func (n *jepsenNode) pause() {
	n.t.Helper()
	srv := n.srv
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
}

func (n *jepsenNode) resume() {
	n.t.Helper()
	if err := n.srv.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		n.t.Fatal(err)
	}
}

// jepsenClient checks every exchange of a run as the suite's own requests
// are checked: against docs/openapi, and for secrets in the servers' logs.
// The exchanges are kept and checked when the test ends: validating one
// costs more than kitd takes to answer it, and a check on the writers'
// path would slow the workload tenfold and thin out what a fault meets.
func jepsenClient(t *testing.T) jepsen.Client {
	var mu sync.Mutex
	var kept []jepsen.Exchange
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		work := make(chan jepsen.Exchange)
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for e := range work {
					checkExchange(t, e)
				}
			}()
		}
		for _, e := range kept {
			work <- e
		}
		close(work)
		wg.Wait()
	})
	return jepsen.Client{Observe: func(e jepsen.Exchange) {
		mu.Lock()
		kept = append(kept, e)
		mu.Unlock()
	}}
}

// checkExchange checks one exchange as harness_test.go's request does.
func checkExchange(t *testing.T, e jepsen.Exchange) {
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Errorf("exchange with a bad URL: %v", err)
		return
	}
	r := &Resp{Method: e.Method, Path: u.RequestURI(), ReqHeader: e.ReqHeader, ReqBody: e.ReqBody, Status: e.Status, Header: e.Header, Body: e.Body}
	var v any
	if json.Unmarshal(e.Body, &v) == nil {
		r.JSON = v
	}
	conformance.check(r)
	noteSecrets(r)
	conformance.report(t, r)
}

// jepsenEnv is the setting of a run: 8 conversations, a Kit whose bot was
// added to all of them, and the nodes the writers use.
type jepsenEnv struct {
	nodes []*jepsenNode
	in    *Install
	convs []string
}

func newJepsenEnv(t *testing.T, nodes ...*jepsenNode) *jepsenEnv {
	t.Helper()
	w := newWorkspace(t, nodes[0].srv)
	env := &jepsenEnv{nodes: nodes}
	for range 8 {
		env.convs = append(env.convs, w.channel(t, "public", w.Owner.ID).ID)
	}
	env.in = w.install(t, w.kit(t, baseScopes...), env.convs...)
	return env
}

func (env *jepsenEnv) urls() []string {
	var out []string
	for _, n := range env.nodes {
		out = append(out, n.url())
	}
	return out
}

func (env *jepsenEnv) workload(t *testing.T) *jepsen.Workload {
	return &jepsen.Workload{Nodes: env.urls(), Token: env.in.Token, Conversations: env.convs, Writers: 16, Client: jepsenClient(t)}
}

// check reads everything back through every node, checks the history and
// reports every finding; it returns the report for the test's own
// expectations.
func (env *jepsenEnv) check(t *testing.T, ctx context.Context, ops []jepsen.Op) *jepsen.Report {
	t.Helper()
	c := jepsenClient(t)
	rep := jepsen.Check(ops, jepsen.ReadAll(ctx, &c, env.urls(), env.in.Token, env.convs))
	t.Logf("%s", rep.Summary())
	for i, f := range rep.Findings {
		if i == 20 {
			t.Errorf("... %d more findings", len(rep.Findings)-20)
			break
		}
		t.Errorf("%s", f)
	}
	if rep.Acked == 0 {
		t.Errorf("no post was acknowledged")
	}
	return rep
}

// ackedAtLeast waits until the run has n acknowledged posts.
func ackedAtLeast(t *testing.T, run *jepsen.Run, n int) {
	t.Helper()
	eventually.NoError(t, fmt.Sprintf("%d acknowledged posts", n), func() error {
		if got := run.Acked(); got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}

// outageBound is the generous bound of one node's outage: a restart on a
// busy 2-core machine. The 3 s failover goal (docs/cluster.md "Goals") is for a cluster,
// where another node takes over.
const outageBound = 30 * time.Second

// runWithFault runs the workload on a fresh node; once 150 posts are
// acknowledged it strikes the node with fault (nil: none), lets 150 more
// be acknowledged, stops the writers, checks everything, and returns the
// longest window of failing writes.
func runWithFault(t *testing.T, attemptTimeout time.Duration, fault func(n *jepsenNode)) jepsen.Outage {
	t.Helper()
	n := startJepsenNode(t)
	return runFault(t, newJepsenEnv(t, n), 50*time.Second, attemptTimeout, func() {
		if fault != nil {
			fault(n)
		}
	})
}

// runFault runs the workload over env's nodes; once 150 posts are
// acknowledged it strikes with fault, lets 150 more be acknowledged,
// stops the writers and checks everything through env's nodes (which the
// fault may change), all within limit.
func runFault(t *testing.T, env *jepsenEnv, limit, attemptTimeout time.Duration, fault func()) jepsen.Outage {
	t.Helper()
	_, rep := runFaultHistory(t, env, limit, attemptTimeout, fault)
	return rep.Longest()
}

// runFaultHistory is runFault, returning every attempt and the report.
func runFaultHistory(t *testing.T, env *jepsenEnv, limit, attemptTimeout time.Duration, fault func()) ([]jepsen.Op, *jepsen.Report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	w := env.workload(t)
	w.AttemptTimeout = attemptTimeout
	run := w.Start(ctx)
	defer func() {
		// After a failed wait too: no writer outlives the test.
		cancel()
		run.Stop()
	}()
	ackedAtLeast(t, run, 150)
	fault()
	ackedAtLeast(t, run, run.Acked()+150)
	ops := run.Stop()
	return ops, env.check(t, ctx, ops)
}

// wantRecovered checks that the fault made writes fail and that they
// recovered within the bound.
func wantRecovered(t *testing.T, fault string, o jepsen.Outage) {
	t.Helper()
	t.Logf("%s: longest window of failing writes %v (conversation %s, %d failed attempts)",
		fault, o.Duration().Round(time.Millisecond), o.Conv, o.Failures)
	switch {
	case o.Failures == 0:
		t.Errorf("%s: no write failed: the fault did not strike during the writes", fault)
	case !o.Recovered || o.Duration() > outageBound:
		t.Errorf("%s: writes to %s failed for %v (recovered %v); the bound is %v", fault, o.Conv, o.Duration(), o.Recovered, outageBound)
	}
}

func TestJepsenNoFault(t *testing.T) {
	runWithFault(t, 0, nil)
}

// TestJepsenKill9 crashes the node in the middle of the writes and starts
// it again on the same directory; the writers retry through the outage.
func TestJepsenKill9(t *testing.T) {
	o := runWithFault(t, 0, func(n *jepsenNode) {
		n.kill9()
		n.restart()
	})
	wantRecovered(t, "kill -9 and restart", o)
}

// TestJepsenPause stops the node (SIGSTOP) for 2 s in the middle of the
// writes: attempts time out (after 1 s, shorter than the pause) and are
// retried with their keys, meeting the requests the node still holds,
// which it answers once it resumes.
func TestJepsenPause(t *testing.T) {
	o := runWithFault(t, time.Second, func(n *jepsenNode) {
		n.pause()
		time.Sleep(2 * time.Second) // the fault's length, not a wait for anything
		n.resume()
	})
	wantRecovered(t, "SIGSTOP for 2 s", o)
}

// linearizable checks ops against model with porcupine; an illegal
// history is drawn into an HTML file that outlives the test.
func linearizable(t *testing.T, what string, model porcupine.NondeterministicModel, ops []porcupine.Operation) {
	t.Helper()
	m := model.ToModel()
	res, info := porcupine.CheckOperationsVerbose(m, ops, 30*time.Second)
	switch res {
	case porcupine.Ok:
		t.Logf("%s: %d operations, linearizable", what, len(ops))
	case porcupine.Unknown:
		t.Errorf("%s: porcupine did not decide within 30 s (%d operations)", what, len(ops))
	default:
		dir := filepath.Join(os.TempDir(), "kitd-e2e-artifacts")
		_ = os.MkdirAll(dir, 0o755)
		path := filepath.Join(dir, fmt.Sprintf("porcupine-%s-%d.html", t.Name(), time.Now().UnixNano()))
		if err := porcupine.VisualizePath(m, info, path); err != nil {
			path = err.Error()
		}
		t.Errorf("%s: not linearizable (%d operations); drawn in %s", what, len(ops), path)
		for _, op := range ops {
			t.Logf("  %s", m.DescribeOperation(op.Input, op.Output))
		}
	}
}

// TestJepsenLinearizableSlugClaims races the first upload of a slug from
// four workspaces while two others validate a manifest naming it: exactly
// one workspace gets the slug (201, one version created), the others 409
// slug_taken, and every answer fits one order of the claims that respects
// real time.
func TestJepsenLinearizableSlugClaims(t *testing.T) {
	t.Parallel()
	n := startJepsenNode(t)
	linearizableSlugClaims(t, n.srv, []string{n.url()}, nil)
}

// TestJepsenLinearizableIdempotencyReplays races 8 posts with one key, with
// the same content (all name one message: one 201, the rest 200) or two
// contents (the loser's posts answer 409 idempotency_conflict), and reads
// the conversation back: one message per key, the one its 201 named.
func TestJepsenLinearizableIdempotencyReplays(t *testing.T) {
	t.Parallel()
	n := startJepsenNode(t)
	linearizableReplays(t, n.srv, []string{n.url()}, nil)
}

// A fault of a linearizability run: it runs beside the operations, which
// go on in rounds until it returns. It must not call t's Fatal (it runs on
// a goroutine of its own).
type linearizableFault func()

// during runs round (each call a fresh set of slugs or keys) once without
// a fault, and until fault returns with one; it returns every operation.
// Each round records on a clock of its own, which porcupine may compare
// only within a partition (a slug, a key): rounds share none.
func during(fault linearizableFault, round func() []porcupine.Operation) []porcupine.Operation {
	if fault == nil {
		return round()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fault()
	}()
	var ops []porcupine.Operation
	for {
		ops = append(ops, round()...)
		select {
		case <-done:
			return ops
		default:
		}
	}
}

// linearizableSlugClaims races claims of fresh slugs through nodes (srv
// makes the workspaces) and checks them with porcupine. Without a fault,
// every claim is answered and each slug is claimed by exactly one
// workspace; with one, a claim may go unanswered (its outcome unknown to
// porcupine), and no slug is claimed by two.
func linearizableSlugClaims(t *testing.T, srv *Server, nodes []string, fault linearizableFault) {
	t.Helper()
	var claimers, observers []jepsen.Developer
	for i := range 6 {
		w := newWorkspace(t, srv)
		d := jepsen.Developer{Workspace: w.ID, Token: w.Dev}
		if i < 4 {
			claimers = append(claimers, d)
		} else {
			observers = append(observers, d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var slugs []string
	run := &jepsen.SlugRun{
		Nodes: nodes, Claimers: claimers, Observers: observers,
		Manifest: func(slug string, _ jepsen.Developer) string {
			return manifestString(manifest(slug, "1.0.0", baseScopes))
		},
		Client: jepsenClient(t),
	}
	if fault != nil {
		run.Timeout = 2 * time.Second // a node cut off holds a request until then
	}
	ops := during(fault, func() []porcupine.Operation {
		run.Slugs = nil
		for range 8 {
			run.Slugs = append(run.Slugs, newSlug())
		}
		slugs = append(slugs, run.Slugs...)
		return run.Record(ctx)
	})
	linearizable(t, "slug claims", jepsen.SlugModel, ops)

	winners := make(map[string]map[string]bool) // slug → workspaces answered 201
	created := make(map[string]int)
	unknown := 0
	for _, op := range ops {
		in, out := op.Input.(jepsen.SlugInput), op.Output.(jepsen.SlugOutput)
		switch out.Result {
		case jepsen.Claimed:
			if winners[in.Slug] == nil {
				winners[in.Slug] = make(map[string]bool)
			}
			winners[in.Slug][in.Workspace] = true
			if out.Created {
				created[in.Slug]++
			}
		case jepsen.Unknown:
			unknown++
			if fault == nil {
				t.Errorf("slug %s: %s", in.Slug, out)
			}
		case jepsen.Unexpected:
			t.Errorf("slug %s: %s", in.Slug, out)
		}
	}
	for _, slug := range slugs {
		switch {
		case len(winners[slug]) > 1 || created[slug] > 1:
			t.Errorf("slug %s: claimed by %d workspaces, first version created %d times", slug, len(winners[slug]), created[slug])
		case fault == nil && (len(winners[slug]) != 1 || created[slug] != 1):
			t.Errorf("slug %s: claimed by %d workspaces, first version created %d times; want 1 and 1", slug, len(winners[slug]), created[slug])
		}
	}
	if fault != nil {
		t.Logf("slug claims: %d slugs, %d operations, %d without an answer", len(slugs), len(ops), unknown)
		if unknown == 0 {
			t.Errorf("the fault met no claim: every one was answered")
		}
	}
}

// linearizableReplays races posts that share an Idempotency-Key through
// nodes (srv makes the conversation), checks them with porcupine, and
// reads the conversation back through every node: one message per key,
// the one its 201 named. With a fault, a post may go unanswered: its key's
// message, if any, must still be the only one of its key.
func linearizableReplays(t *testing.T, srv *Server, nodes []string, fault linearizableFault) {
	t.Helper()
	env := newBotEnv(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := jepsenClient(t)
	run := &jepsen.ReplayRun{Nodes: nodes, Token: env.In.Token, Conversation: env.Chan.ID, Keys: 12, Concurrency: 8, Client: c}
	if fault != nil {
		run.Keys, run.Timeout = 4, 2*time.Second
	}
	keys := 0
	ops := during(fault, func() []porcupine.Operation {
		keys += run.Keys
		return run.Record(ctx)
	})
	linearizable(t, "Idempotency-Key replays", jepsen.ReplayModel, ops)

	made := make(map[string]string)  // message id → its text, from the 201s
	texts := make(map[string]string) // text → its key
	unknown := 0
	for _, op := range ops {
		in, out := op.Input.(jepsen.PostInput), op.Output.(jepsen.PostOutput)
		texts[in.Text] = in.Key
		switch out.Result {
		case jepsen.Created:
			made[out.ID] = in.Text
		case jepsen.Unknown:
			unknown++
			if fault == nil {
				t.Errorf("key %s: %s", in.Key, out)
			}
		case jepsen.Unexpected:
			t.Errorf("key %s: %s", in.Key, out)
		}
	}
	if len(made) > keys || fault == nil && len(made) != keys {
		t.Errorf("%d posts answered 201 for %d keys", len(made), keys)
	}
	for _, rd := range jepsen.ReadAll(ctx, &c, nodes, env.In.Token, []string{env.Chan.ID}) {
		if rd.Err != nil {
			t.Fatalf("reading back: %v", rd.Err)
		}
		seen := make(map[string]string) // key → its message id
		for _, m := range rd.Messages {
			key, ok := texts[m.Text]
			if !ok {
				t.Errorf("%s: message %s %q was never posted", rd.Node, m.ID, m.Text)
				continue
			}
			if other, twice := seen[key]; twice {
				t.Errorf("%s: key %s made two messages, %s and %s", rd.Node, key, other, m.ID)
			}
			seen[key] = m.ID
			if text, ok := made[m.ID]; fault == nil && (!ok || text != m.Text) {
				t.Errorf("%s: message %s %q is not one a 201 named", rd.Node, m.ID, m.Text)
			}
		}
		for id, text := range made {
			if seen[texts[text]] != id {
				t.Errorf("%s: the 201 of key %s named %s; the conversation holds %q", rd.Node, texts[text], id, seen[texts[text]])
			}
		}
	}
	if fault != nil {
		t.Logf("Idempotency-Key replays: %d keys, %d posts, %d without an answer", keys, len(ops), unknown)
		if unknown == 0 {
			t.Errorf("the fault met no post: every one was answered")
		}
	}
}

// TestJepsenCheckerSeesTampering proves the read-back is not blind: after
// a short run, the test changes a conversation behind the writers' backs
// through the real API, and the checker must say so.
func TestJepsenCheckerSeesTampering(t *testing.T) {
	n := startJepsenNode(t)
	env := newJepsenEnv(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	run := env.workload(t).Start(ctx)
	ackedAtLeast(t, run, 50)
	ops := run.Stop()
	var acked jepsen.Op
	for _, op := range ops {
		if op.Outcome == jepsen.OK {
			acked = op
			break
		}
	}
	tests := []struct {
		name   string
		tamper func(t *testing.T)
		want   jepsen.Kind
	}{
		{"a message nobody in the run posted is a phantom", func(t *testing.T) {
			env.in.post(t, acked.Conv, "posted outside the run")
		}, jepsen.PhantomMessage},
		{"an acknowledged message deleted since differs from its answer", func(t *testing.T) {
			want(t, n.srv.api(t, env.in.Token, "DELETE", "/messages/"+acked.ID, nil, nil), 200)
		}, jepsen.AnswerDiffers},
	}
	c := jepsenClient(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.tamper(t)
			rep := jepsen.Check(ops, jepsen.ReadAll(ctx, &c, env.urls(), env.in.Token, env.convs))
			if len(rep.Of(tt.want)) == 0 {
				t.Errorf("no %q finding; %s: %v", tt.want, rep.Summary(), rep.Findings)
			}
		})
	}
}
