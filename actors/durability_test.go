package actors_test

import (
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// TestAnsweredPostsAreDurable is the durability rule of the conversation
// actor (docs/architecture.md): a post's reply reaches its requester only
// once the post is synced, even though the actor answers before the sync
// and goes on with its next post. Posters run concurrently into a few
// conversations; in the middle of it the filesystem is cut as a power
// failure would cut it (only synced data kept). Every post answered before
// the cut must be in what remains.
func TestAnsweredPostsAreDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewCrashableMem()
	n, err := startNode(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.env.Limits = nil // as many posts as the machine can make
	w := n.workspace(t, 1)
	alice := userCaller(w.id, w.users[0])
	convs := []string{n.channel(t, w.id, w.users[0]), n.channel(t, w.id, w.users[0]), n.channel(t, w.id, w.users[0])}

	var (
		mu      sync.Mutex
		acked   = map[string][]string{} // conversation → answered message ids
		cut     vfs.FS
		nAcked  int
		stopped bool
	)
	const cutAfter = 600
	var wg sync.WaitGroup
	for p := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := convs[p%len(convs)]
			for {
				id := ids.New()
				_, err := try[*kitpb.MessageReply](n, actors.KindConversation, conv, &kitpb.PostMessage{Caller: alice, MessageId: id, Text: "durable?"})
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
				acked[conv] = append(acked[conv], id)
				nAcked++
				if nAcked == cutAfter {
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

	after, err := startNode(cut, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	defer after.stop()
	for _, conv := range convs {
		stored := map[string]bool{}
		var before uint64
		for {
			page, err := after.list(alice, conv, "", before, 200)
			noErr(t, err)
			for _, m := range page.Messages {
				stored[m.Id] = true
			}
			if !page.More || len(page.Messages) == 0 {
				break
			}
			before = page.Messages[len(page.Messages)-1].Seq
		}
		for _, id := range acked[conv] {
			if !stored[id] {
				t.Fatalf("message %s was answered before the cut but is not on disk after it", id)
			}
		}
	}
}

// The same rule for incoming webhooks, whose posts the webhook forwards to
// the conversation: the hooks host's answer must wait for the post's sync
// although neither actor waits for it.
func TestAnsweredWebhookPostsAreDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	fs := vfs.NewCrashableMem()
	n, err := startNode(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.env.Limits = nil
	f := n.hookFixture(t, 1)

	var (
		mu      sync.Mutex
		acked   []string
		cut     vfs.FS
		stopped bool
	)
	const cutAfter = 400
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				text := ids.New()
				err := n.hookPost(f, text)
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				if err != nil {
					mu.Unlock()
					t.Errorf("webhook post: %v", err)
					return
				}
				acked = append(acked, text)
				if len(acked) == cutAfter {
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
	after, err := startNode(cut, n.clk)
	if err != nil {
		t.Fatal(err)
	}
	defer after.stop()
	stored := map[string]bool{}
	var before uint64
	for {
		page, err := after.list(userCaller(f.ws, f.admin), f.conv, "", before, 200)
		noErr(t, err)
		for _, m := range page.Messages {
			stored[m.Text] = true
		}
		if !page.More || len(page.Messages) == 0 {
			break
		}
		before = page.Messages[len(page.Messages)-1].Seq
	}
	for _, text := range acked {
		if !stored[text] {
			t.Fatalf("webhook post %s was answered before the cut but is not on disk after it", text)
		}
	}
}
