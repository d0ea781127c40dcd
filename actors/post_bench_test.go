package actors_test

import (
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/proto/kitpb"
)

// BenchmarkPost measures the actor and storage part of POST /messages: a
// bot's post into one of 1,000 conversations through cluster.Request, on an
// in-memory filesystem (no fsync cost, so the CPU of the path shows):
//
//	go test ./actors/ -run '^$' -bench Post -benchmem -count 6
func BenchmarkPost(b *testing.B) {
	n, err := startNode(vfs.NewMem(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer n.stop()
	n.env.Limits = nil
	w := n.workspace(b, 1)
	convs := make([]string, 1000)
	for i := range convs {
		convs[i] = n.channel(b, w.id, w.users[0])
	}
	bot := n.bot(b, w.id, chatScopes, convs...)
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			conv := convs[next.Add(1)%uint64(len(convs))]
			_, err := try[*kitpb.MessageReply](n, actors.KindConversation, conv, &kitpb.PostMessage{
				Caller: bot.caller, Text: "a benchmark message of ordinary length",
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
