package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/e2e/jepsen"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
)

// The Jepsen-style runs (docs/cluster.md "Tests that prove it") on a cluster of three: 16 writers
// through every node, a fault while they write, then every conversation
// read back through every node and checked (jepsen.Check).

// clusterJepsen puts a proxy in front of each node of cluster c, so that
// a node restarted on another port keeps its address.
func clusterJepsen(t *testing.T, c *testCluster) []*jepsenNode {
	t.Helper()
	var nodes []*jepsenNode
	for _, s := range c.nodes {
		front, err := jepsen.NewProxy(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { front.Close() })
		nodes = append(nodes, &jepsenNode{t: t, srv: s, front: front})
	}
	return nodes
}

// restart starts node i again on its data directory (rejoin), behind its
// proxy.
func (c *testCluster) restart(t *testing.T, i int, n *jepsenNode) {
	t.Helper()
	s := c.rejoin(t, i)
	n.srv = s
	n.front.SetUpstream(s.Addr)
}

// busiest is the index of the node that leads the most partitions.
func (c *testCluster) busiest(t *testing.T) int {
	t.Helper()
	v, err := c.view(t, c.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	best, most := 0, -1
	for _, m := range v.Members {
		for i, name := range c.names {
			if m.Name == name && len(m.Led) > most {
				best, most = i, len(m.Led)
			}
		}
	}
	return best
}

// runClusterFault is runFault over a cluster of three.
func runClusterFault(t *testing.T, attemptTimeout time.Duration, fault func(c *testCluster, env *jepsenEnv)) jepsen.Outage {
	t.Helper()
	_, rep := runClusterFaultHistory(t, startCluster(t, 3), attemptTimeout, fault)
	return rep.Longest()
}

// runClusterFaultHistory is runFaultHistory over cluster c.
func runClusterFaultHistory(t *testing.T, c *testCluster, attemptTimeout time.Duration, fault func(c *testCluster, env *jepsenEnv)) ([]jepsen.Op, *jepsen.Report) {
	t.Helper()
	env := newJepsenEnv(t, clusterJepsen(t, c)...)
	return runFaultHistory(t, env, 100*time.Second, attemptTimeout, func() { fault(c, env) })
}

// kill -9 of the node leading the most partitions, in the middle of the
// writes; the other two take its partitions over (docs/cluster.md "Goals": writes
// to an affected conversation fail for under 3 s); it comes back on its
// directory and rejoins.
func TestClusterJepsenKill9(t *testing.T) {
	var killed time.Time
	o := runClusterFault(t, 0, func(c *testCluster, env *jepsenEnv) {
		i := c.busiest(t)
		killed = time.Now()
		env.nodes[i].kill9()
		c.waitSettledAfterLoss(t, c.names[i])
		t.Logf("the other two lead every partition %v after the kill", time.Since(killed).Round(time.Millisecond))
		c.restart(t, i, env.nodes[i])
	})
	wantRecovered(t, "kill -9 of the busiest leader", o)
	t.Logf("the failover goal for this window is 3 s (docs/cluster.md)")
}

// A rolling restart, as an operator upgrades a cluster: each node in turn
// stops by SIGTERM (it drains, handing its leaderships over) and starts
// again on its directory, while the writers post through every node.
// Nothing acknowledged is lost or duplicated (jepsen.Check), no write
// fails for longer than the 3 s failover goal (docs/cluster.md "Goals"):
// a draining node is a planned departure, never slower than a crash;
// and afterwards every partition is served through every node.
func TestClusterJepsenRollingRestart(t *testing.T) {
	c := startCluster(t, 3)
	env := newJepsenEnv(t, clusterJepsen(t, c)...)
	ops, rep := runFaultHistory(t, env, 100*time.Second, 0, func() {
		for i := range c.nodes {
			t0 := time.Now()
			if !env.nodes[i].srv.stopClean(t) {
				t.Fatalf("%s did not stop cleanly", c.names[i])
			}
			stopped := time.Since(t0)
			c.restart(t, i, env.nodes[i])
			c.waitSettled(t, len(c.nodes))
			t.Logf("%s stopped in %v, back and settled %v later", c.names[i], stopped.Round(time.Millisecond), (time.Since(t0) - stopped).Round(time.Millisecond))
		}
	})
	o := rep.Longest()
	t.Logf("%d attempts, answers %v; longest window of failing writes %v (conversation %s, %d failed attempts)",
		len(ops), rep.Answers, o.Duration().Round(time.Millisecond), o.Conv, o.Failures)
	if o.Failures > 0 && (!o.Recovered || o.Duration() > failoverGoal) {
		t.Errorf("writes to %s failed for %v (recovered %v) in a rolling restart; the goal is %v", o.Conv, o.Duration(), o.Recovered, failoverGoal)
	}
	everyPartitionServedByEveryNode(t, c, env.in, 20*time.Second)
}

// failoverGoal is docs/cluster.md's bound on how long writes to a
// conversation fail when a node leaves ("Goals").
const failoverGoal = 3 * time.Second

// waitSettledAfterLoss waits until the live nodes, all but lost, lead
// every partition.
func (c *testCluster) waitSettledAfterLoss(t *testing.T, lost string) {
	t.Helper()
	var ask *Server
	for _, s := range c.live() {
		if c.names[c.index(s)] != lost {
			ask = s
			break
		}
	}
	eventually.NoError(t, "the live nodes take every partition over", func() error {
		v, err := c.view(t, ask)
		if err != nil {
			return err
		}
		led := map[int]bool{}
		for _, m := range v.Members {
			if m.State == "alive" && m.Name != lost {
				for _, p := range m.Led {
					led[p] = true
				}
			}
		}
		if len(led) != 64 {
			return fmt.Errorf("%s sees %d partitions led by the others; members %+v", v.Node, len(led), v.Members)
		}
		return nil
	})
}

// SIGSTOP of the busiest leader for 3 s, well past its leases (under a
// second) and an election: the others take its partitions over; when it
// resumes, it answers nothing from its stale memory (its activations
// check their lease on every request) and follows the new leaders.
func TestClusterJepsenPausePastTheLease(t *testing.T) {
	o := runClusterFault(t, time.Second, func(c *testCluster, env *jepsenEnv) {
		i := c.busiest(t)
		env.nodes[i].pause()
		c.waitSettledAfterLoss(t, c.names[i])
		time.Sleep(time.Second) // the rest of the pause: its length, not a wait for anything
		env.nodes[i].resume()
	})
	wantRecovered(t, "SIGSTOP of the busiest leader for 3 s", o)
}

// A fourth node joins while the writers write (it gets a replica of every
// partition and a share of the leaderships), then one of the first three
// leaves by SIGTERM (it hands its leaderships over first); the checker
// reads everything back through the nodes that remain, the new one
// included.
func TestClusterJepsenJoinAndLeave(t *testing.T) {
	runClusterFault(t, 0, func(c *testCluster, env *jepsenEnv) {
		s := c.add(t)
		front, err := jepsen.NewProxy(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { front.Close() })
		c.waitSettled(t, 4)
		t.Logf("a fourth node joined and took a share of the leaderships")
		// The clients' nodes in the cluster's order, the new one last, so
		// that the busiest, whichever it is (the new one too), leaves both.
		nodes := append(append([]*jepsenNode(nil), env.nodes...), &jepsenNode{t: t, srv: s, front: front})
		leaving := c.busiest(t)
		if !c.nodes[leaving].stopClean(t) {
			return
		}
		env.nodes = append(nodes[:leaving:leaving], nodes[leaving+1:]...)
		c.waitSettledAfterLoss(t, c.names[leaving])
	})
}

// index is the position of node s.
func (c *testCluster) index(s *Server) int {
	for i, n := range c.nodes {
		if n == s {
			return i
		}
	}
	return -1
}

// The node leading the most partitions is cut off from the other two
// for 5 s (its leases last under a second, an election 1-2 s), both ways
// and for every kind of node-to-node traffic (raft, forwarded requests,
// remote proposals, catch-up reads), then healed. Gossip and the clients
// still reach it: raft, not gossip, decides who leads, and requests sent
// to the cut node meet its refusals. The other two take its partitions
// over; the cut node stops leading (its lease lapses, CheckQuorum) and
// answers nothing from its stale memory: no attempt sent to it while it
// had no lease is answered 2xx, and reads through it get 503 unavailable
// with Retry-After. Healed, it follows the new leaders, takes a share of
// the leaderships back, and serves every conversation in the one order.
func TestClusterJepsenNetworkPartition(t *testing.T) {
	const cutFor = 5 * time.Second
	c := startPartitionableCluster(t, 3)
	var cut int
	var cutURL string
	var noLease, healed time.Time // while the cut node led nothing
	var probes func() []readProbe
	ops, rep := runClusterFaultHistory(t, c, time.Second, func(c *testCluster, env *jepsenEnv) {
		cut = c.busiest(t)
		cutURL = env.nodes[cut].url()
		stop := make(chan struct{})
		var once sync.Once
		halt := func() { once.Do(func() { close(stop) }) }
		t.Cleanup(halt) // a failed wait ends the readers too
		probes = probeReads(c.nodes[cut], env, stop)
		start := time.Now()
		c.cutOff(cut)
		c.waitSettledAfterLoss(t, c.names[cut])
		t.Logf("the other two lead every partition %v after the cut", time.Since(start).Round(time.Millisecond))
		eventually.True(t, "the cut node to lead nothing", func() bool { return c.leadsNothing(t, cut) })
		noLease = time.Now()
		t.Logf("the cut node leads nothing %v after the cut", noLease.Sub(start).Round(time.Millisecond))
		traffic := c.peerTraffic()
		wantUnavailableReads(t, c.nodes[cut], env)
		wantUnavailablePage(t, c.nodes[cut], env)
		time.Sleep(time.Until(start.Add(cutFor))) // the rest of the cut: its length, not a wait for anything
		c.wantCutOff(t, cut, traffic, c.peerTraffic())
		healed = time.Now()
		halt()
		c.heal()
		c.waitSettled(t, 3)
		t.Logf("healed, the cluster settled again in %v", time.Since(healed).Round(time.Millisecond))
	})
	wantRecovered(t, "a node cut off for 5 s", rep.Longest())

	// What clients that asked the cut node saw while it led nothing.
	answers, sent := map[string]int{}, 0
	for _, op := range ops {
		if op.Node != cutURL || op.Start.Before(noLease) || op.End.After(healed) {
			continue
		}
		sent++
		answers[answerOf(op)]++
		if op.Outcome == jepsen.OK {
			t.Errorf("the cut node, leading nothing, acknowledged a write: %s", op)
		}
	}
	t.Logf("%d attempts sent to the cut node while it led nothing: %v", sent, answers)
	if sent == 0 {
		t.Errorf("no attempt was sent to the cut node while it led nothing")
	}
	wantNoStaleRead(t, ops, probes())
}

// readProbe is one read of a conversation's messages through one node.
type readProbe struct {
	conv   string
	start  time.Time
	status int
	code   string
	ids    map[string]bool // of a 200 that listed the whole conversation
}

// probeReads reads every conversation of env through s, over and over,
// until stop closes; the function it returns waits for the readers and
// returns every read.
func probeReads(s *Server, env *jepsenEnv, stop <-chan struct{}) func() []readProbe {
	var mu sync.Mutex
	var out []readProbe
	var wg sync.WaitGroup
	for _, conv := range env.convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := readProbe{conv: conv, start: time.Now()}
				r, err := s.request("GET", "/api/v1/conversations/"+conv+"/messages?limit=200", env.in.Token, nil, nil)
				if err == nil {
					p.status, p.code = r.Status, r.Str("code")
					var page struct {
						Messages []struct {
							ID string `json:"id"`
						} `json:"messages"`
						NextCursor *string `json:"nextCursor"`
					}
					if r.Status == 200 && json.Unmarshal(r.Body, &page) == nil && page.NextCursor == nil {
						p.ids = map[string]bool{}
						for _, m := range page.Messages {
							p.ids[m.ID] = true
						}
					}
				}
				mu.Lock()
				out = append(out, p)
				mu.Unlock()
			}
		}()
	}
	return func() []readProbe {
		wg.Wait()
		return out
	}
}

