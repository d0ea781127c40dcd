package msgjson

import (
	"testing"

	"github.com/kitd/kitd/proto/kitpb"
)

// BenchmarkAppendMessage is the answer of every post and every page of
// history: mostly escaping strings.
func BenchmarkAppendMessage(b *testing.B) {
	m := &kitpb.Message{
		Id: "01a20000-0000-7000-8000-000000000009", ConversationId: "01a20000-0000-7000-8000-000000000002",
		AuthorKind: "bot", AuthorId: "01a20000-0000-7000-8000-000000000003",
		Text:      "Deploy <api> finished: 3 regions & 0 errors.\nSee \"status\" — done ✅",
		CreatedAt: 1764201600123000000,
		Reactions: []*kitpb.Reaction{{Reaction: "tada", UserIds: []string{"01a20000-0000-7000-8000-000000000004"}}},
	}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendMessage(buf[:0], m)
	}
}
