package e2e

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
)

// Incoming webhooks: docs/api.md "Incoming webhooks", "Incoming webhook states", "Errors" and "Limits", and the
// operator routes of OPERATIONS.md section 2.

var webhookScopes = append([]string{"incoming-webhook"}, baseScopes...)

// webhookKit registers a Kit whose manifest allows incoming webhooks.
func (w *Workspace) webhookKit(t testing.TB, maxPerInstallation int, scopes ...string) *Kit {
	t.Helper()
	if scopes == nil {
		scopes = webhookScopes
	}
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: scopes}
	k.Manifest = manifest(k.Slug, k.Version, scopes)
	if maxPerInstallation > 0 {
		k.Manifest["incomingWebhooks"] = map[string]any{"maxPerInstallation": maxPerInstallation}
	}
	r := w.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	return k
}

// Hook is a created webhook: its id and its secret URL, relative to the
// server (/hooks/v1/...).
type Hook struct {
	ID, Path, Conv string
	In             *Install
}

// createHook asks the operator for a webhook; it returns the raw answer.
func (in *Install) createHook(t testing.TB, convID, userID string) *Resp {
	t.Helper()
	return in.W.S.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/webhooks", map[string]any{
		"conversationId": convID, "createdByUserId": userID,
	})
}

// hook creates a webhook into convID as the workspace admin and checks the
// answer of OPERATIONS.md section 2.
func (in *Install) hook(t testing.TB, convID string) *Hook {
	t.Helper()
	r := in.createHook(t, convID, in.W.Admin.ID)
	want(t, r, 201)
	h := &Hook{ID: r.Str("webhook.id"), Conv: convID, In: in}
	if !isUUID(h.ID) || r.Str("webhook.conversationId") != convID {
		t.Fatalf("webhook must have a UUID id and the conversationId%s", r)
	}
	parseTime(t, "webhook.createdAt", r.Str("webhook.createdAt"))
	url := r.Str("url")
	prefix := in.W.S.URL + "/hooks/v1/" + in.ID + "/" + h.ID + "/"
	if !strings.HasPrefix(url, prefix) || len(url) <= len(prefix) || strings.Contains(url[len(prefix):], "/") {
		t.Fatalf("url = %q, want {hooks_url}/v1/{installationId}/{webhookId}/{secret}%s", url, r)
	}
	h.Path = url[len(in.W.S.URL):]
	return h
}

// post sends body to the webhook URL.
func (h *Hook) post(t testing.TB, body any) *Resp {
	t.Helper()
	return h.In.W.S.do(t, "POST", h.Path, "", body, nil)
}

// webhookEnv is a workspace with a channel of every member, a Kit that
// allows max webhooks, and its installation (the bot is not in the channel
// yet: creating a webhook adds it).
func webhookEnv(t testing.TB, s *Server, max int) (*Workspace, Conv, *Install) {
	t.Helper()
	w := newWorkspace(t, s)
	c := w.channel(t, "public", w.members()...)
	in := w.install(t, w.webhookKit(t, max))
	return w, c, in
}

// history returns the channel's messages as the bot sees them, newest first.
func history(t testing.TB, in *Install, convID string) []map[string]any {
	t.Helper()
	r := in.api(t, "GET", "/conversations/"+convID+"/messages?limit=200", nil)
	want(t, r, 200)
	var out []map[string]any
	for _, m := range jarr(r.JSON, "messages") {
		out = append(out, m.(map[string]any))
	}
	return out
}