// wantNoStaleRead checks that every read that listed a conversation holds
// every message of it acknowledged before the read was sent: a node that
// answers from a memory the others have moved past is caught here.
func wantNoStaleRead(t *testing.T, ops []jepsen.Op, probes []readProbe) {
	t.Helper()
	answers, checked := map[string]int{}, 0
	for _, p := range probes {
		a := fmt.Sprint(p.status)
		if p.code != "" {
			a += " " + p.code
		}
		answers[a]++
		if p.ids == nil {
			continue
		}
		checked++
		for _, op := range ops {
			if op.Outcome == jepsen.OK && op.Conv == p.conv && op.End.Before(p.start) && !p.ids[op.ID] {
				t.Errorf("a stale read: conversation %s listed through the cut node at %s without message %s, acknowledged at %s",
					p.conv, p.start.Format("15:04:05.000"), op.ID, op.End.Format("15:04:05.000"))
				break
			}
		}
	}
	t.Logf("reads through the cut node from just before the cut to the heal: %v; %d listings checked against the acknowledged writes", answers, checked)
	if checked == 0 {
		t.Errorf("no read through the cut node listed a conversation: nothing was checked")
	}
}

// answerOf names an attempt's answer as the report counts them.
func answerOf(op jepsen.Op) string {
	switch {
	case op.Status == 0:
		return "no answer"
	case op.Code != "":
		return fmt.Sprintf("%d %s", op.Status, op.Code)
	}
	return fmt.Sprint(op.Status)
}

