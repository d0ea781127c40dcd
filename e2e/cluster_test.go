package e2e

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics/metricstest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/kitverify"
)

// Three nodes grow from the first: every partition on three replicas, each
// led by one node, every node leading some, as each node's cluster view
// says (OPERATIONS.md section 7); every node is healthy, and its metrics
// say the same of the partitions it leads and holds.
func TestClusterGrowsFromOneNode(t *testing.T) {
	c := startCluster(t, 3)
	for _, s := range c.nodes {
		r := s.do(t, "GET", "/healthz", "", nil, nil)
		if r.Status != 200 {
			t.Errorf("%s /healthz: %d %s", s.Addr, r.Status, r.Body)
		}
	}
	led := 0.0
	for _, s := range c.nodes {
		m := scrapeMetrics(t, s)
		if n := metricstest.Value(m, "kitd_raft_partitions", "role", "replica"); n != partition.Count {
			t.Errorf("%s holds %v replicas by its metrics, want %d", s.Addr, n, partition.Count)
		}
		led += metricstest.Value(m, "kitd_raft_partitions", "role", "leader")
	}
	if led != partition.Count {
		t.Errorf("the nodes' metrics say they lead %v partitions in all, want %d", led, partition.Count)
	}
}

// Any node serves any request: a message posted through each node is read
// through every node, in one order, and the same resource reads the same
// through all of them.
func TestClusterServesThroughEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	for i, s := range c.nodes {
		r := s.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, fmt.Sprintf("through n%d", i+1)), nil)
		want(t, r, 201)
	}
	var first []string
	for i, s := range c.nodes {
		var texts []string
		for _, m := range walk(t, s, env.In.Token, "/conversations/"+env.Chan.ID+"/messages", "messages", 10) {
			texts = append(texts, fmt.Sprint(m["text"]))
		}
		if len(texts) != 3 {
			t.Fatalf("n%d reads %d messages %v, want the 3 posted", i+1, len(texts), texts)
		}
		if first == nil {
			first = texts
		} else if fmt.Sprint(texts) != fmt.Sprint(first) {
			t.Errorf("n%d reads %v, n1 reads %v", i+1, texts, first)
		}
		want(t, s.api(t, env.In.Token, "GET", "/conversations/"+env.Chan.ID, nil, nil), 200)
	}
}

// An operator who stops a whole cluster at once (make cluster's Ctrl-C,
// a host shut down) is shown no warning: each member hears the others
// leave, so their refused dials, reset connections and unfinished
// broadcasts are a stop going as planned, not trouble.
func TestClusterStoppedWholeWarnsOfNothing(t *testing.T) {
	c := startCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	for i, s := range c.nodes {
		want(t, s.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, fmt.Sprintf("through n%d", i+1)), nil), 201)
	}
	var wg sync.WaitGroup
	for _, s := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stopClean(t)
		}()
	}
	wg.Wait()
	for i, s := range c.nodes {
		if w := s.warningsWhileStopping(); w != "" {
			t.Errorf("n%d warned while the cluster stopped:\n%s", i+1, w)
		}
	}
}

// A member that crashes is a warning in the others' logs, once gossip
// declares it dead; its join was a line at info.
func TestClusterWarnsOfAMemberThatFails(t *testing.T) {
	c := startCluster(t, 3)
	if !c.nodes[0].logged(`"level":"INFO"`, `"msg":"member joined"`, `"member":"n3"`) {
		t.Errorf("n1 did not log n3's join:\n%s", c.nodes[0].tail(4<<10))
	}
	c.nodes[2].kill()
	eventually.True(t, "n1 warns that n3 failed", func() bool {
		return c.nodes[0].logged(`"level":"WARN"`, `"msg":"member failed"`, `"member":"n3"`)
	})
}

// A token revoked through one node is refused through every other on the
// next request, though they had it cached (docs/cluster.md "Goals").
func TestClusterRevocationReachesEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	for _, s := range c.nodes {
		want(t, s.api(t, env.In.Token, "GET", "/auth/test", nil, nil), 200) // cached on each node
	}
	want(t, c.nodes[0].ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": env.In.Token}), 200)
	for i, s := range c.nodes {
		wantError(t, s.api(t, env.In.Token, "GET", "/auth/test", nil, nil), 401, "invalid_token")
		r := s.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, fmt.Sprintf("after revoke via n%d", i+1)), nil)
		wantError(t, r, 401, "invalid_token")
	}
}