func TestWebhooks_Create(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w, c, in := webhookEnv(t, s, 2)

	t.Run("the URL is returned and the Kit bot is added to the channel", func(t *testing.T) {
		h := in.hook(t, c.ID)
		r := in.api(t, "GET", "/installation", nil)
		want(t, r, 200)
		if !sameSet(strs(jarr(r.JSON, "installation.channelIds")), []string{c.ID}) {
			t.Fatalf("installation.channelIds must hold the webhook's channel%s", r)
		}
		if r := h.post(t, map[string]any{"text": "first"}); r.Status != 200 || r.Get("ok") != true {
			t.Fatalf("want 200 {ok: true}%s", r)
		}
	})

	for _, tc := range []struct {
		name   string
		user   func() string
		status int
		code   string
	}{
		{"a member cannot create a webhook", func() string { return w.Mem.ID }, 403, "forbidden"},
		{"a guest cannot create a webhook", func() string { return w.Guest.ID }, 403, "forbidden"},
		{"an unknown creator is not found", newUUID, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, in.createHook(t, c.ID, tc.user()), tc.status, tc.code)
		})
	}

	t.Run("the creator must be a member of the channel", func(t *testing.T) {
		other := w.channel(t, "public", w.Owner.ID, w.Mem.ID)
		wantError(t, in.createHook(t, other.ID, w.Admin.ID), 403, "forbidden")
		// The owner is a member: allowed.
		r := in.createHook(t, other.ID, w.Owner.ID)
		want(t, r, 201)
		want(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+r.Str("webhook.id"), nil), 200)
	})

	t.Run("a creator of another workspace is not found", func(t *testing.T) {
		w2 := newWorkspace(t, s)
		wantError(t, in.createHook(t, c.ID, w2.Admin.ID), 404, "not_found")
	})

	t.Run("the manifest must request bot scope incoming-webhook", func(t *testing.T) {
		plain := w.install(t, w.kit(t, baseScopes...))
		r := plain.createHook(t, c.ID, w.Admin.ID)
		wantError(t, r, 403, "missing_scope")
		if got := r.Header.Get("X-Service-Required-Scope"); got != "incoming-webhook" {
			t.Errorf("X-Service-Required-Scope = %q, want incoming-webhook%s", got, r)
		}
		// docs/webhooks.md: the scope is checked before the creator.
		for _, creator := range []string{newUUID(), in.ID} {
			r := plain.createHook(t, c.ID, creator)
			wantError(t, r, 403, "missing_scope")
			if got := r.Header.Get("X-Service-Required-Scope"); got != "incoming-webhook" {
				t.Errorf("unknown creator: X-Service-Required-Scope = %q, want incoming-webhook%s", got, r)
			}
		}
	})

	t.Run("bad bodies name the field", func(t *testing.T) {
		wantValidation(t, in.W.S.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/webhooks", map[string]any{"createdByUserId": w.Admin.ID}), "conversationId")
		wantValidation(t, in.W.S.ops(t, "POST", "/ops/v1/installations/"+in.ID+"/webhooks", map[string]any{"conversationId": c.ID}), "createdByUserId")
	})

	t.Run("an unknown installation or channel is not found", func(t *testing.T) {
		wantError(t, s.ops(t, "POST", "/ops/v1/installations/"+newUUID()+"/webhooks", map[string]any{"conversationId": c.ID, "createdByUserId": w.Admin.ID}), 404, "not_found")
		wantError(t, in.createHook(t, newUUID(), w.Admin.ID), 404, "not_found")
		wantError(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+newUUID(), nil), 404, "not_found")
	})
}

// maxPerInstallation counts active webhooks: past it 409 conflict; a
// revoked or disabled webhook frees its place.
func TestWebhooks_MaxPerInstallation(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w, c, in := webhookEnv(t, s, 2)
	a := in.hook(t, c.ID)
	in.hook(t, c.ID)
	wantError(t, in.createHook(t, c.ID, w.Admin.ID), 409, "conflict")

	want(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+a.ID, nil), 200)
	in.hook(t, c.ID)
	wantError(t, in.createHook(t, c.ID, w.Admin.ID), 409, "conflict")

	// A webhook disabled by archiving its channel (found out by a post)
	// frees its place too.
	archived := w.channel(t, "public", w.members()...)
	in2 := w.install(t, w.webhookKit(t, 1))
	h := in2.hook(t, archived.ID)
	wantError(t, in2.createHook(t, c.ID, w.Admin.ID), 409, "conflict")
	want(t, s.ops(t, "POST", "/ops/v1/conversations/"+archived.ID+"/archive", nil), 200)
	wantError(t, h.post(t, map[string]any{"text": "x"}), 410, "gone")
	in2.hook(t, c.ID)
}