// leadsNothing reports whether node i, by its own account, leads no
// partition.
func (c *testCluster) leadsNothing(t *testing.T, i int) bool {
	v, err := c.view(t, c.nodes[i])
	if err != nil {
		return false
	}
	for _, m := range v.Members {
		if m.Name == c.names[i] {
			return len(m.Led) == 0
		}
	}
	return false
}

// wantUnavailableReads reads every conversation of the run through s at
// once: each answer must be 503 unavailable with Retry-After, never a
// page from s's memory.
func wantUnavailableReads(t *testing.T, s *Server, env *jepsenEnv) {
	t.Helper()
	resps := make([]*Resp, len(env.convs))
	errs := make([]error, len(env.convs))
	var wg sync.WaitGroup
	for i, conv := range env.convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = s.request("GET", "/api/v1/conversations/"+conv+"/messages", env.in.Token, nil, nil)
		}()
	}
	wg.Wait()
	for i, r := range resps {
		if errs[i] != nil {
			t.Fatalf("a read through the cut node: %v", errs[i])
		}
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("a read through the cut node: want Retry-After%s", r)
		}
		wantError(t, r, 503, "unavailable")
	}
}

// wantUnavailablePage signs in to env's workspace through s: the app host
// answers what the API answers, a 503 unavailable page with Retry-After,
// not a 500.
func wantUnavailablePage(t *testing.T, s *Server, env *jepsenEnv) {
	t.Helper()
	w := env.in.W
	b, _ := openSignIn(t, s, "?workspace="+w.ID)
	r := s.page(t, "POST", "/app/signin", b.cookie, url.Values{
		"email": {"nobody@example.com"}, "password": {"not-the-password"}, "workspace": {w.ID}, "next": {"/app/"}, "csrf": {b.csrf},
	})
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "<code>unavailable</code>") {
		t.Errorf("a sign-in through the cut node: want a 503 unavailable page with Retry-After%s", r)
	}
	noSession(t, r)
}

