package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/kitclient"
)

// The Go client (kitclient) against a real kitd: every Web API method of
// docs/api.md "Endpoints" and kit.access at least once, through a transport that
// puts each exchange through the suite's checks (OpenAPI conformance of the
// client's requests and kitd's answers, secrets), as (*Server).request does.

// recorder is an http.RoundTripper that records each exchange as a Resp.
type recorder struct {
	t      testing.TB
	status []int // every answer's status, in order
}

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	r := &Resp{Method: req.Method, Path: req.URL.RequestURI(), ReqHeader: req.Header.Clone(), ReqBody: reqBody}
	res, err := client.Transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.Body, err = io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(r.Body))
	r.Status, r.Header = res.StatusCode, res.Header
	var v any
	if json.Unmarshal(r.Body, &v) == nil {
		r.JSON = v
	}
	rec.status = append(rec.status, r.Status)
	conformance.check(r)
	noteSecrets(r)
	conformance.report(rec.t, r)
	return res, nil
}

// kitClient is a client of s's Web API with token whose exchanges t checks.
func kitClient(t testing.TB, s *Server, token string, opts ...kitclient.Option) (*kitclient.Client, *recorder) {
	rec := &recorder{t: t}
	hc := &http.Client{Transport: rec, Timeout: client.Timeout}
	return kitclient.New(s.URL+"/api/v1", token, append([]kitclient.Option{kitclient.WithHTTPClient(hc)}, opts...)...), rec
}

// wantAPIError checks that err is a *kitclient.Error with status and code.
func wantAPIError(t testing.TB, what string, err error, status int, code string) *kitclient.Error {
	t.Helper()
	var e *kitclient.Error
	if !errors.As(err, &e) || e.Status != status || e.Code != code {
		t.Fatalf("%s: err = %v, want a *kitclient.Error %d %s", what, err, status, code)
	}
	if e.CorrelationID == "" {
		t.Errorf("%s: the error has no correlation id", what)
	}
	return e
}

