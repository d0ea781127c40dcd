package blocks
import "testing"
func BenchmarkTokenize(b *testing.B){
	msg := benchMessage(b)
	buf := make([]tok, 0, 4000)
	b.SetBytes(int64(len(msg)))
	for b.Loop() { tokenize(msg, buf[:0]) }
}
func BenchmarkValidateOnly(b *testing.B){
	msg := benchMessage(b)
	toks,_,_ := tokenize(msg, nil)
	p := policy(true)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		v := validator{raw: msg, toks: toks, p: p}
		for t := int32(1); t < toks[0].next; t = toks[t].next { v.block(t) }
	}
}