// Porcupine against a cluster of three: slug claims and Idempotency-Key
// replays with the clients spread over every node, first with no fault
// (every operation answered), then while the busiest leader is cut off
// from the other two for 3 s and healed (operations it holds, or that
// meet a partition without a leader, go unanswered; the history must
// still be linearizable).
func TestClusterJepsenLinearizable(t *testing.T) {
	c := startPartitionableCluster(t, 3)
	var urls []string
	for _, n := range clusterJepsen(t, c) {
		urls = append(urls, n.url())
	}
	cutBusiest := func(t *testing.T) linearizableFault {
		c.waitSettled(t, 3) // the last cut healed
		c.waitStable(t)
		i := c.busiest(t)
		return func() {
			start := time.Now()
			c.cutOff(i)
			time.Sleep(3 * time.Second) // the cut's length, not a wait for anything
			c.heal()
			t.Logf("%s was cut off from %s to %s", c.names[i], start.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
		}
	}
	t.Run("slug claims", func(t *testing.T) {
		linearizableSlugClaims(t, c.nodes[0], urls, nil)
	})
	t.Run("slug claims while a node is cut off", func(t *testing.T) {
		linearizableSlugClaims(t, c.nodes[0], urls, cutBusiest(t))
	})
	t.Run("Idempotency-Key replays", func(t *testing.T) {
		c.waitSettled(t, 3) // the last cut healed
		c.waitStable(t)
		linearizableReplays(t, c.nodes[0], urls, nil)
	})
	t.Run("Idempotency-Key replays while a node is cut off", func(t *testing.T) {
		linearizableReplays(t, c.nodes[0], urls, cutBusiest(t))
	})
}

// A cluster loaded from its first second: three nodes start and the
// writers begin at once (the first node still leads every partition), a
// fourth node joins 2 s in, the second leaves by SIGTERM 2 s later. Then
// every conversation must read back through every node that remains
// within readsWithin: a routing entry that outlived the departed node
// (its address kept in a table, a removed replica still naming it as
// leader) made reads through the first node 503 for as long as anyone
// tried.
func TestClusterStartJoinLeaveUnderLoad(t *testing.T) {
	const readsWithin = 20 * time.Second
	c := newTestCluster()
	for range 3 {
		c.add(t)
	}
	env := newJepsenEnv(t, clusterJepsen(t, c)...)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	run := env.workload(t).Start(ctx)
	defer func() {
		cancel()
		run.Stop()
	}()

	time.Sleep(2 * time.Second) // the scenario's timing, not a wait for anything
	s := c.add(t)
	front, err := jepsen.NewProxy(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	time.Sleep(2 * time.Second)
	if !c.nodes[1].stopClean(t) {
		return
	}
	env.nodes = append([]*jepsenNode{env.nodes[0], env.nodes[2]}, &jepsenNode{t: t, srv: s, front: front})
	ackedAtLeast(t, run, run.Acked()+150)
	ops := run.Stop()

	rctx, rcancel := context.WithTimeout(context.Background(), readsWithin)
	defer rcancel()
	rep := env.check(t, rctx, ops)
	t.Logf("%d acknowledged posts read back through %d nodes", rep.Acked, len(env.nodes))
	everyPartitionServedByEveryNode(t, c, env.in, readsWithin)
}

// everyPartitionServedByEveryNode makes a channel in each partition (the
// bot of in a member), then reads each through every live node of c: a
// stale route shows on the partitions it concerns, which a run's eight
// conversations may miss. An answer but 200 fails the test, a 503 once
// it kept up for within. Conversation ids fall in random partitions, so
// filling all 64 takes about 300 creations: several creators and readers
// at once make that seconds, not minutes, on a loaded machine.
func everyPartitionServedByEveryNode(t *testing.T, c *testCluster, in *Install, within time.Duration) {
	t.Helper()
	const workers = 8
	via := c.live()[0]
	var mu sync.Mutex
	chans := map[partition.ID]string{} // claimed by the creator that found it
	full := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(chans) == partition.Count
	}
	claim := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := chans[partition.Of(id)]; ok {
			return false
		}
		chans[partition.Of(id)] = id
		return true
	}
	create := func() error {
		for !full() {
			r, err := untilAvailable(within, func() (*Resp, error) {
				return via.request("POST", "/ops/v1/workspaces/"+in.W.ID+"/conversations", c.op,
					map[string]any{"kind": "channel", "visibility": "public", "name": "p-" + randHex(4), "memberIds": []string{}}, nil)
			})
			if err == nil && r.Status != 201 {
				err = fmt.Errorf("a channel: %s", r)
			}
			if err != nil {
				return err
			}
			id := r.Str("conversation.id")
			if !claim(id) {
				continue
			}
			r, err = untilAvailable(within, func() (*Resp, error) {
				return via.request("POST", "/ops/v1/installations/"+in.ID+"/channels", c.op, map[string]any{"conversationId": id}, nil)
			})
			if err == nil && r.Status != 200 {
				err = fmt.Errorf("the bot into %s: %s", id, r)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := inParallel(workers, create); err != nil {
		t.Fatal(err)
	}
	type read struct {
		s  *Server
		p  partition.ID
		id string
	}
	reads := make(chan read, partition.Count*len(c.live()))
	for _, s := range c.live() {
		for p, id := range chans {
			reads <- read{s, p, id}
		}
	}
	close(reads)
	err := inParallel(workers, func() error {
		for rd := range reads {
			r, err := untilAvailable(within, func() (*Resp, error) {
				return rd.s.request("GET", "/api/v1/conversations/"+rd.id+"/messages?limit=1", in.Token, nil, nil)
			})
			if err == nil && r.Status != 200 {
				err = fmt.Errorf("partition %d read through %s:%s", rd.p, rd.s.Addr, r)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// inParallel runs do in n goroutines and returns the first error.
func inParallel(n int, do func() error) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- do() }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// retryUnavailable calls do until it answers something but 503, or within
// passed; it returns the last answer.
func retryUnavailable(t *testing.T, within time.Duration, do func() (*Resp, error)) *Resp {
	t.Helper()
	r, err := untilAvailable(within, do)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// untilAvailable is retryUnavailable for any goroutine: it returns the
// error of a request that had no answer within.
func untilAvailable(within time.Duration, do func() (*Resp, error)) (*Resp, error) {
	var r *Resp
	var reqErr error
	_ = eventually.Poll(within, func() error {
		r, reqErr = do()
		if reqErr == nil && r.Status != 503 {
			return nil
		}
		return errors.New("unavailable")
	})
	if reqErr != nil {
		return nil, fmt.Errorf("no answer for %v: %w", within, reqErr)
	}
	return r, nil
}
