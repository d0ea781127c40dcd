package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
)

// SPEC.md 3 "Idempotency record" on a cluster of three: a keyed post
// answered 201 (or whose answer was lost) and retried with the same key
// and body through another node, while the leader of the conversation's
// partition is killed, paused or cut off, answers the stored message (200,
// the same id) or makes it once; other content is 409; the record lives
// its 24 hours across the leader change and the old leader's restart.

// idemPost posts body with key through s.
func idemPost(s *Server, token, key string, body map[string]any) (*Resp, error) {
	return s.request("POST", "/api/v1/messages", token, body, map[string]string{"Idempotency-Key": key})
}

// lostPost sends a keyed post through s and gives up on its answer after
// d: the client timed out, the post may or may not have been made.
func lostPost(t *testing.T, s *Server, token, key string, body map[string]any, d time.Duration) {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/api/v1/messages", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Logf("the post meant to be lost was answered %d", res.StatusCode)
	}
}

// convLeader is the index of the node leading conv's partition, once one
// does: a lead the balancer is handing over is held by no node for a
// moment.
func (c *testCluster) convLeader(t *testing.T, conv string) int {
	t.Helper()
	i := -1
	eventually.TrueWithin(t, 20*time.Second, "a node leads the partition of "+conv, func() bool {
		i = slices.Index(c.names, c.leaders(t)[partition.Of(conv)])
		return i >= 0
	})
	return i
}

// wantOnce checks that the history of conv, read through s, holds exactly
// one message with text, and returns its id.
func wantOnce(t *testing.T, s *Server, in *Install, conv, text string) string {
	t.Helper()
	var found []string
	r := retryUnavailable(t, 20*time.Second, func() (*Resp, error) {
		return s.request("GET", "/api/v1/conversations/"+conv+"/messages?limit=200", in.Token, nil, nil)
	})
	want(t, r, 200)
	for _, m := range jarr(r.JSON, "messages") {
		if jstr(m, "text") == text {
			found = append(found, jstr(m, "id"))
		}
	}
	if len(found) != 1 {
		t.Fatalf("the history holds %d messages %q (%v), want exactly one", len(found), text, found)
	}
	return found[0]
}

func wantReplay(t *testing.T, r *Resp, first *Resp) {
	t.Helper()
	want(t, r, 200)
	if !reflect.DeepEqual(jobj(r.JSON, "message"), jobj(first.JSON, "message")) {
		t.Errorf("the replay differs from the stored message%s%s", first, r)
	}
	for _, h := range []string{"Content-Type", "Cache-Control"} {
		if r.Header.Get(h) != first.Header.Get(h) {
			t.Errorf("the replay's %s is %q, the 201's %q", h, r.Header.Get(h), first.Header.Get(h))
		}
	}
}

func advanceAll(t *testing.T, c *testCluster, seconds int) {
	t.Helper()
	for _, s := range c.live() {
		want(t, s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": seconds}), 200)
	}
}

func TestClusterIdempotencyAcrossAKill9(t *testing.T) {
	c := startCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	conv, tok := env.Chan.ID, env.In.Token
	l := c.convLeader(t, conv)
	a, b := c.nodes[(l+1)%3], c.nodes[(l+2)%3]
	key := "k9-" + randHex(8)
	body := postBody(conv, "kill9 once")

	first := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(a, tok, key, body) })
	want(t, first, 201)
	c.nodes[l].kill()
	c.waitSettledAfterLoss(t, c.names[l])

	r := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(b, tok, key, body) })
	wantReplay(t, r, first)
	r = retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(a, tok, key, postBody(conv, "kill9 other")) })
	wantError(t, r, 409, "idempotency_conflict")

	// 23 h 53 min later, with the old leader back on its directory.
	advanceAll(t, c, 86000)
	c.rejoin(t, l)
	c.nodes[l].ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 86000})
	c.waitSettled(t, 3)
	c.waitStable(t)
	for i, s := range c.nodes {
		r := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(s, tok, key, body) })
		if r.Status != 200 || r.Str("message.id") != first.Str("message.id") {
			t.Errorf("through n%d within 24 h: want the replay%s", i+1, r)
		}
	}
	wantOnce(t, c.nodes[l], env.In, conv, "kill9 once")

	// Past 24 h the key is forgotten.
	advanceAll(t, c, 401)
	r = retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(c.nodes[l], tok, key, body) })
	want(t, r, 201)
	if r.Str("message.id") == first.Str("message.id") {
		t.Errorf("after 24 h the key is forgotten: want a new message%s", r)
	}
}

func TestClusterIdempotencyAcrossAPause(t *testing.T) {
	c := startCluster(t, 3)
	var n *jepsenNode
	keyedPostsAcrossAFault(t, c, "paused",
		func(l int) *Server { // the leader pauses; the client gives up
			n = &jepsenNode{t: t, srv: c.nodes[l]}
			n.pause()
			return c.nodes[(l+1)%3]
		},
		func() { n.resume() })
}

func TestClusterIdempotencyAcrossAPartition(t *testing.T) {
	c := startPartitionableCluster(t, 3)
	keyedPostsAcrossAFault(t, c, "cut",
		func(l int) *Server { // clients are not cut: one asks the cut leader
			c.cutOff(l)
			return c.nodes[l]
		},
		c.heal)
}

