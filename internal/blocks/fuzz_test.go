package blocks

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
)

var pathGrammar = regexp.MustCompile(`^blocks(\[\d+\]|\.[A-Za-z][A-Za-z0-9_]{0,39})*$`)

// FuzzValidate checks the properties that hold for every input: no panic;
// an error is an *Error with a well-formed path that echoes nothing long
// from the input; an accepted input is JSON by encoding/json too, and its
// output is compact, within every message-wide limit, free of interactive
// elements when the policy forbids them, and valid again unchanged.
func FuzzValidate(f *testing.F) {
	for _, c := range cases() {
		f.Add([]byte(c.in), c.pol == nil || c.pol.Interactive, c.pol == nil || c.pol.FileVisible != nil)
	}
	f.Add(benchMessage(f), false, true)
	f.Add([]byte(blocks(section("x"), actions(button("a")), obj("type", "section", "accessory", button("b"), "text", plainText("y")))), false, true)
	f.Fuzz(func(t *testing.T, in []byte, interactive, visible bool) {
		p := Policy{Interactive: interactive}
		if visible {
			p.FileVisible = func(id string) bool { return id != invisibleFile }
		}
		out, err := Validate(in, p)
		if err != nil {
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("error is %T, not *Error", err)
			}
			if out != nil {
				t.Fatal("output returned with an error")
			}
			if !pathGrammar.MatchString(ve.Path) {
				t.Fatalf("malformed path %q", ve.Path)
			}
			if ve.Reason == "" {
				t.Fatal("empty reason")
			}
			if s := echoed(in, ve.Error()); s != "" {
				t.Fatalf("error %q echoes input %q", ve.Error(), s)
			}
			if s := echoedString(in, ve.Error()); s != "" {
				t.Fatalf("error %q echoes decoded input %q", ve.Error(), s)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted input that encoding/json rejects")
		}
		if len(out) > MaxBytes || !json.Valid(out) {
			t.Fatalf("output of %d bytes is not valid", len(out))
		}
		if interactive {
			var want bytes.Buffer
			if err := json.Compact(&want, in); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, want.Bytes()) {
				t.Fatalf("output is not the compact input:\n%s\n%s", out, want.Bytes())
			}
		}
		again, err := Validate(out, p)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("output does not re-validate to itself: %v", err)
		}
		if !interactive {
			// Nothing is left to strip.
			kept, err := Validate(out, Policy{Interactive: true, FileVisible: p.FileVisible})
			if err != nil || !bytes.Equal(kept, out) {
				t.Fatalf("stripped output changes under an interactive policy: %v", err)
			}
		}
		var bs []map[string]json.RawMessage
		if err := json.Unmarshal(out, &bs); err != nil {
			t.Fatalf("output is not an array of objects: %v", err)
		}
		if len(bs) > MaxBlocks {
			t.Fatalf("%d blocks", len(bs))
		}
		nActions, nInteractive := 0, 0
		for _, b := range bs {
			switch typeOf(b) {
			case "actions":
				nActions++
				var els []map[string]json.RawMessage
				if err := json.Unmarshal(b["elements"], &els); err != nil {
					t.Fatal(err)
				}
				nInteractive += len(els)
			case "section":
				if acc, ok := b["accessory"]; ok {
					var a map[string]json.RawMessage
					if err := json.Unmarshal(acc, &a); err != nil {
						t.Fatal(err)
					}
					if typeOf(a) != "image" {
						nInteractive++
					}
				}
			}
		}
		if nActions > MaxActions || nInteractive > MaxInteractive {
			t.Fatalf("%d actions blocks, %d interactive elements", nActions, nInteractive)
		}
		if !interactive && nInteractive > 0 {
			t.Fatalf("%d interactive elements left without interactivity", nInteractive)
		}
	})
}

func typeOf(o map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(o["type"], &s)
	return s
}

// echoedString returns a decoded string of the input, at least 48 bytes
// long, that appears in msg, or "". (echoed checks the raw bytes; escapes
// could hide a value from it.)
func echoedString(in []byte, msg string) string {
	d := json.NewDecoder(bytes.NewReader(in))
	for {
		tk, err := d.Token()
		if err != nil {
			return ""
		}
		if s, ok := tk.(string); ok && len(s) >= 48 && strings.Contains(msg, s) {
			return s
		}
	}
}