// collect drains an iterator; it fails t on an error.
func collect[T any](t testing.TB, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func TestKitClient_EveryMethod(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	ctx := context.Background()
	w := newWorkspace(t, s)
	ch := w.channel(t, "public", w.members()...)
	scopes := append(slices.Clone(webhookScopes), "users:read.email", "files:read", "files:write", "reactions:write", "runs:read")
	in := w.install(t, w.webhookKit(t, 1, scopes...), ch.ID)
	bot, _ := kitClient(t, s, in.Token)

	t.Run("auth, installation, users", func(t *testing.T) {
		at, err := bot.AuthTest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !at.OK || at.TokenType != "bot" || at.InstallationID != in.ID || at.BotID == nil || *at.BotID != in.BotID || at.UserID != nil {
			t.Errorf("auth test %+v", at)
		}
		inst, err := bot.Installation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if inst.ID != in.ID || !slices.Contains(inst.ChannelIDs, ch.ID) || inst.Workspace.ID != w.ID {
			t.Errorf("installation %+v", inst)
		}
		me, err := bot.Me(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if me.User != nil || me.Bot == nil || me.Bot.ID != in.BotID {
			t.Errorf("users/me of a bot token: %+v", me)
		}
		users := collect(t, bot.Users(ctx, 3)) // two pages of the four members
		var got []string
		for _, u := range users {
			got = append(got, u.ID)
		}
		if !sameSet(got, w.members()) {
			t.Errorf("users %v, want %v", got, w.members())
		}
		u, err := bot.User(ctx, w.Admin.ID)
		if err != nil {
			t.Fatal(err)
		}
		if u.Role != "admin" || u.Email != w.Admin.Email {
			t.Errorf("user %+v, want the admin with email (users:read.email)", u)
		}
		_, err = bot.User(ctx, newUUID())
		wantAPIError(t, "an unknown user", err, 404, kitclient.CodeNotFound)
	})

	t.Run("conversations", func(t *testing.T) {
		convs := collect(t, bot.Conversations(ctx, 0))
		if len(convs) != 1 || convs[0].ID != ch.ID {
			t.Fatalf("conversations %+v, want the bot's one channel", convs)
		}
		c, err := bot.Conversation(ctx, ch.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name == nil || *c.Name != ch.Name || c.Kind != "channel" {
			t.Errorf("conversation %+v", c)
		}
		members := collect(t, bot.Members(ctx, ch.ID, 1)) // a page per member
		if len(members) != len(w.members()) {
			t.Errorf("%d members, want %d", len(members), len(w.members()))
		}
	})

	t.Run("messages", func(t *testing.T) {
		top, err := bot.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "deploy started",
			Blocks: []kitclient.Block{{"type": "header", "text": "Deploy"}}})
		if err != nil {
			t.Fatal(err)
		}
		if top.Author.Kind != "bot" || top.Text == nil || *top.Text != "deploy started" || len(top.Blocks) != 1 {
			t.Errorf("posted %+v", top)
		}
		reply, err := bot.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "step 1", ThreadParentID: top.ID})
		if err != nil {
			t.Fatal(err)
		}
		// The same key and content is the stored message (docs/api.md "Idempotency record").
		key := "e2e-" + randHex(8)
		once, err := bot.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "once", IdempotencyKey: key})
		if err != nil {
			t.Fatal(err)
		}
		again, err := bot.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "once", IdempotencyKey: key})
		if err != nil || again.ID != once.ID {
			t.Fatalf("a repeat with the same key: %v, %v; want message %s", again, err, once.ID)
		}
		_, err = bot.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "twice", IdempotencyKey: key})
		wantAPIError(t, "the same key with other content", err, 409, kitclient.CodeIdempotencyConflict)

		got, err := bot.Message(ctx, reply.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ThreadParentID == nil || *got.ThreadParentID != top.ID {
			t.Errorf("reply %+v, want threadParentId %s", got, top.ID)
		}
		replies := collect(t, bot.Replies(ctx, top.ID, 0))
		if len(replies) != 1 || replies[0].ID != reply.ID {
			t.Errorf("replies %+v", replies)
		}
		var history []string
		for m, err := range bot.Messages(ctx, ch.ID, 1) {
			if err != nil {
				t.Fatal(err)
			}
			history = append(history, m.ID)
		}
		if want := []string{once.ID, reply.ID, top.ID}; !slices.Equal(history, want) {
			t.Errorf("history %v, want newest first %v", history, want)
		}

		edited, err := bot.EditMessage(ctx, top.ID, kitclient.EditMessage{Text: "deploy finished"})
		if err != nil {
			t.Fatal(err)
		}
		if *edited.Text != "deploy finished" || len(edited.Blocks) != 1 || edited.EditedAt == nil {
			t.Errorf("an edit without blocks keeps them: %+v", edited)
		}
		edited, err = bot.EditMessage(ctx, top.ID, kitclient.EditMessage{Text: "deploy finished", ClearBlocks: true})
		if err != nil {
			t.Fatal(err)
		}
		if edited.Blocks != nil {
			t.Errorf("ClearBlocks: blocks %v, want null", edited.Blocks)
		}
		for range 2 { // the second delete answers the tombstone again
			tomb, err := bot.DeleteMessage(ctx, reply.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tomb.DeletedAt == nil || tomb.Text != nil {
				t.Errorf("tombstone %+v", tomb)
			}
		}

		_, err = bot.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "x",
			Blocks: []kitclient.Block{{"type": "header", "text": strings.Repeat("h", 151)}}})
		e := wantAPIError(t, "a header of 151 characters", err, 400, kitclient.CodeValidation)
		if e.Path != "blocks[0].text" {
			t.Errorf("validation error path %q, want blocks[0].text (message %q)", e.Path, e.Message)
		}
		_, err = bot.Message(ctx, newUUID())
		wantAPIError(t, "an unknown message", err, 404, kitclient.CodeNotFound)
	})

	t.Run("kit.access, then reactions, files and runs with a user token", func(t *testing.T) {
		secret := in.prepareOAuth(t)
		anon, _ := kitClient(t, s, "")

		// A bot token through the code exchange (an admin approves).
		adminCookie, _ := webSession(t, s, w.Admin.ID)
		g, err := anon.ExchangeCode(ctx, kitclient.CodeExchange{ClientID: in.Kit.ID, ClientSecret: secret,
			Code: approveCode(t, in, adminCookie, "bot", ""), RedirectURI: e2eRedirect})
		if err != nil {
			t.Fatal(err)
		}
		if g.TokenType != "bot" || g.BotID != in.BotID || g.InstallationID != in.ID || !strings.HasPrefix(g.AccessToken, "kbot_") {
			t.Errorf("bot grant %+v", g)
		}

		// A user token, then a refresh.
		cookie, _ := webSession(t, s, w.Mem.ID)
		verifier, challenge := pkce()
		g, err = anon.ExchangeCode(ctx, kitclient.CodeExchange{ClientID: in.Kit.ID, ClientSecret: secret,
			Code: approveCode(t, in, cookie, "user", challenge), RedirectURI: e2eRedirect, CodeVerifier: verifier})
		if err != nil {
			t.Fatal(err)
		}
		if g.TokenType != "user" || g.UserID != w.Mem.ID || g.ExpiresIn <= 0 || !strings.HasPrefix(g.RefreshToken, "kref_") {
			t.Errorf("user grant %+v", g)
		}
		g, err = anon.RefreshToken(ctx, kitclient.RefreshExchange{ClientID: in.Kit.ID, ClientSecret: secret, RefreshToken: g.RefreshToken})
		if err != nil {
			t.Fatal(err)
		}
		_, err = anon.ExchangeCode(ctx, kitclient.CodeExchange{ClientID: in.Kit.ID, ClientSecret: secret,
			Code: "kcode_" + randToken(), RedirectURI: e2eRedirect})
		wantAPIError(t, "an unknown code", err, 400, kitclient.CodeValidation)

		user := bot.WithToken(g.AccessToken)
		me, err := user.Me(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if me.Bot != nil || me.User == nil || me.User.ID != w.Mem.ID {
			t.Errorf("users/me of a user token: %+v", me)
		}
		m, err := user.PostMessage(ctx, kitclient.PostMessage{ConversationID: ch.ID, Text: "react to me"})
		if err != nil {
			t.Fatal(err)
		}
		if err := user.AddReaction(ctx, m.ID, kitclient.Eyes); err != nil {
			t.Fatal(err)
		}
		got, err := user.Message(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Reactions) != 1 || got.Reactions[0].Reaction != kitclient.Eyes || got.Reactions[0].UserIDs[0] != w.Mem.ID {
			t.Errorf("reactions %+v", got.Reactions)
		}
		if err := user.RemoveReaction(ctx, m.ID, kitclient.Eyes); err != nil {
			t.Fatal(err)
		}
		wantAPIError(t, "a bot token adding a reaction", bot.AddReaction(ctx, m.ID, kitclient.Eyes), 403, kitclient.CodeForbidden)

		content := []byte("# notes\nfrom the Go client\n")
		f, err := user.UploadFile(ctx, ch.ID, "notes.md", "text/markdown", content)
		if err != nil {
			t.Fatal(err)
		}
		if f.SizeBytes != int64(len(content)) || f.UploadedByUserID != w.Mem.ID {
			t.Errorf("file %+v", f)
		}
		meta, err := bot.File(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Name != "notes.md" {
			t.Errorf("file %+v", meta)
		}
		fc, err := user.FileContent(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fc.Data, content) || fc.MimeType != "text/markdown" {
			t.Errorf("content %q of type %q", fc.Data, fc.MimeType)
		}

		// A run of no one (runs themselves: e2e/runs_test.go).
		_, err = user.Run(ctx, newUUID())
		wantAPIError(t, "a run", err, 404, kitclient.CodeNotFound)
	})

	t.Run("incoming webhook", func(t *testing.T) {
		h := in.hook(t, ch.ID)
		rec := &recorder{t: t}
		hook := kitclient.NewWebhook(s.URL+h.Path, kitclient.WithHTTPClient(&http.Client{Transport: rec, Timeout: client.Timeout}))
		text := "nightly backup done " + randHex(4)
		if err := hook.Post(ctx, kitclient.WebhookMessage{Text: text, Blocks: []kitclient.Block{{"type": "divider"}}}); err != nil {
			t.Fatal(err)
		}
		page, err := bot.MessagesPage(ctx, ch.ID, kitclient.PageOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) != 1 || *page.Messages[0].Text != text || page.Messages[0].Author.ID != in.BotID {
			t.Errorf("newest message %+v, want the webhook's post by the Kit bot", page.Messages)
		}
		err = hook.Post(ctx, kitclient.WebhookMessage{Text: " "})
		wantAPIError(t, "a blank webhook text", err, 400, kitclient.CodeValidation)
		if strings.Contains(err.Error(), h.Path[strings.LastIndex(h.Path, "/")+1:]) {
			t.Errorf("the error shows the webhook's secret: %v", err)
		}
	})

	t.Run("rotate", func(t *testing.T) {
		old := bot.WithToken(in.newToken(t))
		rot, err := old.RotateToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		parseTime(t, "previousTokenExpiresAt", rot.PreviousTokenExpiresAt)
		if _, err := old.WithToken(rot.Token).AuthTest(ctx); err != nil {
			t.Errorf("the new token: %v", err)
		}
		_, err = old.RotateToken(ctx)
		wantAPIError(t, "rotating a rotated token", err, 409, kitclient.CodeConflict)
	})
}

// With rate limits on, the client spaces its calls by the RateLimit headers
// and waits out each 429's Retry-After: every call of a burst far over the
// budget succeeds, and nothing is posted twice.
func TestKitClient_RateLimits(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "limits.json")
	limits := `{"read": {"capacity": 2, "refill": 1, "windowSeconds": 1}, "post_message": {"capacity": 1, "refill": 1, "windowSeconds": 1}}`
	if err := os.WriteFile(file, []byte(limits), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerOpts(t, ServerOpts{Limits: file})
	env := newBotEnv(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, rec := kitClient(t, s, env.In.Token)

	const reads, posts = 6, 3
	for i := range reads {
		if _, err := c.AuthTest(ctx); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	for i := range posts {
		if _, err := c.PostMessage(ctx, kitclient.PostMessage{ConversationID: env.Chan.ID, Text: "burst " + randHex(2)}); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	page, err := c.MessagesPage(ctx, env.Chan.ID, kitclient.PageOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != posts {
		t.Errorf("%d messages, want %d: a retried post must not post twice", len(page.Messages), posts)
	}
	var refused int
	for i, st := range rec.status {
		if st != 429 {
			continue
		}
		refused++
		if i < reads {
			// An answer that said the read bucket was empty made the next
			// read wait for its token (RateLimit headers) instead of
			// spending a request on a certain 429.
			t.Errorf("read %d was refused: the client did not pace its reads by the RateLimit headers; answers %v", i, rec.status)
		}
	}
	t.Logf("answers %v: %d refused and retried after Retry-After", rec.status, refused)
}