func TestWebhooks_Post(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	_, c, in := webhookEnv(t, s, 5)
	h := in.hook(t, c.ID)

	t.Run("a post appears in the channel as the Kit bot", func(t *testing.T) {
		r := h.post(t, map[string]any{"text": "deploy finished"})
		want(t, r, 200)
		if r.Get("ok") != true {
			t.Fatalf("want {ok: true}%s", r)
		}
		msgs := history(t, in, c.ID)
		if len(msgs) == 0 {
			t.Fatal("no message in the channel")
		}
		checkMessage(t, msgs[0], c.ID, in.BotID, "deploy finished")
	})

	t.Run("other keys are ignored: it always posts into its own channel as the bot", func(t *testing.T) {
		other := in.W.channel(t, "public", in.W.members()...)
		in.addChannel(t, other.ID)
		r := h.post(t, map[string]any{"text": "only here", "channel": other.ID, "conversationId": other.ID,
			"username": "someone", "icon_url": "https://example.com/x.png"})
		want(t, r, 200)
		checkMessage(t, history(t, in, c.ID)[0], c.ID, in.BotID, "only here")
		if n := len(history(t, in, other.ID)); n != 0 {
			t.Fatalf("the other channel got %d messages", n)
		}
	})

	t.Run("the Content-Type is not looked at", func(t *testing.T) {
		r := s.do(t, "POST", h.Path, "", raw(`{"text":"from curl"}`), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		want(t, r, 200)
	})

	t.Run("interactive elements are always removed", func(t *testing.T) {
		r := h.post(t, map[string]any{"text": "deploy", "blocks": []any{headerBlock, actionsBlock, buttonSection}})
		want(t, r, 200)
		m := history(t, in, c.ID)[0]
		if got := strings.Join(blockTypes(t, m), ","); got != "header,section" {
			t.Fatalf("stored blocks %s, want header,section", got)
		}
	})

	t.Run("an image block may only show a file visible in the channel", func(t *testing.T) {
		r := h.post(t, map[string]any{"text": "img", "blocks": []any{map[string]any{"type": "image", "fileId": newUUID(), "alt": "chart"}}})
		wantValidation(t, r, "blocks[0].fileId")
	})

	const sentinel = "SENTINEL-7f3a"
	long := strings.Repeat("a", 4000)
	for _, tc := range []struct {
		name string
		body any
		path string
	}{
		{"text is required", map[string]any{"blocks": []any{}}, "text"},
		{"text must not be empty", map[string]any{"text": ""}, "text"},
		{"text must not be blank", map[string]any{"text": " \n\t "}, "text"},
		{"text of 4,001 characters is rejected", map[string]any{"text": long + "é"}, "text"},
		{"text must be a string", map[string]any{"text": 12}, "text"},
		{"blocks must be valid", map[string]any{"text": "x", "blocks": []any{map[string]any{"type": "header", "text": sentinel + strings.Repeat("h", 150)}}}, "blocks[0].text"},
		{"more than 50 blocks are rejected", map[string]any{"text": "x", "blocks": dividers(51)}, "blocks"},
		{"the body must be a JSON object", raw(`["` + sentinel + `"]`), ""},
		{"the body must be JSON", raw(sentinel), ""},
		{"the body is required", raw(""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(history(t, in, c.ID))
			wantValidation(t, h.post(t, tc.body), tc.path, sentinel)
			if after := len(history(t, in, c.ID)); after != before {
				t.Fatalf("a 400 posted a message (%d -> %d)", before, after)
			}
		})
	}

	t.Run("text of 4,000 characters is accepted", func(t *testing.T) {
		want(t, h.post(t, map[string]any{"text": strings.Repeat("é", 4000)}), 200)
	})
}

// docs/api.md "Incoming webhooks" and "Limits": at most 64 KB of body. 64 KB passes when otherwise
// valid; one byte more is 413 payload_too_large, answered from the
// Content-Length without reading the body.
func TestWebhooks_BodyLimit(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	_, c, in := webhookEnv(t, s, 1)
	h := in.hook(t, c.ID)
	body := func(size int) raw {
		head := `{"text":"big","pad":"`
		return raw(head + strings.Repeat("p", size-len(head)-2) + `"}`)
	}
	want(t, h.post(t, body(64<<10)), 200)
	r := h.post(t, body(64<<10+1))
	wantError(t, r, 413, "payload_too_large")
	if n := len(history(t, in, c.ID)); n != 1 {
		t.Fatalf("the channel has %d messages, want 1", n)
	}

	t.Run("a huge body is refused without being read", func(t *testing.T) {
		// 64 MiB announced, 1 KiB sent: an answer can only come from the
		// Content-Length.
		req, err := http.NewRequest("POST", s.URL+h.Path, strings.NewReader(strings.Repeat("x", 1024)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 64 << 20
		req.Body = &slowBody{data: []byte(strings.Repeat("x", 1024))}
		cl := &http.Client{Timeout: 10 * time.Second}
		res, err := cl.Do(req)
		if err != nil {
			t.Fatalf("no answer before the body was sent: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != 413 {
			t.Fatalf("status %d, want 413", res.StatusCode)
		}
	})
}

// slowBody sends data, then blocks until closed: a client that announced
// more than it sends.
type slowBody struct {
	data []byte
	done chan struct{}
	sent bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		b.done = make(chan struct{})
		return copy(p, b.data), nil
	}
	<-b.done
	return 0, fmt.Errorf("closed")
}

func (b *slowBody) Close() error {
	if b.done != nil {
		select {
		case <-b.done:
		default:
			close(b.done)
		}
	}
	return nil
}

// docs/api.md "Incoming webhook states" and "Incoming webhooks": revoked, unknown, wrong secret and uninstalled answer
// the same 404: same status, body shape, code, message and headers.
func TestWebhooks_SameNotFound(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w, c, in := webhookEnv(t, s, 5)
	live := in.hook(t, c.ID)
	revoked := in.hook(t, c.ID)
	want(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+revoked.ID, nil), 200)
	in2 := w.install(t, w.webhookKit(t, 1))
	uninstalled := in2.hook(t, c.ID)
	want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+in2.ID, nil), 200)

	seg := strings.Split(live.Path, "/") // "", hooks, v1, inst, hook, secret
	secret := seg[5]
	paths := []struct{ name, path string }{
		{"revoked", revoked.Path},
		{"unknown webhook", "/hooks/v1/" + in.ID + "/" + newUUID() + "/" + secret},
		{"wrong secret", "/hooks/v1/" + in.ID + "/" + live.ID + "/" + randToken()},
		{"uninstalled", uninstalled.Path},
		{"another installation's id", "/hooks/v1/" + in2.ID + "/" + live.ID + "/" + secret},
		{"malformed ids", "/hooks/v1/x/y/" + secret},
	}
	var first *Resp
	for _, p := range paths {
		r := s.do(t, "POST", p.path, "", map[string]any{"text": "hello"}, nil)
		wantError(t, r, 404, "not_found")
		noEcho(t, r, secret)
		if first == nil {
			first = r
			continue
		}
		if r.Str("message") != first.Str("message") {
			t.Errorf("%s: message %q, want %q as for %s", p.name, r.Str("message"), first.Str("message"), paths[0].name)
		}
		if got, want := headerNames(r.Header), headerNames(first.Header); got != want {
			t.Errorf("%s: headers %s, want %s", p.name, got, want)
		}
		if r.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
			t.Errorf("%s: Content-Type differs", p.name)
		}
	}
	// The live webhook still works, and a 400 for it does not leak to the
	// others: an invalid body on a not-found URL is still the 404.
	want(t, live.post(t, map[string]any{"text": "still here"}), 200)
	wantError(t, s.do(t, "POST", revoked.Path, "", map[string]any{"text": ""}, nil), 404, "not_found")
	// Revoking again is idempotent.
	want(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+revoked.ID, nil), 200)
}

