package actors_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// The durability rule of docs/architecture.md: a post's reply reaches its
// requester only once the post is synced, even though the actors answer
// before the sync and go on with their next request. Posters run
// concurrently; in the middle of it the filesystem is cut as a power
// failure would cut it (only synced data kept). Every post answered before
// the cut must be in what remains.

func TestAnsweredPostsAreDurable(t *testing.T) {
	n, fs := crashableNode(t)
	n.env.Limits = nil // as many posts as the machine can make
	w := n.workspace(t, 1)
	alice := userCaller(w.id, w.users[0])
	convs := []string{n.channel(t, w.id, w.users[0]), n.channel(t, w.id, w.users[0]), n.channel(t, w.id, w.users[0])}
	acked, cut := cutUnderLoad(t, n, fs, 12, 600, func(poster int) (string, string, error) {
		conv, text := convs[poster%len(convs)], ids.New()
		_, err := try[*kitpb.MessageReply](n, actors.KindConversation, conv, &kitpb.PostMessage{Caller: alice, Text: text})
		return conv, text, err
	})
	after, err := startNode(cut, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	defer after.stop()
	for _, conv := range convs {
		wantStored(t, after, alice, conv, acked[conv])
	}
}

// The same for incoming webhooks, whose posts the webhook forwards to the
// conversation: the hooks host's answer must wait for the post's sync
// although neither actor waits for it.
func TestAnsweredWebhookPostsAreDurable(t *testing.T) {
	n, fs := crashableNode(t)
	n.env.Limits = nil
	f := n.hookFixture(t, 1)
	acked, cut := cutUnderLoad(t, n, fs, 8, 400, func(int) (string, string, error) {
		text := ids.New()
		return f.conv, text, n.hookPost(f, text)
	})
	after, err := startNode(cut, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	defer after.stop()
	wantStored(t, after, userCaller(f.ws, f.admin), f.conv, acked[f.conv])
}

// cutUnderLoad runs posters that post (returning the conversation and text
// of each post) until cutAfter posts were answered, cuts fs at that moment,
// and stops the node. It returns the texts answered before the cut, by
// conversation, and the filesystem as the cut left it.
func cutUnderLoad(t *testing.T, n *testNode, fs *vfs.MemFS, posters, cutAfter int, post func(poster int) (conv, text string, err error)) (map[string][]string, vfs.FS) {
	t.Helper()
	var (
		mu      sync.Mutex
		acked   = map[string][]string{}
		count   int
		cut     vfs.FS
		stopped bool
		wg      sync.WaitGroup
	)
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				conv, text, err := post(p)
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				if err != nil {
					mu.Unlock()
					t.Errorf("post: %v", err)
					return
				}
				acked[conv] = append(acked[conv], text)
				if count++; count == cutAfter {
					// Posts keep being applied by the other posters while
					// the filesystem is cut; their answers wait for this lock
					// and are not counted.
					cut = fs.CrashClone(vfs.CrashCloneCfg{})
					stopped = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	if cut == nil {
		t.Fatal("the posters stopped before the cut")
	}
	return acked, cut
}

// wantStored checks that every text was posted into conv, as caller sees it.
func wantStored(t *testing.T, n *testNode, caller *kitpb.Caller, conv string, texts []string) {
	t.Helper()
	stored := map[string]bool{}
	var before uint64
	for {
		page, err := n.list(caller, conv, "", before, 200)
		noErr(t, err)
		for _, m := range page.Messages {
			stored[m.Text] = true
		}
		if !page.More || len(page.Messages) == 0 {
			break
		}
		before = page.Messages[len(page.Messages)-1].Seq
	}
	for _, text := range texts {
		if !stored[text] {
			t.Fatalf("post %s was answered before the cut but is not on disk after it", text)
		}
	}
}

// A write that failed (503, for the client to retry) did nothing, and
// gives back the rate token it took: retries after a leader change would
// otherwise meet 429 on top. One row per bucket.
func TestAFailedWriteGivesItsTokenBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bucket limits.Name
		// setup answers the request, whose write is the bucket's.
		setup func(t *testing.T, n *testNode) func() error
	}{
		{"a post gives its post_message token back", limits.PostMessage, func(t *testing.T, n *testNode) func() error {
			w := n.workspace(t, 1)
			c := n.channel(t, w.id, w.users...)
			alice := userCaller(w.id, w.users[0])
			return func() error { _, err := n.send(alice, c, postReq{}); return err }
		}},
		{"a webhook's post gives the webhook's token back, through its conversation", limits.Webhook, func(t *testing.T, n *testNode) func() error {
			f := n.hookFixture(t, 1)
			return func() error { return n.hookPost(f, "hi") }
		}},
		{"a tool's run gives the member's interactions token back", limits.Interactions, func(t *testing.T, n *testNode) func() error {
			e := n.toolEnv(t)
			return func() error {
				_, err := try[*kitpb.ToolCallReply](n, actors.KindInstallation, e.inst.Id, e.invoke(e.alice, e.conv, "lookup"))
				return err
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ownNode(t)
			slowRefills(n)
			h := holdCommits(t, n)
			request := tc.setup(t, n)
			for range n.env.Limits[tc.bucket].Capacity - 1 {
				noErr(t, request())
			}
			held := h.holdNext()
			failed := make(chan error, 1)
			go func() { failed <- request() }()
			waitFor(t, "the request's write", held)
			h.release <- errors.New("no quorum")
			if err := waitFor(t, "the failed request", failed); err == nil {
				t.Fatal("a request whose write failed was answered")
			}
			// A webhook's token comes back on its own time; a request
			// refused meanwhile takes none.
			eventually.NoError(t, "the retry of the failed request, before any refill", request)
		})
	}
}

// slowRefills has n's post_message, webhook and interactions buckets
// refill their tokens in an hour rather than their window, so that what
// a test finds in them was given back, not refilled by a busy machine's
// slow second (the test clock flows). It must run before n's actors
// start.
func slowRefills(n *testNode) {
	for _, name := range []limits.Name{limits.PostMessage, limits.Webhook, limits.Interactions} {
		r := n.env.Limits[name]
		r.Window = time.Hour
		n.env.Limits[name] = r
	}
}
