package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
)

// beforeThirtyThirdCommit is a build before the changes a rolling upgrade
// across the thirty-third session meets (docs/cluster.md): a user token's
// Idempotency-Keys member-wide (conv/<id>/p/user:<member>), before they
// were the installation's (2e8d4d4); no GetLatestScopes, a token's scopes
// limited by its Kit's latest version (60668cd); cursors without their
// owner. One build for every test here, so that the suite compiles it
// once.
const beforeThirtyThirdCommit = "fb26d84"

// In a rolling upgrade a partition's leadership can move from an upgraded
// node back to one of the older build (a drain, a failure, a rebalance):
// a client that retries a user token's post with its Idempotency-Key (as
// the 503 of the leader change tells it to) must be answered the stored
// message by whichever build leads next, never have it posted twice.
func TestMixedClusterReplaysAKeyedPostOfAnUpgradedLeader(t *testing.T) {
	old := olderBuild(t, beforeThirtyThirdCommit)
	c := newTestCluster()
	c.bins = []string{old} // n1 is of the older build, n2 and n3 upgraded
	for range 3 {
		c.add(t)
	}
	c.waitSettled(t, 3)
	up := c.nodes[1]
	w := newWorkspace(t, up)
	in := w.install(t, w.kit(t, baseScopes...), w.channel(t, "public", w.members()...).ID)
	tok := userToken(t, in, w.Mem.ID)

	// Posts into conversations of partitions n2 leads, ten at most.
	v, err := c.view(t, up)
	if err != nil {
		t.Fatal(err)
	}
	ledBy := func(v clusterView, name string) map[int]bool {
		out := map[int]bool{}
		for _, m := range v.Members {
			if m.Name == name {
				for _, p := range m.Led {
					out[p] = true
				}
			}
		}
		return out
	}
	byN2 := ledBy(v, "n2")
	type post struct{ conv, key, id string }
	var posts []post
	for covered := map[int]bool{}; len(covered) < min(len(byN2), 10); {
		conv := w.channel(t, "public", w.Mem.ID).ID
		p := int(partition.Of(conv))
		if !byN2[p] || covered[p] {
			continue
		}
		covered[p] = true
		key := "mixed-" + randHex(8)
		r := up.api(t, tok, "POST", "/messages", postBody(conv, "once"), map[string]string{"Idempotency-Key": key})
		want(t, r, 201)
		posts = append(posts, post{conv, key, r.Str("message.id")})
	}

	// n2 drains; its partitions go to n1 (older) or n3.
	up.stopClean(t)
	var toOld map[int]bool
	// The drain hands n2's leads to whichever voter is first caught up,
	// which may be n3 for every one of them; the balancers then give n1
	// its share. Wait for that, so that some post's partition is led by
	// the older build.
	eventually.TrueWithin(t, 30*time.Second, "n1 and n3 lead every partition, n1 some of n2's", func() bool {
		v, err := c.view(t, c.nodes[2])
		if err != nil {
			return false
		}
		toOld = ledBy(v, "n1")
		return len(toOld)+len(ledBy(v, "n3")) == partition.Count &&
			slices.ContainsFunc(posts, func(p post) bool { return toOld[int(partition.Of(p.conv))] })
	})
	moved := 0
	for _, p := range posts {
		if toOld[int(partition.Of(p.conv))] {
			moved++
		}
		var r *Resp
		eventually.True(t, "a retry answered other than 503", func() bool {
			// A 503 (a leadership that moves on) is retried with the key,
			// as a client does.
			r = c.nodes[2].api(t, tok, "POST", "/messages", postBody(p.conv, "once"), map[string]string{"Idempotency-Key": p.key})
			return r.Status != 503
		})
		if r.Status != 200 || r.Str("message.id") != p.id {
			t.Errorf("the retry of %s's post (led by n1 now: %v) answered %d, want 200 with %s%s",
				p.conv, toOld[int(partition.Of(p.conv))], r.Status, p.id, r)
		}
	}
	if moved == 0 {
		t.Fatalf("none of n2's %d partitions went to n1: nothing was proven", len(posts))
	}
	t.Logf("%d of n2's %d partitions went to the older n1", moved, len(posts))
}

