package api

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr/kiterrtest"
)

// requestWithQuery returns a RequestCtx for GET uri.
func requestWithQuery(uri string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	return ctx
}

func cursorOf(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestParsePage(t *testing.T) {
	// A cursor of exactly 512 characters: base64url of 384 bytes.
	long512 := cursorOf("users|" + strings.Repeat("7", 384-len("users|")))
	long514 := cursorOf("users|" + strings.Repeat("7", 385-len("users|")))
	if len(long512) != 512 || len(long514) != 514 {
		t.Fatalf("cursor lengths %d, %d", len(long512), len(long514))
	}
	tests := []struct {
		name      string
		query     string
		list      string
		max       int
		wantPath  string // "-": no error
		wantLimit int
		wantPos   string
	}{
		{"no parameters: default limit, first page", "", "users", 200, "-", 50, ""},
		{"limit 1 is the smallest", "limit=1", "users", 200, "-", 1, ""},
		{"limit 200 is the largest", "limit=200", "users", 200, "-", 200, ""},
		{"limit 0 is refused", "limit=0", "users", 200, "limit", 0, ""},
		{"limit 201 is refused", "limit=201", "users", 200, "limit", 0, ""},
		{"a negative limit is refused", "limit=-1", "users", 200, "limit", 0, ""},
		{"a fractional limit is refused", "limit=1.5", "users", 200, "limit", 0, ""},
		{"a non-numeric limit is refused", "limit=ten", "users", 200, "limit", 0, ""},
		{"an empty limit is refused", "limit=", "users", 200, "limit", 0, ""},
		{"a plus sign is refused", "limit=%2B5", "users", 200, "limit", 0, ""},
		{"a leading zero is refused", "limit=05", "users", 200, "limit", 0, ""},
		{"a huge limit is refused", "limit=99999999999999999999", "users", 200, "limit", 0, ""},
		{"developer logs allow at most 100", "limit=101", "logs", 100, "limit", 0, ""},
		{"developer logs accept 100", "limit=100", "logs", 100, "-", 100, ""},
		{"a cursor of this list gives its position", "cursor=" + cursorOf("users|abc"), "users", 200, "-", 50, "abc"},
		{"limit and cursor together", "limit=7&cursor=" + cursorOf("users|abc"), "users", 200, "-", 7, "abc"},
		{"a cursor is bound to its list", "cursor=" + cursorOf("messages:a|5"), "messages:b", 200, "cursor", 0, ""},
		{"a cursor of a list whose name extends this one is refused", "cursor=" + cursorOf("users2|abc"), "users", 200, "cursor", 0, ""},
		{"a cursor without a position is refused", "cursor=" + cursorOf("users|"), "users", 200, "cursor", 0, ""},
		{"a cursor that is not base64url is refused", "cursor=%21%21%21%21", "users", 200, "cursor", 0, ""},
		{"a padded base64 cursor is refused", "cursor=" + base64.URLEncoding.EncodeToString([]byte("users|ab")), "users", 200, "cursor", 0, ""},
		{"an empty cursor is refused", "cursor=", "users", 200, "cursor", 0, ""},
		{"a 512-character cursor is accepted", "cursor=" + long512, "users", 200, "-", 50, strings.Repeat("7", 384-len("users|"))},
		{"a cursor over 512 characters is refused", "cursor=" + long514, "users", 200, "cursor", 0, ""},
		{"a limit without a value is refused", "limit", "users", 200, "limit", 0, ""},
		{"a limit given twice is refused", "limit=1&limit=900", "users", 200, "limit", 0, ""},
		{"a limit given twice alike is refused", "limit=5&limit=5", "users", 200, "limit", 0, ""},
		{"a cursor given twice is refused", "cursor=" + cursorOf("users|abc") + "&cursor=" + cursorOf("users|abd"), "users", 200, "cursor", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parsePage(requestWithQuery("/x?"+tt.query), tt.list, tt.max)
			kiterrtest.WantPath(t, err, tt.wantPath)
			if tt.wantPath != "-" {
				return
			}
			if p.limit != tt.wantLimit || p.position != tt.wantPos {
				t.Fatalf("page %+v, want limit %d position %q", p, tt.wantLimit, tt.wantPos)
			}
		})
	}
}