// keyedPostsAcrossAFault posts with a key through a node that does not
// lead the conversation (answered), then puts the leader l at fault
// (fault returns the node the next keyed post goes through, whose answer
// is lost), retries both through the third node (the stored message, or
// the lost one made once), ends the fault, and asks every node again:
// the lost post's replay, and 409 for other content under its key.
func keyedPostsAcrossAFault(t *testing.T, c *testCluster, name string, fault func(l int) *Server, end func()) {
	t.Helper()
	env := newBotEnv(t, c.nodes[0])
	conv, tok := env.Chan.ID, env.In.Token
	l := c.convLeader(t, conv)
	a, b := c.nodes[(l+1)%3], c.nodes[(l+2)%3]

	key, body := name+"-"+randHex(8), postBody(conv, name+" once")
	first := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(a, tok, key, body) })
	want(t, first, 201)
	key2, body2 := name+"2-"+randHex(8), postBody(conv, name+" lost")
	lostPost(t, fault(l), tok, key2, body2, 500*time.Millisecond)

	r := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(b, tok, key, body) })
	wantReplay(t, r, first)
	r2 := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(b, tok, key2, body2) })
	if r2.Status != 200 && r2.Status != 201 {
		t.Fatalf("the retry of the lost post%s", r2)
	}
	end()
	c.waitSettled(t, 3)
	c.waitStable(t)
	for _, s := range c.nodes {
		r := retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(s, tok, key2, body2) })
		if r.Status != 200 || r.Str("message.id") != r2.Str("message.id") {
			t.Errorf("after the fault: want the replay of %s%s", r2.Str("message.id"), r)
		}
		r = retryUnavailable(t, 20*time.Second, func() (*Resp, error) { return idemPost(s, tok, key2, postBody(conv, name+" other")) })
		wantError(t, r, 409, "idempotency_conflict")
	}
	wantOnce(t, c.nodes[l], env.In, conv, name+" once")
	wantOnce(t, c.nodes[l], env.In, conv, name+" lost")
}

// Posts in flight when the leader is killed: each is retried through
// another node until answered, and makes one message, whose id every
// answer names.
func TestClusterIdempotencyInFlightAtAKill9(t *testing.T) {
	c := startCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	conv, tok := env.Chan.ID, env.In.Token
	l := c.convLeader(t, conv)
	fronts := []*Server{c.nodes[(l+1)%3], c.nodes[(l+2)%3]}
	const n = 16
	type res struct {
		id     string
		status int
	}
	first := make([]res, n)
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			r, err := idemPost(fronts[i%2], tok, fmt.Sprintf("fl-%d", i), postBody(conv, fmt.Sprintf("in flight %d", i)))
			if err == nil && r.Status/100 == 2 {
				first[i] = res{r.Str("message.id"), r.Status}
			}
		}()
	}
	for range n {
		<-started
	}
	c.nodes[l].kill()
	wg.Wait()
	c.waitSettledAfterLoss(t, c.names[l])
	for i := range n {
		r := retryUnavailable(t, 20*time.Second, func() (*Resp, error) {
			return idemPost(fronts[(i+1)%2], tok, fmt.Sprintf("fl-%d", i), postBody(conv, fmt.Sprintf("in flight %d", i)))
		})
		if r.Status/100 != 2 {
			t.Fatalf("retry %d%s", i, r)
		}
		if first[i].id != "" && (r.Status != 200 || r.Str("message.id") != first[i].id) {
			t.Errorf("post %d: first answered %d %s, the retry%s", i, first[i].status, first[i].id, r)
		}
		if id := wantOnce(t, fronts[0], env.In, conv, fmt.Sprintf("in flight %d", i)); id != r.Str("message.id") {
			t.Errorf("post %d: the history holds %s, the retry answered %s", i, id, r.Str("message.id"))
		}
	}
}

// While the leader of many idle partitions is cut off, the other two,
// a quorum, serve each within the failover goal and keep serving: the
// balancer must not hand an idle partition's lead to the node it cannot
// reach (its log matches the commit index only because nothing was
// written since), releasing the partition again every round.
func TestClusterIdempotentRetriesServedWhileTheLeaderIsCutOff(t *testing.T) {
	c := startPartitionableCluster(t, 3)
	env := newBotEnv(t, c.nodes[0])
	tok := env.In.Token
	l := c.busiest(t)
	b := c.nodes[(l+1)%3]
	leaders := c.leaders(t)
	// Conversations whose partitions b leads, which nothing writes to
	// between the cut and their first post.
	var convs []string
	for len(convs) < 10 {
		ch := env.W.channel(t, "public", env.W.members()...)
		if leaders[partition.Of(ch.ID)] == c.names[(l+1)%3] {
			convs = append(convs, ch.ID)
		}
	}
	for _, conv := range convs {
		env.In.addChannel(t, conv)
	}
	c.cutOff(l)
	defer c.heal()
	// Past the election: the cut node leads nothing.
	eventually.TrueWithin(t, 10*time.Second, "the cut node leads nothing", func() bool {
		v, err := c.view(t, b)
		if err != nil {
			return false
		}
		for _, m := range v.Members {
			if m.Name == c.names[l] {
				return len(m.Led) == 0
			}
		}
		return false
	})
	for round := range 2 {
		for i, conv := range convs {
			t0 := time.Now()
			r, err := untilAvailable(failoverGoal, func() (*Resp, error) {
				return idemPost(b, tok, fmt.Sprintf("cutidle-%d-%d", round, i), postBody(conv, "while cut"))
			})
			if d := time.Since(t0); d > time.Second {
				t.Logf("round %d, conversation %d: %v", round, i, d.Round(time.Millisecond))
			}
			if err != nil || r.Status != 201 {
				t.Errorf("round %d, conversation %d: a quorum is up, yet no 201 within %v (%v)%v", round, i, time.Since(t0).Round(time.Millisecond), err, r)
			}
		}
	}
}