// A client that pages through GET /conversations and GET /users while a
// rolling upgrade moves its requests between builds goes on where it
// was: an upgraded node takes a cursor of an older one (no owner), and an
// older node reads an upgraded one's (`id|owner`) as a position right
// after id (docs/cluster.md "A rolling upgrade across the thirty-third
// session").
func TestMixedClusterPagesAcrossBuilds(t *testing.T) {
	old := olderBuild(t, beforeThirtyThirdCommit)
	c := newTestCluster()
	c.bins = []string{old}
	for range 2 {
		c.add(t)
	}
	c.waitSettled(t, 2)
	w := newWorkspace(t, c.nodes[1])
	var chans []string
	for range 4 {
		chans = append(chans, w.channel(t, "public", w.members()...).ID)
	}
	in := w.install(t, w.kit(t, baseScopes...), chans...)
	user := userToken(t, in, w.Mem.ID)
	for _, tc := range []struct{ rule, token, path, list string }{
		{"a bot's conversations", in.Token, "/conversations", "conversations"},
		{"a member's conversations", user, "/conversations", "conversations"},
		{"a workspace's users", user, "/users", "users"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var whole []string
			for _, m := range walk(t, c.nodes[1], tc.token, tc.path, tc.list, 0) {
				whole = append(whole, m["id"].(string))
			}
			for first := range 2 { // older, upgraded, older...; then upgraded first
				var paged []string
				cursor := ""
				for page := 0; page <= len(whole); page++ {
					q := "?limit=1"
					if cursor != "" {
						q += "&cursor=" + cursor
					}
					r := c.nodes[(first+page)%2].api(t, tc.token, "GET", tc.path+q, nil, nil)
					want(t, r, 200)
					for _, v := range jarr(r.JSON, tc.list) {
						paged = append(paged, v.(map[string]any)["id"].(string))
					}
					if cursor = r.Str("nextCursor"); cursor == "" {
						break
					}
				}
				if !slices.Equal(paged, whole) {
					t.Errorf("paged across builds (n%d first): %v, want %v", first+1, paged, whole)
				}
			}
		})
	}
}

// While a node of an older build leads a Kit's partition, a token of the
// Kit still works through an upgraded node: the older node refuses a
// message type it does not know (docs/cluster.md "What is refused"), and
// an upgraded node asking it one must not fail the request for it.
func TestMixedClusterAuthenticatesTokensOfAKitAnOlderNodeLeads(t *testing.T) {
	old := olderBuild(t, beforeThirtyThirdCommit)
	c := newTestCluster()
	c.bins = []string{old} // n1 is of the older build
	for range 2 {
		c.add(t)
	}
	c.waitSettled(t, 2)
	up := c.nodes[1]
	byOld := c.ledBy(t, up, "n1")
	w := newWorkspace(t, up)
	conv := w.channel(t, "public", w.members()...).ID
	var k *Kit
	for k == nil || !byOld[int(partition.Of(k.ID))] {
		k = w.kit(t, baseScopes...)
	}
	in := w.install(t, k, conv)
	// A draft that drops users:read takes it from the Kit's tokens.
	want(t, w.uploadVersion(t, manifest(k.Slug, "1.1.0", without(baseScopes, "users:read")), false), 201)
	for _, tc := range []struct {
		rule, method, path string
		status             int
	}{
		{"auth.test answers", "GET", "/auth/test", 200},
		{"a post is made", "POST", "/messages", 201},
		{"a scope the latest version dropped is refused", "GET", "/users", 403},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = postBody(conv, "through an upgraded node")
			}
			r := up.api(t, in.Token, tc.method, tc.path, body, nil)
			if r.Status != tc.status {
				t.Fatalf("a bot token of a Kit the older n1 leads, through the upgraded n2: %d, want %d%s", r.Status, tc.status, r)
			}
			if r.Status == 200 && tc.path == "/auth/test" {
				if got := strs(jarr(r.JSON, "scopes")); !sameSet(got, without(baseScopes, "users:read")) {
					t.Errorf("effective scopes %v, want users:read gone%s", got, r)
				}
			}
		})
	}
}

// While a node of an older build leads an installation's partition, a
// member's slash command through an upgraded node still reaches the Kit:
// the older leader refuses the ask for one of the installation's slots
// (TakeCallSlot, a message type it does not know), and the call goes
// without one, as on that build, rather than fail.
func TestMixedClusterCallsAKitWhoseInstallationAnOlderNodeLeads(t *testing.T) {
	old := olderBuild(t, beforeThirtyThirdCommit)
	rcv := newReceiver(t)
	c := newTestCluster()
	c.bins = []string{old} // n1 is of the older build
	for range 2 {
		c.add(t, "--delivery-ca", rcv.caPath, "--delivery-allow", strings.TrimPrefix(rcv.srv.URL, "https://"))
	}
	c.waitSettled(t, 2)
	up := c.nodes[1]
	byOld := c.ledBy(t, up, "n1")
	var m *memberKit
	for m == nil || !byOld[int(partition.Of(m.in.ID))] {
		m = newMemberKit(t, up, rcv, "")
	}
	want(t, m.command(t, "/deploy", "api"), 200)
	if got := len(rcv.received()); got == 0 {
		t.Fatal("the command never reached the Kit")
	}
}