// A member deactivated through one node has their user tokens refused
// through every node on the next request (SPEC.md: a user token acts as
// its member, bounded by the member's access). The nodes told to drop the
// cached principal load it again from their replica of the workspace's
// partition, which must first catch up: a follower that has not applied
// the deactivation yet found the member active and cached the token anew.
func TestClusterDeactivationReachesEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	for round, via := range c.nodes {
		u := env.W.user(t, "member")
		tok := userToken(t, env.In, u.ID)
		for _, s := range c.nodes {
			want(t, s.api(t, tok, "GET", "/auth/test", nil, nil), 200) // cached on each node
		}
		want(t, via.ops(t, "DELETE", "/ops/v1/users/"+u.ID, nil), 200)
		got := make([]int, len(c.nodes))
		var wg sync.WaitGroup
		for i, s := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = s.api(t, tok, "GET", "/auth/test", nil, nil).Status
			}()
		}
		wg.Wait()
		for i, s := range c.nodes {
			if again := s.api(t, tok, "GET", "/auth/test", nil, nil).Status; got[i] != 401 || again != 401 {
				t.Errorf("round %d (deactivated via n%d): n%d answered %d, then %d; want 401", round, round+1, i+1, got[i], again)
			}
		}
	}
}

// An uninstall answered through one node is seen by the developer API
// of every node on the next request: installedHere false (SPEC.md 2,
// Kit). The developer API reads the installation's record where it runs,
// and a follower may not have applied yet the uninstall its leader
// answered.
func TestClusterUninstallReachesTheDeveloperAPIAtOnce(t *testing.T) {
	c := startCluster(t, 3)
	c.waitStable(t)
	for round := 0; round < 6; round++ {
		env := newBotEnv(t, c.nodes[0])
		for _, s := range c.nodes {
			if r := s.api(t, env.W.Dev, "GET", "/dev/kits/"+env.Kit.ID, nil, nil); r.Get("detail.kit.installedHere") != true {
				t.Fatalf("before the uninstall: installedHere %v%s", r.Get("detail.kit.installedHere"), r)
			}
		}
		want(t, c.nodes[round%3].ops(t, "DELETE", "/ops/v1/installations/"+env.In.ID, nil), 200)
		got := make([]*Resp, len(c.nodes))
		var wg sync.WaitGroup
		for i, s := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = s.api(t, env.W.Dev, "GET", "/dev/kits/"+env.Kit.ID, nil, nil)
			}()
		}
		wg.Wait()
		for i, r := range got {
			if r.Get("detail.kit.installedHere") != false {
				t.Errorf("round %d (uninstalled through n%d): n%d says installedHere %v", round, round%3+1, i+1, r.Get("detail.kit.installedHere"))
			}
		}
	}
}

// An installation's write bucket lives with the installation, on one
// leader: writes spread over every node still meet 429 once the
// installation spent its 50 a minute (docs/api.md "Limits").
func TestClusterRateLimitsCountAcrossNodes(t *testing.T) {
	c := startCluster(t, 3, "--limits", "spec")
	env := newBotEnv(t, c.nodes[0])
	var chans []string
	for i := 0; i < 50; i++ {
		ch := env.W.channel(t, "public", env.W.Owner.ID)
		env.In.addChannel(t, ch.ID)
		chans = append(chans, ch.ID)
	}
	// Four posts per conversation, round robin over the nodes: only the
	// installation's bucket can refuse.
	ok, limited, _, elapsed := burst(t, 200, func(i int) *Resp {
		return c.nodes[i%3].api(t, env.In.Token, "POST", "/messages", postBody(chans[i/4], fmt.Sprintf("w %d", i)), nil)
	})
	if limited == nil {
		t.Fatalf("200 writes through three nodes in %v: no 429", elapsed)
	}
	if ok < 50 || ok > allowed(50, 50.0/60, elapsed) {
		t.Errorf("%d writes succeeded through three nodes in %v, want 50 plus at most 50/60 per second", ok, elapsed)
	}
	checkRetryAfter(t, limited, 60)
}