func headerNames(h http.Header) string {
	var names []string
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// docs/api.md "Incoming webhook states": a webhook whose channel was archived, or whose Kit bot was
// removed from it, answers 410 gone, and stays so.
func TestWebhooks_Disabled(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)

	t.Run("channel archived", func(t *testing.T) {
		_, c, in := webhookEnv(t, s, 1)
		h := in.hook(t, c.ID)
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/archive", nil), 200)
		for i := 0; i < 2; i++ {
			wantError(t, h.post(t, map[string]any{"text": "x"}), 410, "gone")
		}
		// A revoked disabled webhook is just revoked.
		want(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+h.ID, nil), 200)
		wantError(t, h.post(t, map[string]any{"text": "x"}), 404, "not_found")
	})

	// SPEC.md 3: the archive disables the webhook, and docs/decisions.md
	// "Incoming webhooks": its state comes before the body. A bad body is
	// 410 like a bad block, which the conversation judges after the
	// archive, even when no post has found the archive out yet.
	t.Run("channel archived: a bad body is 410 too", func(t *testing.T) {
		_, c, in := webhookEnv(t, s, 1)
		h := in.hook(t, c.ID)
		want(t, s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/archive", nil), 200)
		wantError(t, h.post(t, map[string]any{"text": " "}), 410, "gone")
		wantError(t, h.post(t, map[string]any{"text": "x", "blocks": []any{map[string]any{"type": "nope"}}}), 410, "gone")
		wantError(t, h.post(t, map[string]any{"text": "x"}), 410, "gone")
	})

	t.Run("Kit bot removed from the channel, even when added again", func(t *testing.T) {
		_, c, in := webhookEnv(t, s, 1)
		h := in.hook(t, c.ID)
		want(t, h.post(t, map[string]any{"text": "before"}), 200)
		want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID+"/channels/"+c.ID, nil), 200)
		wantError(t, h.post(t, map[string]any{"text": "x"}), 410, "gone")
		in.addChannel(t, c.ID)
		wantError(t, h.post(t, map[string]any{"text": "x"}), 410, "gone")
		if n := len(history(t, in, c.ID)); n != 1 {
			t.Fatalf("the channel has %d messages, want 1", n)
		}
	})

	t.Run("Kit bot removed and added again before any post", func(t *testing.T) {
		_, c, in := webhookEnv(t, s, 1)
		h := in.hook(t, c.ID)
		want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID+"/channels/"+c.ID, nil), 200)
		in.addChannel(t, c.ID)
		wantError(t, h.post(t, map[string]any{"text": "x"}), 410, "gone")
	})

	t.Run("uninstall disables every webhook of the installation: 404", func(t *testing.T) {
		w, c, in := webhookEnv(t, s, 3)
		other := w.channel(t, "public", w.members()...)
		hooks := []*Hook{in.hook(t, c.ID), in.hook(t, other.ID)}
		want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID, nil), 200)
		for _, h := range hooks {
			wantError(t, h.post(t, map[string]any{"text": "x"}), 404, "not_found")
		}
	})
}

