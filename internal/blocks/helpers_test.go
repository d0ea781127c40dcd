package blocks

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Identifiers used by the tests. Only visibleFile is visible under policy().
const (
	visibleFile   = "3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b"
	invisibleFile = "9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4"
	userID        = "1c2d3e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
	channelID     = "7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"
)

func policy(interactive bool) Policy {
	return Policy{Interactive: interactive, FileVisible: func(id string) bool { return id == visibleFile }}
}

// raw is JSON text that enc copies as it is.
type raw string

// enc encodes v as JSON without HTML escaping, so that test inputs read like
// what a client sends.
func enc(v any) string {
	if r, ok := v.(raw); ok {
		return string(r)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// obj builds an object from key, value pairs, keeping their order.
func obj(kv ...any) raw {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(enc(kv[i].(string)))
		b.WriteByte(':')
		b.WriteString(enc(kv[i+1]))
	}
	b.WriteByte('}')
	return raw(b.String())
}

func arr(items ...any) raw {
	var b strings.Builder
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(enc(it))
	}
	b.WriteByte(']')
	return raw(b.String())
}

// rep returns n values made by f(i).
func rep(n int, f func(i int) any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func same(v any) func(int) any { return func(int) any { return v } }

// nchars returns n code points of two bytes each, so that a limit counted in
// bytes instead of characters fails the valid-edge rows.
func nchars(n int) string { return strings.Repeat("é", n) }

func ascii(n int) string { return strings.Repeat("a", n) }

func blocks(bs ...any) string { return string(arr(bs...)) }

// Fixtures: the smallest valid object of each shape.
func plainText(s string) raw  { return obj("type", "plain", "text", s) }
func mrkdwnText(s string) raw { return obj("type", "mrkdwn", "text", s) }
func section(s string) raw    { return obj("type", "section", "text", mrkdwnText(s)) }
func header(s string) raw     { return obj("type", "header", "text", s) }
func divider() raw            { return obj("type", "divider") }
func opt(text, value string) raw {
	return obj("text", text, "value", value)
}
func button(id string, kv ...any) raw {
	return obj(append([]any{"type", "button", "actionId", id, "text", "Go"}, kv...)...)
}
func selectMenu(id string, n int) raw {
	return obj("type", "static_select", "actionId", id,
		"options", arr(rep(n, func(i int) any { return opt("o", "v"+itoa(i)) })...))
}
func overflowMenu(id string, n int) raw {
	return obj("type", "overflow", "actionId", id,
		"options", arr(rep(n, func(i int) any { return opt("o", "v"+itoa(i)) })...))
}
func actions(els ...any) raw { return obj("type", "actions", "elements", arr(els...)) }
func confirmObj(kv ...any) raw {
	base := map[string]any{"title": "Sure?", "text": "This cannot be undone.", "confirm": "Yes", "deny": "No"}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(base, kv[i].(string))
		} else {
			base[kv[i].(string)] = kv[i+1]
		}
	}
	var pairs []any
	for _, k := range []string{"title", "text", "confirm", "deny"} {
		if v, ok := base[k]; ok {
			pairs = append(pairs, k, v)
		}
	}
	return obj(pairs...)
}
func metric(key string, kv ...any) raw {
	return obj(append([]any{"key", key, "label", "Revenue", "value", 12.5, "primary", true}, kv...)...)
}
func metrics(items ...any) raw { return obj("type", "metrics", "items", arr(items...)) }
func column(k string) raw      { return obj("key", k, "label", "Col", "align", "left") }
func cols(keys ...string) raw {
	a := make([]any, len(keys))
	for i, k := range keys {
		a[i] = column(k)
	}
	return arr(a...)
}
func table(cols, rows raw) raw { return obj("type", "table", "columns", cols, "rows", rows) }
func listItem(kv ...any) raw   { return obj(append([]any{"title", "Item"}, kv...)...) }
func list(items ...any) raw    { return obj("type", "list", "items", arr(items...)) }
func image(id string) raw      { return obj("type", "image", "fileId", id, "alt", "A chart") }

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