func TestCursorFor(t *testing.T) {
	tests := []struct {
		name     string
		list     string
		position string
		more     bool
		wantNil  bool
	}{
		{"the last page has no cursor", "users", "abc", false, true},
		{"a cursor round-trips through parsePage", "users", "0190a6f2-0000-7000-8000-000000000000", true, false},
		{"a cursor of a list with a colon round-trips", "messages:0190a6f2-0000-7000-8000-000000000000", "42", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cursorFor(tt.list, tt.position, tt.more)
			if tt.wantNil {
				if c != nil {
					t.Fatalf("cursor %q, want nil", *c)
				}
				return
			}
			if c == nil {
				t.Fatal("cursor is nil")
			}
			p, err := parsePage(requestWithQuery("/x?cursor="+*c), tt.list, 200)
			if err != nil || p.position != tt.position {
				t.Fatalf("parsePage: %+v, %v", p, err)
			}
			if _, err := parsePage(requestWithQuery("/x?cursor="+*c), tt.list+"x", 200); err == nil {
				t.Fatal("the cursor was accepted by another list")
			}
		})
	}
}

func TestSeqPosition(t *testing.T) {
	tests := []struct {
		name     string
		position string
		want     uint64
		wantPath string
	}{
		{"the first page starts at the newest", "", 0, "-"},
		{"a sequence number continues before it", "17", 17, "-"},
		{"sequence zero is not a position", "0", 0, "cursor"},
		{"a non-number is not a position", "abc", 0, "cursor"},
		{"a negative number is not a position", "-3", 0, "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := seqPosition(page{limit: 10, position: tt.position})
			kiterrtest.WantPath(t, err, tt.wantPath)
			if got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestIdempotencyKey(t *testing.T) {
	tests := []struct {
		name     string
		set      bool
		value    string
		want     string
		wantPath string
	}{
		{"no header means no key", false, "", "", "-"},
		{"one character is the shortest key", true, "a", "a", "-"},
		{"255 characters is the longest key", true, strings.Repeat("k", 255), strings.Repeat("k", 255), "-"},
		{"256 characters is refused", true, strings.Repeat("k", 256), "", "Idempotency-Key"},
		{"0x21 and 0x7e are printable", true, "!~", "!~", "-"},
		{"every printable ASCII character is accepted", true, printableASCII(), printableASCII(), "-"},
		{"an inner space is refused", true, "a b", "", "Idempotency-Key"},
		{"a tab is refused", true, "a\tb", "", "Idempotency-Key"},
		{"DEL is refused", true, "a\x7fb", "", "Idempotency-Key"},
		{"a non-ASCII character is refused", true, "clé", "", "Idempotency-Key"},
		{"two headers are refused", true, "a\nb", "", "Idempotency-Key"},
		{"two headers with the same key are refused", true, "a\na", "", "Idempotency-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := &fasthttp.RequestCtx{}
			if tt.set {
				// A value with "\n" stands for one header line per part.
				for _, v := range strings.Split(tt.value, "\n") {
					ctx.Request.Header.Add("Idempotency-Key", v)
				}
			}
			got, err := idempotencyKey(ctx)
			kiterrtest.WantPath(t, err, tt.wantPath)
			if got != tt.want {
				t.Fatalf("key %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("an empty header is refused", func(t *testing.T) {
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.Header.Set("Idempotency-Key", "")
		got, err := idempotencyKey(ctx)
		if err == nil && got == "" {
			// The header arrives empty; fasthttp may report it as absent.
			if ctx.Request.Header.Peek("Idempotency-Key") == nil {
				t.Skip("fasthttp reports an empty header as absent; nothing to judge")
			}
		}
		kiterrtest.WantPath(t, err, "Idempotency-Key")
	})
}

func printableASCII() string {
	var b strings.Builder
	for c := byte(0x21); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

func TestMessageText(t *testing.T) {
	tests := []struct {
		name     string
		v        *string
		wantPath string
	}{
		{"text is required", nil, "text"},
		{"empty text is refused", ptr(""), "text"},
		{"blank text is refused", ptr(" \t\n "), "text"},
		{"one character is accepted", ptr("x"), "-"},
		{"8000 characters are accepted", ptr(strings.Repeat("a", 8000)), "-"},
		{"8001 characters are refused", ptr(strings.Repeat("a", 8001)), "text"},
		{"8000 multi-byte characters are accepted", ptr(strings.Repeat("ü", 8000)), "-"},
		{"8001 multi-byte characters are refused", ptr(strings.Repeat("ü", 8001)), "text"},
		{"8000 four-byte characters are accepted", ptr(strings.Repeat("🙂", 8000)), "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { kiterrtest.WantPath(t, messageText(tt.v), tt.wantPath) })
	}
}

func TestRawBlocks(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"absent blocks are none", "", ""},
		{"null blocks are none", "null", ""},
		{"an array is passed on as sent", `[ {"type":"divider"} ]`, `[ {"type":"divider"} ]`},
		{"anything else is passed on for the conversation to judge", `{"type":"divider"}`, `{"type":"divider"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rawBlocks([]byte(tt.raw))
			if string(got) != tt.want || (tt.want == "" && got != nil) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConversationShape(t *testing.T) {
	a, b, c := ids.New(), ids.New(), ids.New()
	members := func(m ...string) *[]string { return &m }
	tests := []struct {
		name       string
		kind, vis  string
		convName   *string
		topic      *string
		members    *[]string
		wantPath   string
		wantReason string
	}{
		{"a named public channel", "channel", "public", ptr("general"), nil, members(a, b), "-", ""},
		{"a channel without members", "channel", "private", ptr("secret"), ptr("t"), members(), "-", ""},
		{"a channel name is optional (OPERATIONS.md: name?)", "channel", "public", nil, nil, members(a), "-", ""},
		{"a channel name must not be blank", "channel", "public", ptr("   "), nil, members(a), "name", ""},
		{"a channel name holds no control character", "channel", "public", ptr("gen\u0000eral"), nil, members(a), "name", ""},
		{"a channel name holds no bidirectional override", "channel", "public", ptr("gen\u202eeral"), nil, members(a), "name", ""},
		{"a topic is one line", "channel", "public", ptr("x"), ptr("one\ntwo"), members(a), "topic", ""},
		{"a channel name of 80 characters is accepted", "channel", "public", ptr(strings.Repeat("n", 80)), nil, members(), "-", ""},
		{"a channel name of 81 characters is refused", "channel", "public", ptr(strings.Repeat("n", 81)), nil, members(), "name", ""},
		{"memberIds is required", "channel", "public", ptr("x"), nil, nil, "memberIds", ""},
		{"a member must be a UUID", "channel", "public", ptr("x"), nil, members(a, "nope"), "memberIds[1]", ""},
		{"a member's id is in lower case, as the API gives it", "channel", "public", ptr("x"), nil, members(a, strings.ToUpper(b)), "memberIds[1]", ""},
		{"a member listed twice is refused", "group", "private", nil, nil, members(a, b, a), "memberIds[2]", ""},
		{"more than 1000 members are refused", "group", "private", nil, nil, manyMembers(1001), "memberIds", ""},
		{"1000 members are accepted", "group", "private", nil, nil, manyMembers(1000), "-", ""},
		{"a dm is private between two", "dm", "private", nil, nil, members(a, b), "-", ""},
		{"a public dm is refused", "dm", "public", nil, nil, members(a, b), "visibility", ""},
		{"a dm of three is refused", "dm", "private", nil, nil, members(a, b, c), "memberIds", ""},
		{"a dm of one is refused", "dm", "private", nil, nil, members(a), "memberIds", ""},
		{"a private group", "group", "private", nil, nil, members(a, b, c), "-", ""},
		{"a public group is refused", "group", "public", nil, nil, members(a), "visibility", ""},
		{"a group name may be given", "group", "private", ptr("team"), nil, members(a), "-", ""},
		{"an empty group name is refused", "group", "private", ptr(""), nil, members(a), "name", ""},
		{"a topic of 250 characters is accepted", "channel", "public", ptr("x"), ptr(strings.Repeat("t", 250)), members(), "-", ""},
		{"a topic of 251 characters is refused", "channel", "public", ptr("x"), ptr(strings.Repeat("t", 251)), members(), "topic", ""},
		{"an empty topic is accepted", "channel", "public", ptr("x"), ptr(""), members(), "-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kiterrtest.WantPath(t, conversationShape(tt.kind, tt.vis, tt.convName, tt.topic, tt.members), tt.wantPath)
		})
	}
}

func manyMembers(n int) *[]string {
	m := make([]string, n)
	for i := range m {
		m[i] = ids.New()
	}
	return &m
}

func TestOptionalEmail(t *testing.T) {
	local := strings.Repeat("a", 64)
	domain := func(n int) string { return strings.Repeat("d", n-4) + ".com" }
	tests := []struct {
		name     string
		v        *string
		wantPath string
	}{
		{"absent is fine", nil, "-"},
		{"a plain address", ptr("ada@example.com"), "-"},
		{"the shortest address", ptr("a@b"), "-"},
		{"254 characters are accepted", ptr(local + "@" + domain(254-65)), "-"},
		{"255 characters are refused", ptr(local + "@" + domain(255-65)), "email"},
		{"two characters are refused", ptr("@b"), "email"},
		{"an empty address is refused", ptr(""), "email"},
		{"an address without @ is refused", ptr("ada.example.com"), "email"},
		{"an address starting with @ is refused", ptr("@example.com"), "email"},
		{"an address ending with @ is refused", ptr("ada@"), "email"},
		{"two @ are refused", ptr("ada@b@example.com"), "email"},
		{"a space is refused", ptr("a da@example.com"), "email"},
		{"a control character is refused", ptr("ada\x01@example.com"), "email"},
		{"DEL is refused", ptr("ada\x7f@example.com"), "email"},
		{"a non-ASCII local part is accepted", ptr("zoë@example.com"), "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { kiterrtest.WantPath(t, optionalEmail(tt.v), tt.wantPath) })
	}
}

func TestVersionShape(t *testing.T) {
	tests := []struct {
		v        string
		wantPath string
	}{
		{"1.0.0", "-"},
		{"0.0.1", "-"},
		{"9999.99999.999999", "-"},
		{"10000.0.0", "version"},
		{"01.0.0", "version"},
		{"1.0", "version"},
		{"1.0.0-beta", "version"},
		{"v1.0.0", "version"},
		{"", "version"},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) { kiterrtest.WantPath(t, versionShape("version", tt.v), tt.wantPath) })
	}
}

func TestIDPosition(t *testing.T) {
	tests := []struct {
		name     string
		position string
		wantPath string
	}{
		{"the first page has no position", "", "-"},
		{"an id is a position", ids.New(), "-"},
		{"a word is not a position", "junk", "cursor"},
		{"a number is not a position", "17", "cursor"},
		{"an upper-case id is not a position", strings.ToUpper(ids.New()), "cursor"},
		{"an id with more after it is not a position", ids.New() + "x", "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kiterrtest.WantPath(t, idPosition(tt.position), tt.wantPath)
		})
	}
}

// TestListLimitIsPlainDecimal: docs/api.md "Lists", a limit is an integer
// in its range written as one: every list route (each reads it through
// parsePage) refuses any other spelling with 400 validation_error at the
// field path limit, and echoes none of it.
func TestListLimitIsPlainDecimal(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	h.clk.Advance(5e9)
	msg := h.do(t, request{method: "POST", path: "/api/v1/messages", token: f.bot, json: map[string]any{"conversationId": f.conv, "text": "parent"}})
	want(t, msg, 201)
	routes := map[string]request{
		"conversations": {method: "GET", path: "/api/v1/conversations", token: f.bot},
		"members":       {method: "GET", path: "/api/v1/conversations/" + f.conv + "/members", token: f.bot},
		"messages":      {method: "GET", path: "/api/v1/conversations/" + f.conv + "/messages", token: f.bot},
		"replies":       {method: "GET", path: "/api/v1/messages/" + msg.str("message.id") + "/replies", token: f.bot},
		"users":         {method: "GET", path: "/api/v1/users", token: f.bot},
		"kit logs":      {method: "GET", path: "/api/v1/dev/kits/" + f.kitID + "/logs", token: f.dev},
		"deliveries":    {method: "GET", path: "/api/v1/dev/installations/" + f.inst + "/deliveries", token: f.dev},
	}
	tests := []struct {
		name   string
		limit  string // as sent in the query
		status int
	}{
		{"a plain decimal limit is read", "5", 200},
		{"a leading zero is refused", "05", 400},
		{"a plus sign is refused", "%2B5", 400},
		{"a decimal point is refused", "5.0", 400},
		{"a leading space is refused", "%205", 400},
		{"a trailing space is refused", "5%20", 400},
		{"hexadecimal is refused", "0x10", 400},
		{"an exponent is refused", "1e2", 400},
		{"a negative zero is refused", "-0", 400},
	}
	for route, rq := range routes {
		for _, tt := range tests {
			t.Run(route+": "+tt.name, func(t *testing.T) {
				rq := rq
				rq.path += "?limit=" + tt.limit
				r := h.do(t, rq)
				if tt.status == 200 {
					want(t, r, 200)
					return
				}
				wantError(t, r, 400, "validation_error")
				if m := r.str("message"); !strings.HasPrefix(m, "limit: ") || strings.Contains(m, tt.limit) {
					t.Fatalf("want the field path limit and no echo: %s", r)
				}
			})
		}
	}
}
