package blocks

import (
	"strings"
	"testing"
)

// benchMessage builds a realistic 50-block message with every block type,
// 5 actions blocks and 20 interactive elements, padded to just under the
// 16 KB limit.
func benchMessage(tb testing.TB) []byte {
	build := func(pad int) string {
		var bs []any
		for i := 0; i < 5; i++ {
			n := itoa(i)
			bs = append(bs,
				obj("type", "header", "blockId", "h"+n, "text", "Quarterly report "+n),
				obj("type", "section", "blockId", "s"+n, "text", mrkdwnText("*Revenue* is _up_ `12%` — see <https://example.com/reports/q"+n+"|the report>, ping <@"+userID+"> in <#"+channelID+">. "+strings.Repeat("Lorem ipsum dolor sit amet. ", pad)),
					"accessory", button("acc"+n, "value", "v"+n, "style", "primary")),
				obj("type", "fields", "fields", arr(
					obj("label", "Owner", "value", "Ada Lovelace"),
					obj("label", "Status", "value", "On track ✅"),
					obj("label", "Due", "value", "2026-03-31"),
					obj("label", "Budget", "value", "€ 120 000"),
				)),
				metrics(
					metric("revenue", "format", "currency", "currency", "EUR"),
					metric("growth", "format", "percent"),
					metric("users", "format", "integer"),
				),
				table(cols("name", "region", "total"), arr(
					obj("name", "Alpha", "region", "EMEA", "total", "1 204"),
					obj("name", "Beta", "region", "APAC", "total", "982"),
					obj("name", "Gamma", "region", "AMER", "total", "2 310"),
				)),
				list(
					listItem("subtitle", "Opened by Grace", "url", "https://example.com/issues/1"),
					listItem("subtitle", "Opened by Linus"),
				),
				obj("type", "context", "elements", arr(plainText("Updated 5 minutes ago"), mrkdwnText("by <@"+userID+">"))),
				divider(),
				image(visibleFile),
				actions(
					button("approve"+n, "style", "primary", "value", "approve"),
					button("reject"+n, "style", "danger", "confirm", confirmObj()),
					selectMenu("pick"+n, 4),
				),
			)
		}
		return blocks(bs...)
	}
	pad := 0
	for len(build(pad+1)) <= MaxBytes {
		pad++
	}
	msg := build(pad)
	if len(msg) < MaxBytes-400 {
		tb.Fatalf("benchmark message is only %d bytes", len(msg))
	}
	return []byte(msg)
}

func BenchmarkValidate50Blocks(b *testing.B) {
	msg := benchMessage(b)
	p := policy(true)
	if _, err := Validate(msg, p); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(msg, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate50BlocksStripped is the same message from a Kit without
// interactivity: every actions block and accessory is removed.
func BenchmarkValidate50BlocksStripped(b *testing.B) {
	msg := benchMessage(b)
	p := policy(false)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(msg, p); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBenchMessageIsValid(t *testing.T) {
	msg := benchMessage(t)
	out, err := Validate(msg, policy(true))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(msg) {
		t.Fatal("compact input must come back unchanged")
	}
	if _, err := Validate(msg, policy(false)); err != nil {
		t.Fatal(err)
	}
}