// docs/api.md "Limits": 1 request/second sustained, burst 5, per webhook; 429 with
// Retry-After posts nothing; the test clock brings it back.
func TestWebhooks_RateLimit(t *testing.T) {
	s := startServerOpts(t, ServerOpts{Limits: "spec"})
	_, c, in := webhookEnv(t, s, 2)
	h := in.hook(t, c.ID)
	other := in.hook(t, c.ID)

	ok, limited, _, elapsed := burst(t, 60, func(i int) *Resp {
		return h.post(t, map[string]any{"text": fmt.Sprintf("burst %d", i)})
	})
	if limited == nil {
		t.Fatalf("60 posts in %v without a 429", elapsed)
	}
	if ok < 5 || ok > allowed(5, 1, elapsed) {
		t.Fatalf("%d posts passed before the 429 in %v, want 5 (burst)", ok, elapsed)
	}
	checkRetryAfter(t, limited, 1)
	if n := len(history(t, in, c.ID)); n != ok {
		t.Fatalf("the channel has %d messages, want %d: a 429 posts nothing", n, ok)
	}
	// Per webhook: another webhook of the same channel is not limited.
	want(t, other.post(t, map[string]any{"text": "other"}), 200)

	r := s.ops(t, "POST", "/ops/v1/clock/advance", map[string]any{"seconds": 1})
	want(t, r, 200)
	want(t, h.post(t, map[string]any{"text": "after a second"}), 200)
}

