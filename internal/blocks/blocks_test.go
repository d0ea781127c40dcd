package blocks

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// tc is one rule: a valid edge (path "") or an invalid one with the path of
// the first problem and, optionally, a fragment of the reason.
type tc struct {
	name   string
	in     string
	path   string
	reason string
	pol    *Policy // nil: interactive, only visibleFile visible
}

func cases() []tc {
	noFiles := &Policy{Interactive: true}
	stripping := &Policy{Interactive: false, FileVisible: policy(false).FileVisible}
	sec := func(text raw, kv ...any) raw {
		return obj(append([]any{"type", "section", "text", text}, kv...)...)
	}
	mrk := func(s string) string { return blocks(section(s)) }
	fields := func(fs ...any) raw { return obj("type", "fields", "fields", arr(fs...)) }
	field := func(l, v string) raw { return obj("label", l, "value", v) }
	context := func(els ...any) raw { return obj("type", "context", "elements", arr(els...)) }
	btn := func(kv ...any) string { return blocks(actions(button("a", kv...))) }
	sel := func(kv ...any) string {
		return blocks(actions(obj(append([]any{"type", "static_select", "actionId", "s"}, kv...)...)))
	}
	conf := func(kv ...any) string { return btn("confirm", confirmObj(kv...)) }
	// interactive returns n buttons spread over actions blocks of at most 5.
	interactive := func(n int) []any {
		var bs []any
		for i := 0; i < n; i += 5 {
			k := min(5, n-i)
			bs = append(bs, actions(rep(k, func(j int) any { return button("b" + itoa(i+j)) })...))
		}
		return bs
	}

	return []tc{
		// The blocks array.
		{name: "empty blocks array passes", in: `[]`},
		{name: "blocks that is an object is rejected", in: `{}`, path: "blocks", reason: "must be an array"},
		{name: "blocks that is null is rejected", in: `null`, path: "blocks", reason: "must be an array"},
		{name: "blocks that is a string is rejected", in: `"x"`, path: "blocks", reason: "must be an array"},
		{name: "malformed JSON is rejected", in: `[{"type":"divider"]`, path: "blocks", reason: "not valid JSON"},
		{name: "empty input is rejected", in: ``, path: "blocks", reason: "not valid JSON"},
		{name: "trailing comma is rejected", in: `[{"type":"divider"},]`, path: "blocks", reason: "not valid JSON"},
		{name: "data after the array is rejected", in: `[] []`, path: "blocks", reason: "not valid JSON"},
		{name: "invalid UTF-8 is rejected", in: "[{\"type\":\"header\",\"text\":\"\xff\"}]", path: "blocks", reason: "UTF-8"},
		{name: "unpaired surrogate escape is rejected", in: `[{"type":"header","text":"\ud800"}]`, path: "blocks", reason: "surrogate"},
		{name: "raw control character in a string is rejected", in: "[{\"type\":\"header\",\"text\":\"a\x01\"}]", path: "blocks", reason: "not valid JSON"},
		{name: "nesting deeper than 32 levels is rejected", in: strings.Repeat("[", 33) + strings.Repeat("]", 33), path: "blocks", reason: "nesting"},
		{name: "nesting of 32 levels is checked as Blocks", in: strings.Repeat("[", 32) + strings.Repeat("]", 32), path: "blocks[0]", reason: "must be an object"},
		{name: "50 blocks pass", in: blocks(rep(50, same(divider()))...)},
		{name: "51 blocks are rejected", in: blocks(rep(51, same(divider()))...), path: "blocks", reason: "at most 50 blocks"},
		{name: "serialized size of 16384 bytes passes", in: "[" + strings.Repeat(" ", MaxBytes-2) + "]"},
		{name: "serialized size of 16385 bytes is rejected", in: "[" + strings.Repeat(" ", MaxBytes-1) + "]", path: "blocks", reason: "at most 16384 bytes"},
		{name: "block that is not an object is rejected", in: `[{"type":"divider"},1]`, path: "blocks[1]", reason: "must be an object"},
		{name: "block that is null is rejected", in: `[null]`, path: "blocks[0]", reason: "must be an object"},

		// Common block keys.
		{name: "block without type is rejected", in: blocks(obj("text", "x")), path: "blocks[0].type", reason: "is required"},
		{name: "unknown block type is rejected", in: blocks(obj("type", "video")), path: "blocks[0].type", reason: "must be one of: header, section"},
		{name: "block type that is not a string is rejected", in: blocks(obj("type", 3)), path: "blocks[0].type", reason: "must be a string"},
		{name: "block type null is rejected", in: blocks(obj("type", nil)), path: "blocks[0].type", reason: "must be a string"},
		{name: "unknown key on a block is rejected", in: blocks(divider(), obj("type", "divider", "colour", "red")), path: "blocks[1]", reason: "key that is not allowed"},
		{name: "unknown key that is not an identifier is rejected at its object", in: blocks(obj("type", "divider", "a b", 1)), path: "blocks[0]", reason: "has a key that is not allowed"},
		{name: "unknown key longer than 40 characters is rejected at its object", in: blocks(obj("type", "divider", ascii(41), 1)), path: "blocks[0]"},
		{name: "unknown key is checked before later keys", in: blocks(obj("type", "header", "x", 1, "text", 5)), path: "blocks[0]"},
		{name: "key matching is case-sensitive", in: blocks(obj("type", "header", "Text", "x")), path: "blocks[0]"},
		{name: "escaped key is decoded before matching", in: `[{"type":"header","\u0074ext":"hi"}]`},
		{name: "duplicate key is rejected", in: `[{"type":"header","text":"a","text":"b"}]`, path: "blocks[0].text", reason: "duplicate key"},
		{name: "duplicate type key is rejected", in: `[{"type":"divider","type":"divider"}]`, path: "blocks[0].type", reason: "duplicate key"},
		{name: "null optional key is rejected", in: blocks(obj("type", "divider", "blockId", nil)), path: "blocks[0].blockId", reason: "must not be null"},
		{name: "null required key is rejected", in: blocks(obj("type", "header", "text", nil)), path: "blocks[0].text", reason: "must not be null"},
		{name: "blockId of 64 characters passes", in: blocks(obj("type", "divider", "blockId", ascii(64)))},
		{name: "blockId of 65 characters is rejected", in: blocks(obj("type", "divider", "blockId", ascii(65))), path: "blocks[0].blockId", reason: "must match"},
		{name: "blockId with every allowed character passes", in: blocks(obj("type", "divider", "blockId", "Az09_.-"))},
		{name: "empty blockId is rejected", in: blocks(obj("type", "divider", "blockId", "")), path: "blocks[0].blockId"},
		{name: "blockId with a space is rejected", in: blocks(obj("type", "divider", "blockId", "a b")), path: "blocks[0].blockId"},
		{name: "blockId with a colon is rejected", in: blocks(obj("type", "divider", "blockId", "a:b")), path: "blocks[0].blockId"},
		{name: "blockId that is a number is rejected", in: blocks(obj("type", "divider", "blockId", 7)), path: "blocks[0].blockId", reason: "must be a string"},
		{name: "blockId on every block type passes", in: blocks(
			obj("type", "header", "blockId", "b1", "text", "t"),
			obj("type", "section", "blockId", "b2", "text", plainText("t")),
			obj("type", "fields", "blockId", "b3", "fields", arr(field("l", "v"))),
			obj("type", "metrics", "blockId", "b4", "items", arr(metric("k"))),
			obj("type", "table", "blockId", "b5", "columns", cols("a"), "rows", arr()),
			obj("type", "list", "blockId", "b6", "items", arr(listItem())),
			obj("type", "context", "blockId", "b7", "elements", arr(plainText("t"))),
			obj("type", "divider", "blockId", "b8"),
			obj("type", "image", "blockId", "b9", "fileId", visibleFile, "alt", "a"),
			obj("type", "actions", "blockId", "b10", "elements", arr(button("a"))),
		)},
		{name: "duplicate blockId is rejected", in: blocks(obj("type", "divider", "blockId", "x"), obj("type", "divider", "blockId", "x")), path: "blocks[1].blockId", reason: "unique"},
		{name: "duplicate blockId written with an escape is rejected", in: `[{"type":"divider","blockId":"ab"},{"type":"divider","blockId":"a\u0062"}]`, path: "blocks[1].blockId", reason: "unique"},

		// Text in general.
		{name: "text counts code points, not bytes", in: blocks(header(nchars(150)))},
		{name: "text counts escaped code points once", in: `[{"type":"header","text":"` + strings.Repeat(`\u00e9`, 150) + `"}]`},
		{name: "text counts a surrogate pair as one character", in: `[{"type":"header","text":"` + strings.Repeat(`\ud83d\ude00`, 150) + `"}]`},
		{name: "text counts an emoji as one character", in: blocks(header(strings.Repeat("😀", 150)))},
		{name: "text with newline and tab passes", in: blocks(header("a\nb\tc"))},
		{name: "text with an escaped control character is rejected", in: `[{"type":"header","text":"a\u0007"}]`, path: "blocks[0].text", reason: "control characters"},
		{name: "text with carriage return is rejected", in: `[{"type":"header","text":"a\r\nb"}]`, path: "blocks[0].text", reason: "control characters"},
		{name: "text with NUL is rejected", in: `[{"type":"header","text":"a\u0000"}]`, path: "blocks[0].text", reason: "control characters"},
		{name: "text with DEL is rejected", in: blocks(header("a\x7f")), path: "blocks[0].text", reason: "control characters"},
		{name: "text with a C1 control is rejected", in: blocks(header("a\u0085b")), path: "blocks[0].text", reason: "control characters"},
		{name: "text with a control character after 8 printable bytes is rejected", in: blocks(header("abcdefgh\x01")), path: "blocks[0].text", reason: "control characters"},
		{name: "text with DEL after 8 printable bytes is rejected", in: blocks(header("abcdefghij\x7f")), path: "blocks[0].text", reason: "control characters"},
		{name: "text with U+00A0 passes", in: blocks(header("a\u00a0b"))},
		{name: "text that is a number is rejected", in: blocks(obj("type", "header", "text", 5)), path: "blocks[0].text", reason: "must be a string"},

		// header
		{name: "header text of 150 characters passes", in: blocks(header(nchars(150)))},
		{name: "header text of 151 characters is rejected", in: blocks(header(nchars(151))), path: "blocks[0].text", reason: "at most 150 characters"},
		{name: "header text of 1 character passes", in: blocks(header("a"))},
		{name: "empty header text is rejected", in: blocks(header("")), path: "blocks[0].text", reason: "must not be empty"},
		{name: "header without text is rejected", in: blocks(obj("type", "header")), path: "blocks[0].text", reason: "is required"},
		{name: "header text that is a text object is rejected", in: blocks(obj("type", "header", "text", plainText("x"))), path: "blocks[0].text", reason: "must be a string"},
		{name: "header text may contain < as plain text", in: blocks(header("<b>not markup</b>"))},

		// section and text objects
		{name: "section with plain text passes", in: blocks(sec(plainText("<not a link>")))},
		{name: "section text of 3000 characters passes", in: blocks(sec(plainText(nchars(3000))))},
		{name: "section text of 3001 characters is rejected", in: blocks(sec(plainText(nchars(3001)))), path: "blocks[0].text.text", reason: "at most 3000 characters"},
		{name: "mrkdwn text of 3000 characters passes", in: blocks(sec(mrkdwnText(nchars(3000))))},
		{name: "mrkdwn text of 3001 characters is rejected", in: blocks(sec(mrkdwnText(nchars(3001)))), path: "blocks[0].text.text", reason: "at most 3000 characters"},
		{name: "empty section text is rejected", in: blocks(sec(plainText(""))), path: "blocks[0].text.text", reason: "must not be empty"},
		{name: "section without text is rejected", in: blocks(obj("type", "section")), path: "blocks[0].text", reason: "is required"},
		{name: "section text that is a string is rejected", in: blocks(obj("type", "section", "text", "x")), path: "blocks[0].text", reason: "must be an object"},
		{name: "text object type plain_text is rejected", in: blocks(sec(obj("type", "plain_text", "text", "x"))), path: "blocks[0].text.type", reason: "must be one of: plain, mrkdwn"},
		{name: "text object without type is rejected", in: blocks(sec(obj("text", "x"))), path: "blocks[0].text.type", reason: "is required"},
		{name: "text object without text is rejected", in: blocks(sec(obj("type", "plain"))), path: "blocks[0].text.text", reason: "is required"},
		{name: "text object with emoji key is rejected", in: blocks(sec(obj("type", "plain", "text", "x", "emoji", true))), path: "blocks[0].text"},
		{name: "text object with text before type passes", in: blocks(sec(obj("text", "*b*", "type", "mrkdwn")))},
		{name: "section fields key is rejected", in: blocks(sec(plainText("x"), "fields", arr())), path: "blocks[0]"},

		// mrkdwn
		{name: "mrkdwn bold italic code and lists pass", in: mrk("*bold* _italic_ `code` ~strike~\n• one\n1. two\n> quote")},
		{name: "mrkdwn https link with label passes", in: mrk("see <https://example.com/a?b=c#d|the docs>")},
		{name: "mrkdwn https link without label passes", in: mrk("<https://example.com>")},
		{name: "mrkdwn https link with port passes", in: mrk("<https://example.com:8443/x>")},
		{name: "mrkdwn link with uppercase scheme passes", in: mrk("<HTTPS://example.com>")},
		{name: "mrkdwn http link is rejected", in: mrk("<http://example.com|x>"), path: "blocks[0].text.text", reason: "not https"},
		{name: "mrkdwn javascript link is rejected", in: mrk("<javascript:alert(1)|x>"), path: "blocks[0].text.text", reason: "not https"},
		{name: "mrkdwn mailto link is rejected", in: mrk("<mailto:a@example.com>"), path: "blocks[0].text.text", reason: "not https"},
		{name: "mrkdwn data link is rejected", in: mrk("<data:text/html,x>"), path: "blocks[0].text.text", reason: "not https"},
		{name: "mrkdwn link without host is rejected", in: mrk("<https:///path>"), path: "blocks[0].text.text", reason: "without a host"},
		{name: "mrkdwn opaque https link is rejected", in: mrk("<https:example.com>"), path: "blocks[0].text.text", reason: "unsupported"},
		{name: "mrkdwn link with user information is rejected", in: mrk("<https://user:pw@example.com>"), path: "blocks[0].text.text", reason: "user information"},
		{name: "mrkdwn link with a space is rejected", in: mrk("<https://example.com/a b>"), path: "blocks[0].text.text"},
		{name: "mrkdwn link with an empty label is rejected", in: mrk("<https://example.com|>"), path: "blocks[0].text.text", reason: "empty label"},
		{name: "mrkdwn user mention passes", in: mrk("hi <@" + userID + ">")},
		{name: "mrkdwn conversation mention passes", in: mrk("in <#" + channelID + ">")},
		{name: "mrkdwn mention of a non-UUID is rejected", in: mrk("<@U12345>"), path: "blocks[0].text.text", reason: "not a UUID"},
		{name: "mrkdwn mention of an uppercase UUID is rejected", in: mrk("<@" + strings.ToUpper(userID) + ">"), path: "blocks[0].text.text", reason: "not a UUID"},
		{name: "mrkdwn mention with a label is rejected", in: mrk("<@" + userID + "|bob>"), path: "blocks[0].text.text", reason: "not a UUID"},
		{name: "mrkdwn special mention is rejected", in: mrk("<!here>"), path: "blocks[0].text.text", reason: "unsupported"},
		{name: "mrkdwn HTML tag is rejected", in: mrk("<b>x</b>"), path: "blocks[0].text.text", reason: "unsupported"},
		{name: "mrkdwn empty construct is rejected", in: mrk("<>"), path: "blocks[0].text.text", reason: "unsupported"},
		{name: "mrkdwn unclosed < is rejected", in: mrk("1 < 2"), path: "blocks[0].text.text", reason: "&lt;"},
		{name: "mrkdwn nested < is rejected", in: mrk("<<https://example.com>>"), path: "blocks[0].text.text", reason: "&lt;"},
		{name: "mrkdwn escaped &lt; passes", in: mrk("1 &lt; 2 &amp; 3 > 2")},
		{name: "mrkdwn link written with JSON escapes is checked decoded", in: `[{"type":"section","text":{"type":"mrkdwn","text":"\u003chttp://example.com\u003e"}}]`, path: "blocks[0].text.text", reason: "not https"},
		{name: "mrkdwn second construct is checked", in: mrk("<https://example.com> and <ftp://example.com>"), path: "blocks[0].text.text"},

		// section accessory
		{name: "section image accessory passes", in: blocks(sec(plainText("x"), "accessory", obj("type", "image", "fileId", visibleFile, "alt", "a")))},
		{name: "section image accessory of an invisible file is rejected", in: blocks(sec(plainText("x"), "accessory", obj("type", "image", "fileId", invisibleFile, "alt", "a"))), path: "blocks[0].accessory.fileId", reason: "visible"},
		{name: "section image accessory without alt is rejected", in: blocks(sec(plainText("x"), "accessory", obj("type", "image", "fileId", visibleFile))), path: "blocks[0].accessory.alt", reason: "is required"},
		{name: "section image accessory with a url is rejected", in: blocks(sec(plainText("x"), "accessory", obj("type", "image", "fileId", visibleFile, "alt", "a", "url", "https://example.com/x.png"))), path: "blocks[0].accessory"},
		{name: "section button accessory passes", in: blocks(sec(plainText("x"), "accessory", button("a")))},
		{name: "section select accessory passes", in: blocks(sec(plainText("x"), "accessory", selectMenu("s", 3)))},
		{name: "section overflow accessory passes", in: blocks(sec(plainText("x"), "accessory", overflowMenu("o", 2)))},
		{name: "section accessory of an unknown type is rejected", in: blocks(sec(plainText("x"), "accessory", obj("type", "datepicker"))), path: "blocks[0].accessory.type", reason: "must be one of: image, button, static_select, overflow"},
		{name: "section accessory that is an array is rejected", in: blocks(sec(plainText("x"), "accessory", arr())), path: "blocks[0].accessory", reason: "must be an object"},
		{name: "invalid accessory is rejected when interactivity is off", in: blocks(sec(plainText("x"), "accessory", obj("type", "button", "text", "x"))), pol: stripping, path: "blocks[0].accessory.actionId"},

		// fields
		{name: "fields with 10 items pass", in: blocks(fields(rep(10, same(field("l", "v")))...))},
		{name: "fields with 11 items are rejected", in: blocks(fields(rep(11, same(field("l", "v")))...)), path: "blocks[0].fields", reason: "at most 10 items"},
		{name: "fields with 0 items are rejected", in: blocks(fields()), path: "blocks[0].fields", reason: "at least 1 item"},
		{name: "fields label of 60 characters passes", in: blocks(fields(field(nchars(60), "v")))},
		{name: "fields label of 61 characters is rejected", in: blocks(fields(field("l", "v"), field(nchars(61), "v"))), path: "blocks[0].fields[1].label", reason: "at most 60 characters"},
		{name: "fields value of 200 characters passes", in: blocks(fields(field("l", nchars(200))))},
		{name: "fields value of 201 characters is rejected", in: blocks(fields(field("l", nchars(201)))), path: "blocks[0].fields[0].value", reason: "at most 200 characters"},
		{name: "fields empty label is rejected", in: blocks(fields(field("", "v"))), path: "blocks[0].fields[0].label", reason: "must not be empty"},
		{name: "fields item without value is rejected", in: blocks(fields(obj("label", "l"))), path: "blocks[0].fields[0].value", reason: "is required"},
		{name: "fields item that is a string is rejected", in: blocks(fields("x")), path: "blocks[0].fields[0]", reason: "must be an object"},
		{name: "fields without fields is rejected", in: blocks(obj("type", "fields")), path: "blocks[0].fields", reason: "is required"},
		{name: "fields that is an object is rejected", in: blocks(obj("type", "fields", "fields", obj())), path: "blocks[0].fields", reason: "must be an array"},

		// metrics
		{name: "metrics with 4 items pass", in: blocks(metrics(rep(4, func(i int) any { return metric("k" + itoa(i)) })...))},
		{name: "metrics with 5 items are rejected", in: blocks(metrics(rep(5, func(i int) any { return metric("k" + itoa(i)) })...)), path: "blocks[0].items", reason: "at most 4 items"},
		{name: "metrics with 0 items are rejected", in: blocks(metrics()), path: "blocks[0].items", reason: "at least 1 item"},
		{name: "metrics key of 40 characters passes", in: blocks(metrics(obj("key", "K"+ascii(38)+"_", "label", "l", "value", 1, "primary", false)))},
		{name: "metrics key of 41 characters is rejected", in: blocks(metrics(obj("key", ascii(41), "label", "l", "value", 1, "primary", false))), path: "blocks[0].items[0].key", reason: "must match ^[A-Za-z][A-Za-z0-9_]{0,39}$"},
		{name: "metrics key starting with a digit is rejected", in: blocks(metrics(obj("key", "1a", "label", "l", "value", 1, "primary", false))), path: "blocks[0].items[0].key"},
		{name: "metrics key with a dash is rejected", in: blocks(metrics(obj("key", "a-b", "label", "l", "value", 1, "primary", false))), path: "blocks[0].items[0].key"},
		{name: "metrics duplicate key is rejected", in: blocks(metrics(obj("key", "a", "label", "l", "value", 1, "primary", false), obj("key", "a", "label", "l", "value", 1, "primary", false))), path: "blocks[0].items[1].key", reason: "unique within the block"},
		{name: "metrics same key in two blocks passes", in: blocks(metrics(metric("k")), metrics(metric("k")))},
		{name: "metrics label of 60 characters passes", in: blocks(metrics(obj("key", "a", "label", nchars(60), "value", 1, "primary", false)))},
		{name: "metrics label of 61 characters is rejected", in: blocks(metrics(obj("key", "a", "label", nchars(61), "value", 1, "primary", false))), path: "blocks[0].items[0].label", reason: "at most 60 characters"},
		{name: "metrics value that is a string is rejected", in: blocks(metrics(obj("key", "a", "label", "l", "value", "12", "primary", false))), path: "blocks[0].items[0].value", reason: "must be a number"},
		{name: "metrics value of 1e308 passes", in: blocks(metrics(obj("key", "a", "label", "l", "value", raw("1e308"), "primary", false)))},
		{name: "metrics value of 1e309 is rejected", in: blocks(metrics(obj("key", "a", "label", "l", "value", raw("-1e309"), "primary", false))), path: "blocks[0].items[0].value", reason: "finite"},
		{name: "metrics negative decimal value passes", in: blocks(metrics(obj("key", "a", "label", "l", "value", raw("-0.125e-3"), "primary", false)))},
		{name: "metrics value with a leading zero is rejected", in: `[{"type":"metrics","items":[{"key":"a","label":"l","value":01,"primary":false}]}]`, path: "blocks", reason: "not valid JSON"},
		{name: "metrics without primary is rejected", in: blocks(metrics(obj("key", "a", "label", "l", "value", 1))), path: "blocks[0].items[0].primary", reason: "is required"},
		{name: "metrics primary that is a string is rejected", in: blocks(metrics(obj("key", "a", "label", "l", "value", 1, "primary", "true"))), path: "blocks[0].items[0].primary", reason: "must be a boolean"},
		{name: "metrics without key is rejected", in: blocks(metrics(obj("label", "l", "value", 1, "primary", true))), path: "blocks[0].items[0].key", reason: "is required"},
		{name: "metrics every format passes", in: blocks(metrics(metric("a", "format", "integer"), metric("b", "format", "decimal"), metric("c", "format", "percent"), metric("d", "format", "currency", "currency", "EUR")))},
		{name: "metrics unknown format is rejected", in: blocks(metrics(metric("k", "format", "money"))), path: "blocks[0].items[0].format", reason: "must be one of: integer, decimal, currency, percent"},
		{name: "metrics currency format without currency is rejected", in: blocks(metrics(metric("k", "format", "currency"))), path: "blocks[0].items[0].currency", reason: "required when format is currency"},
		{name: "metrics currency without format is rejected", in: blocks(metrics(metric("k", "currency", "USD"))), path: "blocks[0].items[0].currency", reason: "only when format is currency"},
		{name: "metrics currency with decimal format is rejected", in: blocks(metrics(metric("k", "format", "decimal", "currency", "USD"))), path: "blocks[0].items[0].currency", reason: "only when format is currency"},
		{name: "metrics currency before format passes", in: blocks(metrics(metric("k", "currency", "JPY", "format", "currency")))},
		{name: "metrics lowercase currency is rejected", in: blocks(metrics(metric("k", "format", "currency", "currency", "usd"))), path: "blocks[0].items[0].currency", reason: "ISO 4217"},
		{name: "metrics unknown currency is rejected", in: blocks(metrics(metric("k", "format", "currency", "currency", "ABC"))), path: "blocks[0].items[0].currency", reason: "ISO 4217"},
		{name: "metrics withdrawn currency HRK is rejected", in: blocks(metrics(metric("k", "format", "currency", "currency", "HRK"))), path: "blocks[0].items[0].currency"},
		{name: "metrics currency of four letters is rejected", in: blocks(metrics(metric("k", "format", "currency", "currency", "EURO"))), path: "blocks[0].items[0].currency"},
		{name: "metrics first and last currency codes pass", in: blocks(metrics(metric("a", "format", "currency", "currency", "AED"), metric("b", "format", "currency", "currency", "ZWG")))},

		// table
		{name: "table with 6 columns passes", in: blocks(table(cols("a", "b", "c", "d", "e", "f"), arr()))},
		{name: "table with 7 columns is rejected", in: blocks(table(cols("a", "b", "c", "d", "e", "f", "g"), arr())), path: "blocks[0].columns", reason: "at most 6 items"},
		{name: "table with 0 columns is rejected", in: blocks(table(cols(), arr())), path: "blocks[0].columns", reason: "at least 1 item"},
		{name: "table duplicate column key is rejected", in: blocks(table(cols("a", "a"), arr())), path: "blocks[0].columns[1].key", reason: "unique within the table"},
		{name: "table column key with a space is rejected", in: blocks(table(cols("a b"), arr())), path: "blocks[0].columns[0].key"},
		{name: "table column label of 60 characters passes", in: blocks(table(arr(obj("key", "a", "label", nchars(60), "align", "right")), arr()))},
		{name: "table column label of 61 characters is rejected", in: blocks(table(arr(obj("key", "a", "label", nchars(61), "align", "right")), arr())), path: "blocks[0].columns[0].label", reason: "at most 60 characters"},
		{name: "table every align passes", in: blocks(table(arr(obj("key", "a", "label", "A", "align", "left"), obj("key", "b", "label", "B", "align", "center"), obj("key", "c", "label", "C", "align", "right")), arr()))},
		{name: "table unknown align is rejected", in: blocks(table(arr(obj("key", "a", "label", "A", "align", "justify")), arr())), path: "blocks[0].columns[0].align", reason: "must be one of: left, center, right"},
		{name: "table column without align is rejected", in: blocks(table(arr(obj("key", "a", "label", "A")), arr())), path: "blocks[0].columns[0].align", reason: "is required"},
		{name: "table with 20 rows passes", in: blocks(table(cols("a"), arr(rep(20, same(obj("a", "x")))...)))},
		{name: "table with 21 rows is rejected", in: blocks(table(cols("a"), arr(rep(21, same(obj("a", "x")))...))), path: "blocks[0].rows", reason: "at most 20 rows"},
		{name: "table without rows is rejected", in: blocks(obj("type", "table", "columns", cols("a"))), path: "blocks[0].rows", reason: "is required"},
		{name: "table rows that is an object is rejected", in: blocks(table(cols("a"), obj())), path: "blocks[0].rows", reason: "must be an array"},
		{name: "table row cell of 200 characters passes", in: blocks(table(cols("a", "b"), arr(obj("a", nchars(200), "b", ""))))},
		{name: "table row cell of 201 characters is rejected", in: blocks(table(cols("a", "b"), arr(obj("b", "x"), obj("a", nchars(201))))), path: "blocks[0].rows[1]", reason: "columns[0] must be at most 200 characters"},
		{name: "table row with an undeclared key is rejected", in: blocks(table(cols("a"), arr(obj("a", "x", "zz", "y")))), path: "blocks[0].rows[0]", reason: "not a declared column key"},
		{name: "table row with an odd undeclared key is rejected at the row", in: blocks(table(cols("a"), arr(obj("a b", "y")))), path: "blocks[0].rows[0]", reason: "not a declared column key"},
		{name: "table row with a duplicate key is rejected", in: `[{"type":"table","columns":[{"key":"a","label":"A","align":"left"}],"rows":[{"a":"x","a":"y"}]}]`, path: "blocks[0].rows[0]", reason: "duplicate key (columns[0])"},
		{name: "table row cell that is a number is rejected", in: blocks(table(cols("a"), arr(obj("a", 1)))), path: "blocks[0].rows[0]", reason: "must be a string"},
		{name: "table row cell that is null is rejected", in: blocks(table(cols("a"), arr(obj("a", nil)))), path: "blocks[0].rows[0]", reason: "must be a string"},
		{name: "table row cell with a control character is rejected", in: blocks(table(cols("a"), arr(obj("a", "\u0085")))), path: "blocks[0].rows[0]", reason: "control"},
		{name: "table row that is an array is rejected", in: blocks(table(cols("a"), arr(arr("x")))), path: "blocks[0].rows[0]", reason: "must be an object"},
		{name: "table empty row passes", in: blocks(table(cols("a"), arr(obj())))},
		{name: "table rows before columns pass", in: blocks(obj("type", "table", "rows", arr(obj("b", "x")), "columns", cols("a", "b")))},
		{name: "table column keys are per table", in: blocks(table(cols("a"), arr(obj("a", "x"))), table(cols("b"), arr(obj("a", "x")))), path: "blocks[1].rows[0]", reason: "not a declared column key"},

		// list
		{name: "list with 20 items passes", in: blocks(list(rep(20, same(listItem()))...))},
		{name: "list with 21 items is rejected", in: blocks(list(rep(21, same(listItem()))...)), path: "blocks[0].items", reason: "at most 20 items"},
		{name: "list with 0 items is rejected", in: blocks(list()), path: "blocks[0].items", reason: "at least 1 item"},
		{name: "list title of 150 characters passes", in: blocks(list(obj("title", nchars(150))))},
		{name: "list title of 151 characters is rejected", in: blocks(list(obj("title", nchars(151)))), path: "blocks[0].items[0].title", reason: "at most 150 characters"},
		{name: "list without title is rejected", in: blocks(list(obj("subtitle", "s"))), path: "blocks[0].items[0].title", reason: "is required"},
		{name: "list subtitle of 300 characters passes", in: blocks(list(listItem("subtitle", nchars(300))))},
		{name: "list subtitle of 301 characters is rejected", in: blocks(list(listItem("subtitle", nchars(301)))), path: "blocks[0].items[0].subtitle", reason: "at most 300 characters"},
		{name: "list empty subtitle is rejected", in: blocks(list(listItem("subtitle", ""))), path: "blocks[0].items[0].subtitle", reason: "must not be empty"},
		{name: "list https url passes", in: blocks(list(listItem("url", "https://example.com/a/b?c=d#e")))},
		{name: "list url of 3000 characters passes", in: blocks(list(listItem("url", "https://example.com/"+ascii(2980))))},
		{name: "list url of 3001 characters is rejected", in: blocks(list(listItem("url", "https://example.com/"+ascii(2981)))), path: "blocks[0].items[0].url", reason: "at most 3000 characters"},
		{name: "list http url is rejected", in: blocks(list(listItem("url", "http://example.com"))), path: "blocks[0].items[0].url", reason: "https"},
		{name: "list javascript url is rejected", in: blocks(list(listItem("url", "javascript:alert(1)"))), path: "blocks[0].items[0].url", reason: "https"},
		{name: "list relative url is rejected", in: blocks(list(listItem("url", "/a/b"))), path: "blocks[0].items[0].url", reason: "valid https URL"},
		{name: "list url without host is rejected", in: blocks(list(listItem("url", "https:///a"))), path: "blocks[0].items[0].url", reason: "host"},
		{name: "list url with only a port is rejected", in: blocks(list(listItem("url", "https://:443/a"))), path: "blocks[0].items[0].url", reason: "host"},
		{name: "list url with user information is rejected", in: blocks(list(listItem("url", "https://u@example.com"))), path: "blocks[0].items[0].url", reason: "user information"},
		{name: "list url with a space is rejected", in: blocks(list(listItem("url", "https://example.com/a b"))), path: "blocks[0].items[0].url", reason: "valid https URL"},
		{name: "list url with a bad escape is rejected", in: blocks(list(listItem("url", "https://example.com/%zz"))), path: "blocks[0].items[0].url", reason: "valid https URL"},
		{name: "list empty url is rejected", in: blocks(list(listItem("url", ""))), path: "blocks[0].items[0].url", reason: "must not be empty"},

		// context
		{name: "context with 10 elements passes", in: blocks(context(rep(10, same(mrkdwnText("_x_")))...))},
		{name: "context with 11 elements is rejected", in: blocks(context(rep(11, same(plainText("x")))...)), path: "blocks[0].elements", reason: "at most 10 items"},
		{name: "context with 0 elements is rejected", in: blocks(context()), path: "blocks[0].elements", reason: "at least 1 item"},
		{name: "context element that is a string is rejected", in: blocks(context("x")), path: "blocks[0].elements[0]", reason: "must be an object"},
		{name: "context image element is rejected", in: blocks(context(obj("type", "image", "fileId", visibleFile, "alt", "a"))), path: "blocks[0].elements[0].type", reason: "must be one of: plain, mrkdwn"},
		{name: "context mrkdwn element is checked as mrkdwn", in: blocks(context(plainText("x"), mrkdwnText("<http://x.com>"))), path: "blocks[0].elements[1].text", reason: "not https"},
		{name: "context element text of 3000 characters passes", in: blocks(context(plainText(nchars(3000))))},
		{name: "context element text of 3001 characters is rejected", in: blocks(context(plainText(nchars(3001)))), path: "blocks[0].elements[0].text", reason: "at most 3000 characters"},

		// divider
		{name: "divider passes", in: blocks(divider())},
		{name: "divider with text is rejected", in: blocks(obj("type", "divider", "text", "x")), path: "blocks[0]", reason: "key that is not allowed"},

		// image
		{name: "image of a visible file passes", in: blocks(image(visibleFile))},
		{name: "image of an invisible file is rejected", in: blocks(image(invisibleFile)), path: "blocks[0].fileId", reason: "visible in this conversation"},
		{name: "image without a visibility function is rejected", in: blocks(image(visibleFile)), pol: noFiles, path: "blocks[0].fileId", reason: "visible in this conversation"},
		{name: "image fileId that is not a UUID is rejected", in: blocks(image("file-1")), path: "blocks[0].fileId", reason: "must be a UUID"},
		{name: "image fileId in uppercase is rejected", in: blocks(image(strings.ToUpper(visibleFile))), path: "blocks[0].fileId", reason: "must be a UUID"},
		{name: "image without fileId is rejected", in: blocks(obj("type", "image", "alt", "a")), path: "blocks[0].fileId", reason: "is required"},
		{name: "image with a remote url is rejected", in: blocks(obj("type", "image", "url", "https://example.com/a.png", "alt", "a")), path: "blocks[0]", reason: "key that is not allowed"},
		{name: "image alt of 200 characters passes", in: blocks(obj("type", "image", "fileId", visibleFile, "alt", nchars(200)))},
		{name: "image alt of 201 characters is rejected", in: blocks(obj("type", "image", "fileId", visibleFile, "alt", nchars(201))), path: "blocks[0].alt", reason: "at most 200 characters"},
		{name: "image without alt is rejected", in: blocks(obj("type", "image", "fileId", visibleFile)), path: "blocks[0].alt", reason: "is required"},
		{name: "image empty alt is rejected", in: blocks(obj("type", "image", "fileId", visibleFile, "alt", "")), path: "blocks[0].alt", reason: "must not be empty"},

		// actions
		{name: "actions with 5 elements pass", in: blocks(actions(rep(5, func(i int) any { return button("b" + itoa(i)) })...))},
		{name: "actions with 6 elements are rejected", in: blocks(actions(rep(6, func(i int) any { return button("b" + itoa(i)) })...)), path: "blocks[0].elements", reason: "at most 5 items"},
		{name: "actions with 0 elements are rejected", in: blocks(actions()), path: "blocks[0].elements", reason: "at least 1 item"},
		{name: "actions with every element type pass", in: blocks(actions(button("a"), selectMenu("b", 2), overflowMenu("c", 2)))},
		{name: "actions image element is rejected", in: blocks(actions(obj("type", "image", "fileId", visibleFile, "alt", "a"))), path: "blocks[0].elements[0].type", reason: "must be one of: button, static_select, overflow"},
		{name: "5 actions blocks pass", in: blocks(rep(5, func(i int) any { return actions(button("b" + itoa(i))) })...)},
		{name: "6 actions blocks are rejected", in: blocks(rep(6, func(i int) any { return actions(button("b" + itoa(i))) })...), path: "blocks[5]", reason: "5 actions blocks"},
		{name: "6 actions blocks are rejected when interactivity is off", in: blocks(rep(6, func(i int) any { return actions(button("b" + itoa(i))) })...), pol: stripping, path: "blocks[5]", reason: "5 actions blocks"},
		{name: "25 interactive elements pass", in: blocks(interactive(25)...)},
		{name: "26 interactive elements are rejected", in: blocks(append(interactive(25), sec(plainText("x"), "accessory", button("z")))...), path: "blocks[5].accessory", reason: "25 interactive elements"},
		{name: "interactive elements count accessories", in: blocks(append(rep(21, func(i int) any { return sec(plainText("x"), "accessory", button("s"+itoa(i))) }), interactive(5)...)...), path: "blocks[21].elements[4]", reason: "25 interactive elements"},
		{name: "interactive elements are counted when interactivity is off", in: blocks(append(interactive(25), sec(plainText("x"), "accessory", button("z")))...), pol: stripping, path: "blocks[5].accessory", reason: "25 interactive elements"},
		{name: "image accessories do not count as interactive", in: blocks(append(interactive(25), sec(plainText("x"), "accessory", obj("type", "image", "fileId", visibleFile, "alt", "a")))...)},

		// button
		{name: "button with every key passes", in: btn("value", "v", "style", "primary", "url", "https://example.com", "confirm", confirmObj())},
		{name: "button without actionId is rejected", in: blocks(actions(obj("type", "button", "text", "Go"))), path: "blocks[0].elements[0].actionId", reason: "is required"},
		{name: "button actionId of 255 characters passes", in: blocks(actions(button(ascii(255))))},
		{name: "button actionId of 256 characters is rejected", in: blocks(actions(button(ascii(256)))), path: "blocks[0].elements[0].actionId", reason: "must match ^[A-Za-z0-9_.:-]{1,255}$"},
		{name: "button actionId with every allowed character passes", in: blocks(actions(button("Az09_.:-")))},
		{name: "button empty actionId is rejected", in: blocks(actions(button(""))), path: "blocks[0].elements[0].actionId"},
		{name: "button actionId with a slash is rejected", in: blocks(actions(button("a/b"))), path: "blocks[0].elements[0].actionId"},
		{name: "button duplicate actionId in one block is rejected", in: blocks(actions(button("a"), button("a"))), path: "blocks[0].elements[1].actionId", reason: "unique within the message"},
		{name: "button duplicate actionId across blocks is rejected", in: blocks(sec(plainText("x"), "accessory", button("a")), actions(selectMenu("a", 1))), path: "blocks[1].elements[0].actionId", reason: "unique within the message"},
		{name: "button text of 75 characters passes", in: blocks(actions(obj("type", "button", "actionId", "a", "text", nchars(75))))},
		{name: "button text of 76 characters is rejected", in: blocks(actions(obj("type", "button", "actionId", "a", "text", nchars(76)))), path: "blocks[0].elements[0].text", reason: "at most 75 characters"},
		{name: "button without text is rejected", in: blocks(actions(obj("type", "button", "actionId", "a"))), path: "blocks[0].elements[0].text", reason: "is required"},
		{name: "button text object is rejected", in: blocks(actions(obj("type", "button", "actionId", "a", "text", plainText("Go")))), path: "blocks[0].elements[0].text", reason: "must be a string"},
		{name: "button value of 2000 characters passes", in: btn("value", nchars(2000))},
		{name: "button value of 2001 characters is rejected", in: btn("value", nchars(2001)), path: "blocks[0].elements[0].value", reason: "at most 2000 characters"},
		{name: "button empty value passes", in: btn("value", "")},
		{name: "button every style passes", in: blocks(actions(button("a", "style", "default"), button("b", "style", "primary"), button("c", "style", "danger", "confirm", confirmObj())))},
		{name: "button unknown style is rejected", in: btn("style", "secondary"), path: "blocks[0].elements[0].style", reason: "must be one of: default, primary, danger"},
		{name: "danger button without confirm is rejected", in: btn("style", "danger"), path: "blocks[0].elements[0].confirm", reason: "required when style is danger"},
		{name: "danger button with confirm passes", in: btn("confirm", confirmObj(), "style", "danger")},
		{name: "button https url passes", in: btn("url", "https://example.com/x")},
		{name: "button http url is rejected", in: btn("url", "http://example.com/x"), path: "blocks[0].elements[0].url", reason: "https"},
		{name: "button url with user information is rejected", in: btn("url", "https://a:b@example.com"), path: "blocks[0].elements[0].url", reason: "user information"},
		{name: "button unknown key is rejected", in: btn("placeholder", "x"), path: "blocks[0].elements[0]"},

		// confirm
		{name: "confirm title of 100 characters passes", in: conf("title", nchars(100))},
		{name: "confirm title of 101 characters is rejected", in: conf("title", nchars(101)), path: "blocks[0].elements[0].confirm.title", reason: "at most 100 characters"},
		{name: "confirm text of 300 characters passes", in: conf("text", nchars(300))},
		{name: "confirm text of 301 characters is rejected", in: conf("text", nchars(301)), path: "blocks[0].elements[0].confirm.text", reason: "at most 300 characters"},
		{name: "confirm confirm of 30 characters passes", in: conf("confirm", nchars(30))},
		{name: "confirm confirm of 31 characters is rejected", in: conf("confirm", nchars(31)), path: "blocks[0].elements[0].confirm.confirm", reason: "at most 30 characters"},
		{name: "confirm deny of 30 characters passes", in: conf("deny", nchars(30))},
		{name: "confirm deny of 31 characters is rejected", in: conf("deny", nchars(31)), path: "blocks[0].elements[0].confirm.deny", reason: "at most 30 characters"},
		{name: "confirm without deny is rejected", in: conf("deny", nil), path: "blocks[0].elements[0].confirm.deny", reason: "is required"},
		{name: "confirm without title is rejected", in: conf("title", nil), path: "blocks[0].elements[0].confirm.title", reason: "is required"},
		{name: "confirm empty text is rejected", in: conf("text", ""), path: "blocks[0].elements[0].confirm.text", reason: "must not be empty"},
		{name: "confirm with style is rejected", in: btn("confirm", obj("title", "t", "text", "t", "confirm", "y", "deny", "n", "style", "danger")), path: "blocks[0].elements[0].confirm"},
		{name: "confirm that is true is rejected", in: btn("confirm", true), path: "blocks[0].elements[0].confirm", reason: "must be an object"},

		// static_select
		{name: "static_select with 100 options passes", in: blocks(actions(selectMenu("s", 100)))},
		{name: "static_select with 101 options is rejected", in: blocks(actions(selectMenu("s", 101))), path: "blocks[0].elements[0].options", reason: "at most 100 items"},
		{name: "static_select with 0 options is rejected", in: blocks(actions(selectMenu("s", 0))), path: "blocks[0].elements[0].options", reason: "at least 1 item"},
		{name: "static_select without options is rejected", in: sel(), path: "blocks[0].elements[0].options", reason: "is required"},
		{name: "static_select without actionId is rejected", in: blocks(actions(obj("type", "static_select", "options", arr(opt("a", "a"))))), path: "blocks[0].elements[0].actionId", reason: "is required"},
		{name: "static_select placeholder of 150 characters passes", in: sel("placeholder", nchars(150), "options", arr(opt("a", "a")))},
		{name: "static_select placeholder of 151 characters is rejected", in: sel("placeholder", nchars(151), "options", arr(opt("a", "a"))), path: "blocks[0].elements[0].placeholder", reason: "at most 150 characters"},
		{name: "static_select with confirm passes", in: sel("options", arr(opt("a", "a")), "confirm", confirmObj())},
		{name: "static_select initialOption is rejected", in: sel("options", arr(opt("a", "a")), "initialOption", opt("a", "a")), path: "blocks[0].elements[0]"},
		{name: "option text of 75 characters passes", in: sel("options", arr(opt(nchars(75), "a")))},
		{name: "option text of 76 characters is rejected", in: sel("options", arr(opt(nchars(76), "a"))), path: "blocks[0].elements[0].options[0].text", reason: "at most 75 characters"},
		{name: "option value of 150 characters passes", in: sel("options", arr(opt("a", nchars(150))))},
		{name: "option value of 151 characters is rejected", in: sel("options", arr(opt("a", "x"), opt("a", nchars(151)))), path: "blocks[0].elements[0].options[1].value", reason: "at most 150 characters"},
		{name: "option empty value is rejected", in: sel("options", arr(opt("a", ""))), path: "blocks[0].elements[0].options[0].value", reason: "must not be empty"},
		{name: "option without text is rejected", in: sel("options", arr(obj("value", "v"))), path: "blocks[0].elements[0].options[0].text", reason: "is required"},
		{name: "option text object is rejected", in: sel("options", arr(obj("text", plainText("a"), "value", "v"))), path: "blocks[0].elements[0].options[0].text", reason: "must be a string"},
		{name: "option duplicate value is rejected", in: sel("options", arr(opt("a", "v"), opt("b", "w"), opt("c", "v"))), path: "blocks[0].elements[0].options[2].value", reason: "unique within the element"},
		{name: "option values may repeat across elements", in: blocks(actions(selectMenu("a", 3), selectMenu("b", 3)))},

		// overflow
		{name: "overflow with 5 options passes", in: blocks(actions(overflowMenu("o", 5)))},
		{name: "overflow with 6 options is rejected", in: blocks(actions(overflowMenu("o", 6))), path: "blocks[0].elements[0].options", reason: "at most 5 items"},
		{name: "overflow with 0 options is rejected", in: blocks(actions(overflowMenu("o", 0))), path: "blocks[0].elements[0].options", reason: "at least 1 item"},
		{name: "overflow with placeholder is rejected", in: blocks(actions(obj("type", "overflow", "actionId", "o", "placeholder", "p", "options", arr(opt("a", "a"))))), path: "blocks[0].elements[0]"},
		{name: "overflow duplicate option value is rejected", in: blocks(actions(obj("type", "overflow", "actionId", "o", "options", arr(opt("a", "a"), opt("b", "a"))))), path: "blocks[0].elements[0].options[1].value", reason: "unique"},

		// First problem wins.
		{name: "first problem in document order is reported", in: blocks(header(""), header(nchars(151))), path: "blocks[0].text"},
		{name: "count of an array is checked before its elements", in: blocks(fields(append([]any{field("", "")}, rep(10, same(field("l", "v")))...)...)), path: "blocks[0].fields"},
	}
}

