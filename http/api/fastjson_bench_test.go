package api

import "testing"

// BenchmarkDecodeFast is the reader of almost every POST /messages body.
func BenchmarkDecodeFast(b *testing.B) {
	body := []byte(`{"conversationId":"01a20000-0000-7000-8000-000000000002","text":"deploy finished on all three regions, no errors","threadParentId":null}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var p postBody
		if !p.decodeFast(body) {
			b.Fatal("fast path refused the common body")
		}
	}
}