// SPEC.md 5 and 9: a new manifest version that drops a scope takes it from
// existing credentials at once. A webhook URL is the credential of bot
// scope incoming-webhook: once the installed version no longer requests
// it, its webhooks answer the one 404, as an uninstalled Kit's do.
func TestWebhooks_EndWhenTheInstalledVersionDropsTheScope(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w, c, in := webhookEnv(t, s, 2)
	h := in.hook(t, c.ID)
	want(t, h.post(t, map[string]any{"text": "before"}), 200)

	want(t, w.uploadVersion(t, manifest(in.Kit.Slug, "1.0.1", baseScopes), true), 201)
	r := s.ops(t, "POST", "/ops/v1/workspaces/"+w.ID+"/installations", map[string]any{"kitId": in.Kit.ID})
	want(t, r, 201)
	if v := r.Str("installation.kit.version"); v != "1.0.1" {
		t.Fatalf("installation not updated to 1.0.1%s", r)
	}
	wantError(t, in.createHook(t, c.ID, w.Admin.ID), 403, "missing_scope")
	wantError(t, h.post(t, map[string]any{"text": "after the scope was dropped"}), 404, "not_found")
	if n := len(history(t, in, c.ID)); n != 1 {
		t.Fatalf("the channel has %d messages, want only the one posted before the scope was dropped", n)
	}
}

// SPEC.md 3: a webhook whose channel was archived is disabled, and
// docs/webhooks.md: only active webhooks count against maxPerInstallation.
// Its place is free at once, though no post found out about the archive.
func TestWebhooks_AnArchivedChannelsWebhookFreesItsPlace(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	w, c, in := webhookEnv(t, s, 1)
	h := in.hook(t, c.ID)
	other := w.channel(t, "public", w.members()...)
	wantError(t, in.createHook(t, other.ID, w.Admin.ID), 409, "conflict")

	want(t, s.ops(t, "POST", "/ops/v1/conversations/"+c.ID+"/archive", nil), 200)
	want(t, in.createHook(t, other.ID, w.Admin.ID), 201)
	wantError(t, h.post(t, map[string]any{"text": "into the archive"}), 410, "gone")
}

// docs/api.md "States and transitions", Installation: once an uninstall is answered, the
// installation deletes its credentials, webhooks and the rest
// (docs/credentials.md "Purge on uninstall"); what it answers stays: its
// tokens 401 invalid_token, its webhooks the one 404, the operator's
// revocation of its tokens and webhooks 404 not_found.
func TestUninstall_PurgeKeepsTheAnswers(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	_, c, in := webhookEnv(t, s, 3)
	hooks := []*Hook{in.hook(t, c.ID), in.hook(t, c.ID)}
	want(t, hooks[0].post(t, map[string]any{"text": "before"}), 200) // known to the hooks host
	second := in.newToken(t)
	want(t, s.ops(t, "DELETE", "/ops/v1/installations/"+in.ID, nil), 200)

	answers := func(t *testing.T) {
		t.Helper()
		for _, tok := range []string{in.Token, second} {
			r := s.api(t, tok, "GET", "/auth/test", nil, nil)
			wantError(t, r, 401, "invalid_token")
			wantError(t, s.ops(t, "POST", "/ops/v1/tokens/revoke", map[string]any{"token": tok}), 404, "not_found")
		}
		for _, h := range hooks {
			wantError(t, h.post(t, map[string]any{"text": "after"}), 404, "not_found")
			wantError(t, s.ops(t, "DELETE", "/ops/v1/webhooks/"+h.ID, nil), 404, "not_found")
		}
	}
	answers(t)
	// The purge deletes the webhooks' locators: the operator's revocation
	// then no longer finds their installation.
	eventually.True(t, "the purge of the uninstalled installation", func() bool {
		r := s.ops(t, "DELETE", "/ops/v1/webhooks/"+hooks[1].ID, nil)
		return r.Status == 404 && r.Str("message") == "webhook not found"
	})
	answers(t)
}
