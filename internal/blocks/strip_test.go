package blocks

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestStripping(t *testing.T) {
	sec := func(acc raw) raw {
		return obj("type", "section", "text", plainText("x"), "accessory", acc)
	}
	img := obj("type", "image", "fileId", visibleFile, "alt", "a")
	for _, c := range []struct {
		name        string
		in          string
		interactive bool
		want        string
	}{
		{
			name: "actions block is removed when interactivity is off",
			in:   blocks(header("h"), actions(button("a")), divider()),
			want: blocks(header("h"), divider()),
		},
		{
			name:        "actions block is kept when interactivity is on",
			in:          blocks(header("h"), actions(button("a")), divider()),
			interactive: true,
			want:        blocks(header("h"), actions(button("a")), divider()),
		},
		{
			name: "first and last actions blocks are removed without stray commas",
			in:   blocks(actions(button("a")), header("h"), actions(button("b"))),
			want: blocks(header("h")),
		},
		{
			name: "only actions blocks leave an empty array",
			in:   blocks(actions(button("a")), actions(selectMenu("b", 2))),
			want: `[]`,
		},
		{
			name: "section button accessory is removed",
			in:   blocks(sec(button("a"))),
			want: blocks(obj("type", "section", "text", plainText("x"))),
		},
		{
			name: "section select and overflow accessories are removed",
			in:   blocks(sec(selectMenu("a", 2)), sec(overflowMenu("b", 2))),
			want: blocks(obj("type", "section", "text", plainText("x")), obj("type", "section", "text", plainText("x"))),
		},
		{
			name: "accessory written first is removed with its comma",
			in:   blocks(obj("accessory", button("a"), "type", "section", "text", plainText("x"))),
			want: blocks(obj("type", "section", "text", plainText("x"))),
		},
		{
			name: "accessory between keys is removed",
			in:   blocks(obj("type", "section", "accessory", button("a"), "blockId", "s", "text", plainText("x"))),
			want: blocks(obj("type", "section", "blockId", "s", "text", plainText("x"))),
		},
		{
			name: "image accessory is kept",
			in:   blocks(sec(img)),
			want: blocks(sec(img)),
		},
		{
			name: "section accessory is kept when interactivity is on",
			in:   blocks(sec(button("a"))),
			want: blocks(sec(button("a"))),

			interactive: true,
		},
		{
			name: "whitespace is removed while stripping",
			in:   "[ {\"type\" : \"actions\", \"elements\": [ {\"type\":\"button\",\"actionId\":\"a\",\"text\":\"Go\"} ]} ,\n {\"type\": \"divider\"} ]",
			want: `[{"type":"divider"}]`,
		},
		{
			name: "escapes survive stripping",
			in:   `[{"type":"section","text":{"type":"plain","text":"\u00e9\n"},"accessory":{"type":"button","actionId":"a","text":"Go"}}]`,
			want: `[{"type":"section","text":{"type":"plain","text":"\u00e9\n"}}]`,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policy(c.interactive)
			out, err := Validate([]byte(c.in), p)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Fatalf("got  %s\nwant %s", out, c.want)
			}
			again, err := Validate(out, p)
			if err != nil || string(again) != string(out) {
				t.Fatalf("stripped output does not re-validate to itself: %v", err)
			}
		})
	}
}

// TestCompaction covers where whitespace can sit relative to the blocks:
// the output is copied as it is until the first block that must change.
func TestCompaction(t *testing.T) {
	d, h := string(divider()), string(header("h"))
	for _, in := range []string{
		"[" + d + "," + h + "]",
		" [" + d + "," + h + "] ",
		"[ " + d + "," + h + "]",
		"[" + d + " ," + h + "]",
		"[" + d + ", " + h + "]",
		"[" + d + "," + h + " ]",
		"[" + d + "," + `{"type": "header","text":"h"}` + "," + d + "]",
		"[\n]",
		" [] ",
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatal(err)
		}
		out, err := Validate([]byte(in), policy(true))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !bytes.Equal(out, want.Bytes()) {
			t.Errorf("%q: got %s, want %s", in, out, want.Bytes())
		}
	}
	a, b := string(actions(button("a"))), string(actions(button("b")))
	for in, want := range map[string]string{
		"[" + d + "," + a + "," + h + "]":    "[" + d + "," + h + "]",
		"[" + d + "," + h + "," + a + "]":    "[" + d + "," + h + "]",
		"[" + a + "," + d + "]":              "[" + d + "]",
		"[" + a + " , " + b + " ," + d + "]": "[" + d + "]",
	} {
		out, err := Validate([]byte(in), policy(false))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if string(out) != want {
			t.Errorf("%q: got %s, want %s", in, out, want)
		}
	}
}