// Only members talk to members (docs/cluster.md, the section of that name): a node started with
// another --cluster-key never joins (it stays alone, its /healthz and
// /readyz say it is joining, its /livez that it runs), and bytes that are not a member's TLS handshake sent to
// the node-to-node port are dropped without changing anything.
func TestClusterRefusesStrangers(t *testing.T) {
	c := startCluster(t, 1)
	founder := c.nodes[0]
	stranger := startServerOpts(t, ServerOpts{OpToken: c.op, Limits: "off", Args: []string{
		"--node-name", "stranger", "--cluster-bind", "127.0.0.1:0", "--cluster-key", "not-the-cluster-key",
		"--join", founder.gossipAddr(t)}})

	peerAddr := clusterLine.FindStringSubmatch(string(founder.out.all()))[2]
	for _, junk := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0, 0, 0, 12, 1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 'h', 'i'}, // a frame without TLS
		bytes.Repeat([]byte{0x16, 0x03, 0x01}, 100),           // a broken handshake
	} {
		conn, err := net.DialTimeout("tcp", peerAddr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(junk)
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		conn.Close()
		if n > 0 && !bytes.HasPrefix(buf[:n], []byte{0x15}) { // a TLS alert is all it may say
			t.Errorf("the node-to-node port answered %q to bytes of no member", buf[:n])
		}
	}

	// Give the stranger's join every chance: a few of its retries.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		v, err := c.view(t, founder)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Members) != 1 {
			t.Fatalf("the founder lists %d members, want itself alone: %+v", len(v.Members), v.Members)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// OPERATIONS.md section 8: not ready while it joins, and alive.
	for _, probe := range []struct {
		path   string
		status int
	}{{"/healthz", 503}, {"/readyz", 503}, {"/livez", 200}} {
		if r := stranger.do(t, "GET", probe.path, "", nil, nil); r.Status != probe.status {
			t.Errorf("the stranger's %s: %d, want %d while it cannot join", probe.path, r.Status, probe.status)
		}
	}
	env := newBotEnv(t, founder)
	want(t, founder.api(t, env.In.Token, "POST", "/messages", postBody(env.Chan.ID, "still serving"), nil), 201)
}

// A webhook hands its post to the conversation's actor: when another node
// leads the conversation's partition, the post goes there, and the
// conversation's answer comes back to the hooks host, through every node.
func TestClusterWebhookPostsReachConversationsLedElsewhere(t *testing.T) {
	c := startCluster(t, 3)
	w, _, in := webhookEnv(t, c.nodes[0], 20)
	c.waitStable(t) // the leads spread over the three before they are read
	leader := c.leaders(t)
	var h *Hook
	for i := 0; h == nil && i < 20; i++ {
		conv := w.channel(t, "public", w.members()...)
		hk := in.hook(t, conv.ID)
		if leader[partition.Of(hk.ID)] != leader[partition.Of(conv.ID)] {
			h = hk
		}
	}
	if h == nil {
		t.Fatal("20 webhooks, each led with its conversation: the placement is not spread")
	}
	for i, s := range c.nodes {
		r := s.do(t, "POST", h.Path, "", map[string]any{"text": fmt.Sprintf("through n%d", i+1)}, nil)
		if r.Status != 200 || r.Get("ok") != true {
			t.Fatalf("webhook post through n%d: %d %s", i+1, r.Status, r.Body)
		}
	}
	if got := len(history(t, in, h.Conv)); got != len(c.nodes) {
		t.Errorf("the conversation holds %d messages, want %d", got, len(c.nodes))
	}
}