func TestValidate(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			p := policy(true)
			if c.pol != nil {
				p = *c.pol
			}
			out, err := Validate([]byte(c.in), p)
			if c.path == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				if !json.Valid(out) {
					t.Fatalf("output is not JSON: %q", out)
				}
				again, err := Validate(out, p)
				if err != nil || string(again) != string(out) {
					t.Fatalf("output does not re-validate to itself: %v", err)
				}
				return
			}
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("want *Error at %s, got %v (output %.80q)", c.path, err, out)
			}
			if out != nil {
				t.Errorf("output on error: %q", out)
			}
			if ve.Path != c.path {
				t.Errorf("path = %q, want %q (reason %q)", ve.Path, c.path, ve.Reason)
			}
			if !strings.Contains(ve.Reason, c.reason) {
				t.Errorf("reason = %q, want it to contain %q", ve.Reason, c.reason)
			}
			if ve.Error() != ve.Path+": "+ve.Reason {
				t.Errorf("Error() = %q", ve.Error())
			}
			if s := echoed([]byte(c.in), ve.Error()); s != "" {
				t.Errorf("error %q echoes input %q", ve.Error(), s)
			}
		})
	}
}

// TestCompactOutput checks that accepted input comes back compact and
// otherwise unchanged: key order, number spelling and string escapes are
// kept as written.
func TestCompactOutput(t *testing.T) {
	in := " [\n  {\"type\": \"header\", \"text\": \"a \\u00e9 \\\" \\/\"},\n\t{\"type\":\"metrics\",\"items\":[{\"primary\":true,\"value\":1.50E+2,\"label\":\"l\",\"key\":\"k\"}]}\n] "
	want := `[{"type":"header","text":"a \u00e9 \" \/"},{"type":"metrics","items":[{"primary":true,"value":1.50E+2,"label":"l","key":"k"}]}]`
	out, err := Validate([]byte(in), policy(true))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

// TestOutputDoesNotAliasInput guards callers that reuse request buffers.
func TestOutputDoesNotAliasInput(t *testing.T) {
	in := []byte(blocks(divider()))
	out, err := Validate(in, policy(true))
	if err != nil {
		t.Fatal(err)
	}
	in[2] = 'X'
	if string(out) != blocks(divider()) {
		t.Fatalf("output changed with the input: %s", out)
	}
}

func TestErrorNeverQuotesValues(t *testing.T) {
	secret := "sk_live_" + ascii(60)
	for _, in := range []string{
		blocks(header(secret + nchars(200))),
		blocks(obj("type", "divider", "blockId", secret)),
		blocks(section("<" + secret + ">")),
		blocks(list(listItem("url", "http://"+secret))),
		blocks(obj("type", secret)),
		blocks(metrics(metric("k", "format", "currency", "currency", secret))),
		blocks(image(secret)),
		blocks(table(cols("a"), arr(obj("a", secret+"\x00")))),
		`[{"type":"divider","` + secret + `":1}]`,
	} {
		_, err := Validate([]byte(in), policy(true))
		if err == nil {
			t.Fatalf("want an error for %s", in)
		}
		if strings.Contains(err.Error(), "sk_live") {
			t.Errorf("error %q quotes the input", err)
		}
	}
}

// echoed returns a run of at least echoLen bytes of in that appears in msg,
// or "". Key names of at most 40 characters may be named in paths, so the
// bound sits above that.
func echoed(in []byte, msg string) string {
	const echoLen = 48
	for i := 0; i+echoLen <= len(in); i++ {
		if strings.Contains(msg, string(in[i:i+echoLen])) {
			return string(in[i : i+echoLen])
		}
	}
	return ""
}

// TestErrorsNameNoSubmittedKey: a key is input too, so no error names one
// the schema does not (docs/decisions.md "Request bodies").
func TestErrorsNameNoSubmittedKey(t *testing.T) {
	const key = "zzSentinelKey"
	table := func(row string) string {
		return `[{"type":"table","columns":[{"key":"` + key + `","label":"A","align":"left"}],"rows":[` + row + `]}]`
	}
	tests := []struct{ name, in, path string }{
		{"an unknown key of a block is not named", `[{"type":"divider","` + key + `":1}]`, "blocks[0]"},
		{"an unknown key of a text object is not named", `[{"type":"section","text":{"type":"plain","text":"x","` + key + `":1}}]`, "blocks[0].text"},
		{"an undeclared row key is not named", table(`{"` + key + `x":"a"}`), "blocks[0].rows[0]"},
		{"a duplicated row key is not named", table(`{"` + key + `":"a","` + key + `":"b"}`), "blocks[0].rows[0]"},
		{"a row cell that is not a string does not name its column key", table(`{"` + key + `":1}`), "blocks[0].rows[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate([]byte(tt.in), Policy{})
			var ve *Error
			if !errors.As(err, &ve) || ve.Path != tt.path {
				t.Fatalf("got %v, want an error at %s", err, tt.path)
			}
			if strings.Contains(ve.Error(), key) {
				t.Fatalf("error %q names the submitted key", ve.Error())
			}
		})
	}
}
