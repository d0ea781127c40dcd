package actors_test

import (
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/proto/kitpb"
)

// benchNode starts a node on an in-memory filesystem with rate limits off,
// stopped when the benchmark ends.
func benchNode(b *testing.B) *testNode {
	n, err := startNode(vfs.NewMem(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.stop() })
	n.env.Limits = nil
	return n
}

// roundRobin runs op in parallel over targets 0..n-1 in turn, counting
// allocations, and fails the benchmark on the first error.
func roundRobin(b *testing.B, n int, op func(i int) error) {
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(int(next.Add(1) % uint64(n))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPost measures the actor and storage part of POST /messages: a
// bot's post into one of 1,000 conversations through cluster.Request, on an
// in-memory filesystem (no fsync cost, so the CPU of the path shows):
//
//	go test ./actors/ -run '^$' -bench Post -benchmem -count 6
func BenchmarkPost(b *testing.B) {
	n := benchNode(b)
	w := n.workspace(b, 1)
	convs := make([]string, 1000)
	for i := range convs {
		convs[i] = n.channel(b, w.id, w.users[0])
	}
	bot := n.bot(b, w.id, chatScopes, convs...)
	roundRobin(b, len(convs), func(i int) error {
		_, err := try[*kitpb.MessageReply](n, actors.KindConversation, convs[i], &kitpb.PostMessage{
			Caller: bot.caller, Text: "a benchmark message of ordinary length",
		})
		return err
	})
}

// BenchmarkWebhookPost measures the actor and storage part of an incoming
// webhook post: the webhook actor's checks, its forward to the channel, the
// message and its delivery log entry, round-robin over 1,000 webhooks in
// 1,000 channels, on an in-memory filesystem:
//
//	go test ./actors/ -run '^$' -bench WebhookPost -benchmem -count 6
func BenchmarkWebhookPost(b *testing.B) {
	n := benchNode(b)
	type hook struct {
		inst, id, secret string
	}
	var hooks []hook
	for range 50 { // 20 webhooks per installation at most
		f := n.hookFixture(b, 20)
		hooks = append(hooks, hook{f.inst.Id, f.hookID, f.secret})
		for range 19 {
			id, secret := n.createHookIn(b, f, n.channel(b, f.ws, f.admin))
			hooks = append(hooks, hook{f.inst.Id, id, secret})
		}
	}
	roundRobin(b, len(hooks), func(i int) error {
		h := hooks[i]
		_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, h.id, &kitpb.HookPost{
			InstallationId: h.inst, SecretHash: actors.HookSecretHash(h.secret), Text: "a benchmark message of ordinary length",
		})
		return err
	})
}