// leaders is each partition's leader by name, as node 1's view says.
func (c *testCluster) leaders(t *testing.T) map[partition.ID]string {
	t.Helper()
	v, err := c.view(t, c.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	out := map[partition.ID]string{}
	for _, m := range v.Members {
		for _, p := range m.Led {
			out[partition.ID(p)] = m.Name
		}
	}
	return out
}

// A Kit's signing secret, sealed where its partition was led, still signs
// deliveries once that node stops and another leads the partition: every
// member seals with the key of the cluster key (docs/deliveries.md "The
// sealing key"). Each node sealing with its own <data>/secret-key, the new
// leader could not open it.
func TestClusterSignsDeliveriesAfterTheKitsLeaderStops(t *testing.T) {
	rcv := newReceiver(t)
	c := newTestCluster()
	for range 3 {
		c.add(t, "--delivery-ca", rcv.caPath, "--delivery-allow", strings.TrimPrefix(rcv.srv.URL, "https://"))
	}
	c.waitSettled(t, 3)
	e := newEventsSetup(t, c.nodes[0], rcv, 1)
	e.in.post(t, e.convs[0], "before")
	eventually.True(t, "the first delivery", func() bool { return len(rcv.received()) >= 1 })

	v, err := c.view(t, c.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	leader := -1
	for _, m := range v.Members {
		if slices.Contains(m.Led, int(partition.Of(e.kit.ID))) {
			leader = slices.Index(c.names, m.Name)
		}
	}
	if leader < 0 {
		t.Fatalf("no member leads the Kit's partition %d: %+v", partition.Of(e.kit.ID), v.Members)
	}
	c.nodes[leader].stopClean(t)
	c.waitSettledAfterLoss(t, c.names[leader])
	through := c.nodes[(leader+1)%3]
	r := retryUnavailable(t, 30*time.Second, func() (*Resp, error) {
		return through.request("POST", "/api/v1/messages", e.in.Token, postBody(e.convs[0], "after"), nil)
	})
	want(t, r, 201)
	eventually.True(t, "the delivery after the leader stopped", func() bool { return len(rcv.received()) >= 2 })
	for _, d := range rcv.received() {
		if err := kitverify.Verify(d.header.Get(kitverify.Header), d.body, time.Now(), e.secret); err != nil {
			t.Fatalf("delivery %s: signature %q: %v", d.body, d.header.Get(kitverify.Header), err)
		}
	}
}

// kill -9 of the node that holds an installation's delivery actor, with
// its events failing and others queued behind them: the node that leads
// the installation's partition next delivers every event acknowledged,
// each conversation's in order (docs/deliveries.md "What a crash does").
func TestClusterDeliveriesSurviveKill9(t *testing.T) {
	rcv := newReceiver(t)
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 503, 0, false })
	c := newTestCluster()
	for range 3 {
		c.add(t, "--delivery-ca", rcv.caPath, "--delivery-allow", strings.TrimPrefix(rcv.srv.URL, "https://"))
	}
	c.waitSettled(t, 3)
	e := newEventsSetup(t, c.nodes[0], rcv, 3)
	posted := e.postRounds(t, 5)
	eventually.True(t, "a failed attempt per conversation", func() bool { return len(rcv.received()) >= len(e.convs) })

	holder := c.index(c.nodes[0])
	for p, name := range c.leaders(t) {
		if p == partition.Of(e.in.ID) {
			holder = slices.Index(c.names, name)
		}
	}
	c.nodes[holder].kill()
	c.waitSettledAfterLoss(t, c.names[holder])
	rcv.answerWith(func(int) (int, time.Duration, bool) { return 200, 0, false })
	for _, s := range c.live() {
		advance(t, s, time.Minute) // past every retry's wait
	}
	wantEveryEventInOrder(t, rcv, posted, "every event after the kill")
}

// A bot token revoked through one node is gone from the installation's
// API access page on the next look (SPEC.md 3: revocation is immediate),
// whichever node leads the token's partition: the installation lists its
// tokens from its node's replicas of their records.
func TestClusterRevokedBotTokenLeavesTheAccessPage(t *testing.T) {
	c := startCluster(t, 3)
	c.waitStable(t)
	env := newBotEnv(t, c.nodes[0])
	cookie, _ := webSession(t, c.nodes[0], env.W.Admin.ID)
	path := "/app/installations/" + env.In.ID
	for round := 0; round < 8; round++ {
		tok := env.In.newToken(t)
		via := c.nodes[round%3]
		want(t, via.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": tok}), 200)
		page := c.nodes[(round+1)%3].page(t, "GET", path, cookie, nil)
		want(t, page, 200)
		if n := len(tokenIDs.FindAllSubmatch(page.Body, -1)); n != 1 {
			t.Errorf("round %d: the API access page lists %d bot tokens right after the revocation, want 1", round, n)
		}
	}
}

// A Kit suspended through one node is refused through every node on the
// next request, and resumed through another works through every node
// again (docs/api.md "Kit state"): each node had cached the bot token's
// principal and the Kit's state before.
func TestClusterSuspensionReachesEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	_, conv, in := webhookEnv(t, c.nodes[0], 5)
	h := in.hook(t, conv.ID)
	works := func(t *testing.T, step string) {
		t.Helper()
		for i, s := range c.nodes {
			want(t, s.api(t, in.Token, "GET", "/auth/test", nil, nil), 200)
			want(t, s.api(t, in.Token, "POST", "/messages", postBody(conv.ID, fmt.Sprintf("%s via n%d", step, i+1)), nil), 201)
			want(t, s.do(t, "POST", h.Path, "", map[string]any{"text": fmt.Sprintf("%s hook via n%d", step, i+1)}, nil), 200)
		}
	}
	works(t, "before")
	suspendKit(t, c.nodes[0], in.Kit.ID, "suspend", "suspended")
	for i, s := range c.nodes {
		wantError(t, s.api(t, in.Token, "GET", "/auth/test", nil, nil), 401, "invalid_token")
		wantError(t, s.api(t, in.Token, "POST", "/messages", postBody(conv.ID, fmt.Sprintf("suspended via n%d", i+1)), nil), 403, "forbidden")
		wantError(t, s.do(t, "POST", h.Path, "", map[string]any{"text": "suspended"}, nil), 403, "forbidden")
	}
	suspendKit(t, c.nodes[1], in.Kit.ID, "resume", "active")
	works(t, "resumed")
}
