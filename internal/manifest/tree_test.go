package manifest

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// sameTree compares two trees, offsets aside.
func sameTree(a, b *node) bool {
	if a.kind != b.kind || a.str != b.str || len(a.elems) != len(b.elems) || len(a.members) != len(b.members) {
		return false
	}
	for i := range a.elems {
		if !sameTree(a.elems[i], b.elems[i]) {
			return false
		}
	}
	for i := range a.members {
		if a.members[i].key != b.members[i].key || !sameTree(a.members[i].val, b.members[i].val) {
			return false
		}
	}
	return true
}

var treeSeeds = []string{
	`{}`, `[]`, ` {"a" : [1, -0, 0.5, 1e5, 1E+5, -1.25e-3, true, false, null, "x"]} `,
	`"\u00e9\/\"\\\b\f\n\r\t"`, `"\uD83D\uDE00"`, `"\ud800"`, `"\uDC00x"`, `"\u00zz"`, `"\x"`, "\"a\tb\"", "\"a\x01\"",
	`01`, `1.`, `.5`, `1e`, `1e+`, `-`, `--1`, `+1`, `1.5e5.5`, `0x10`, `Infinity`, `NaN`,
	`tru`, `nul`, `falsey`, `[1,]`, `[,1]`, `{,}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`,
	``, `  `, `{} {}`, `{}x`, `[`, `{"a":[`, `"abc`, `"abc\`, `"\u12`,
	`{"a":{"a":{"a":1}}, "a": 2}`, "\t[\r\n1\n]\t",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func checkTree(t *testing.T, text string) {
	if !utf8.ValidString(text) {
		return // Parse refuses invalid UTF-8 before building a tree
	}
	n, err := parseTree(text)
	if valid := json.Valid([]byte(text)); valid != (err == nil) {
		t.Fatalf("scanner ok = %v, encoding/json valid = %v for %q", err == nil, valid, text)
	}
	if err != nil {
		return
	}
	ref, err := parseTreeDecoder(text)
	if err != nil {
		t.Fatalf("reference builder failed on valid JSON %q: %v", text, err)
	}
	if !sameTree(n, ref) {
		t.Fatalf("trees differ for %q", text)
	}
}

func TestTreeMatchesEncodingJSON(t *testing.T) {
	for _, s := range treeSeeds {
		checkTree(t, s)
	}
	for _, name := range []string{"full.json", "full_reordered.json", "everything.json", "big.json", "many_problems.json"} {
		checkTree(t, readFile(t, name))
	}
}
