package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchManifest is the Kit the bench installs: a private Kit whose bot may
// read conversations and read and write messages.
const benchManifest = `{"schemaVersion":1,"slug":"bench-kit","version":"1.0.0",` +
	`"displayName":{"en":"Bench"},"description":{"en":"Load"},` +
	`"developer":{"name":"Bench","url":"https://example.com"},` +
	`"privacyPolicyUrl":"https://example.com/privacy",` +
	`"bot":{"displayName":{"en":"Bench"},"scopes":["conversations:read","messages:read","messages:write"]},` +
	`"distribution":"private"}`

// manifestWithSlug returns benchManifest with another slug.
func manifestWithSlug(slug string) string {
	if slug == "" {
		return benchManifest
	}
	return strings.Replace(benchManifest, `"slug":"bench-kit"`, `"slug":"`+slug+`"`, 1)
}

// withEvents returns manifest subscribed to message.posted delivered to
// endpoint ("": manifest as it is).
func withEvents(manifest, endpoint string) string {
	if endpoint == "" {
		return manifest
	}
	ep, _ := json.Marshal(endpoint)
	return strings.Replace(manifest, `"distribution":"private"}`,
		`"distribution":"private","events":["message.posted"],"endpoints":{"events":`+string(ep)+`}}`, 1)
}

// setupConfig says what to create on a fresh kitd node.
type setupConfig struct {
	// BaseURL is the node's origin, e.g. http://127.0.0.1:41234.
	BaseURL string
	// OperatorToken authorizes the operator API.
	OperatorToken string
	// Conversations is the number of channels the write load is spread
	// over; the first one also takes the single-conversation load.
	Conversations int
	// Seed is the number of messages posted into the read channel.
	Seed int
	// Webhooks is the number of incoming webhooks to create (0: none).
	Webhooks int
	// PageLimit is the page size of the history walk (0: no walk).
	PageLimit int
	// Parallel bounds the set-up requests in flight (default 8).
	Parallel int
	// Client sends the requests (default: a client with a 30 s timeout).
	Client *http.Client
	// Slug is the Kit's slug (default "bench-kit"); a node that already ran
	// the bench needs another one, since a slug belongs to one workspace.
	Slug string
	// EventsEndpoint, when set, makes the Kit subscribe to message.posted
	// delivered to this https URL, and gives it a signing secret (no
	// delivery goes without one).
	EventsEndpoint string
	// Progress, when set, receives a line per finished step.
	Progress func(format string, args ...any)
}

// fixture is what the load needs from the set-up.
type fixture struct {
	WorkspaceID    string
	OwnerID        string
	DeveloperToken string
	KitID          string
	InstallationID string
	BotToken       string
	// Conversations are the channels of the write load (the bot is a
	// member of all of them); Conversations[0] takes the single-channel load.
	Conversations []string
	// ReadConversation is a separate channel seeded with Seed messages,
	// read by the history scenario.
	ReadConversation string
	// SamplePost is the body of a real 201 answer of POST /api/v1/messages,
	// replayed by the trivial server so both answer with the same size.
	SamplePost []byte
	// SampleGet is the body of a real answer of the history read.
	SampleGet []byte
	// HookPaths are the paths of the webhook URLs (/hooks/v1/...).
	HookPaths []string
	// HistoryPages are the request URIs of every page of the read
	// channel's history at PageLimit, first page first, each with the
	// cursor the page before gave (cursors are positions, so they stay
	// valid while the channel grows).
	HistoryPages []string
}

// apiError is a failed set-up call, with the request and the answer so a
// kitd bug can be reported as is.
type apiError struct {
	Method, URL, ReqBody string
	Status               int
	Answer               string
	Err                  error
}

func (e *apiError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s %s %s: %v", e.Method, e.URL, e.ReqBody, e.Err)
	}
	return fmt.Sprintf("%s %s %s: answered %d %s", e.Method, e.URL, e.ReqBody, e.Status, e.Answer)
}

type setupClient struct {
	cfg setupConfig
}

// call sends a JSON request with a bearer token and decodes the JSON answer
// into out (when not nil). Any status other than want is an error.
func (c *setupClient) call(ctx context.Context, method, path, token string, body any, want int, out any) ([]byte, error) {
	var reqBody []byte
	if body != nil {
		var err error
		if reqBody, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	url := strings.TrimRight(c.cfg.BaseURL, "/") + path
	aerr := &apiError{Method: method, URL: url, ReqBody: string(reqBody)}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(reqBody))
	if err != nil {
		aerr.Err = err
		return nil, aerr
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		aerr.Err = err
		return nil, aerr
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		aerr.Err = err
		return nil, aerr
	}
	if resp.StatusCode != want {
		aerr.Status, aerr.Answer = resp.StatusCode, string(data)
		return data, aerr
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			aerr.Status, aerr.Answer = resp.StatusCode, string(data)
			aerr.Err = fmt.Errorf("decoding answer %q: %w", truncate(string(data), 300), err)
			return data, aerr
		}
	}
	return data, nil
}

type idObj struct {
	ID string `json:"id"`
}

// need fails when a field of an answer that the bench relies on is empty.
func need(what, v string) error {
	if v == "" {
		return fmt.Errorf("set-up: the answer carries no %s", what)
	}
	return nil
}

// setup creates a workspace, its owner, a developer token, the bench Kit
// (published), an installation, cfg.Conversations+1 public channels with the
// Kit bot in each, a bot token, and seeds the read channel.
func setup(ctx context.Context, cfg setupConfig) (*fixture, error) {
	return newSetupClient(cfg).setup(ctx)
}

// newSetupClient applies cfg's defaults.
func newSetupClient(cfg setupConfig) *setupClient {
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Parallel, DisableCompression: true},
		}
	}
	if cfg.Conversations < 1 {
		cfg.Conversations = 1
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	return &setupClient{cfg: cfg}
}

func (c *setupClient) setup(ctx context.Context) (*fixture, error) {
	cfg := c.cfg
	op := cfg.OperatorToken
	f := &fixture{}

	var ws struct {
		Workspace idObj `json:"workspace"`
	}
	if _, err := c.call(ctx, "POST", "/ops/v1/workspaces", op,
		map[string]any{"name": "bench"}, http.StatusCreated, &ws); err != nil {
		return nil, err
	}
	f.WorkspaceID = ws.Workspace.ID
	if err := need("workspace.id", f.WorkspaceID); err != nil {
		return nil, err
	}

	var user struct {
		User idObj `json:"user"`
	}
	if _, err := c.call(ctx, "POST", "/ops/v1/workspaces/"+f.WorkspaceID+"/users", op,
		map[string]any{"displayName": "Bench Owner", "email": "bench-owner@example.com", "role": "owner"},
		http.StatusCreated, &user); err != nil {
		return nil, err
	}
	f.OwnerID = user.User.ID
	if err := need("user.id", f.OwnerID); err != nil {
		return nil, err
	}

	var dev struct {
		Token string `json:"token"`
	}
	if _, err := c.call(ctx, "POST", "/ops/v1/users/"+f.OwnerID+"/developer-tokens", op,
		map[string]any{"name": "bench"}, http.StatusCreated, &dev); err != nil {
		return nil, err
	}
	f.DeveloperToken = dev.Token
	if err := need("developer token", f.DeveloperToken); err != nil {
		return nil, err
	}

	var kit struct {
		KitID string `json:"kitId"`
	}
	if _, err := c.call(ctx, "POST", "/api/v1/dev/kits/versions", f.DeveloperToken,
		map[string]any{"manifest": withEvents(manifestWithSlug(cfg.Slug), cfg.EventsEndpoint), "publish": true}, http.StatusCreated, &kit); err != nil {
		return nil, err
	}
	f.KitID = kit.KitID
	if err := need("kitId", f.KitID); err != nil {
		return nil, err
	}
	if cfg.EventsEndpoint != "" {
		if _, err := c.call(ctx, "POST", "/ops/v1/kits/"+f.KitID+"/signing-secret", op, nil, http.StatusCreated, nil); err != nil {
			return nil, err
		}
	}

	var inst struct {
		Installation idObj `json:"installation"`
	}
	if _, err := c.call(ctx, "POST", "/ops/v1/workspaces/"+f.WorkspaceID+"/installations", op,
		map[string]any{"kitId": f.KitID}, http.StatusCreated, &inst); err != nil {
		return nil, err
	}
	f.InstallationID = inst.Installation.ID
	if err := need("installation.id", f.InstallationID); err != nil {
		return nil, err
	}
	cfg.Progress("workspace %s, kit %s, installation %s", f.WorkspaceID, f.KitID, f.InstallationID)

	// Channels: index 0..n-1 for the write load, index n for reads.
	n := cfg.Conversations
	ids := make([]string, n+1)
	start := time.Now()
	err := parallel(ctx, cfg.Parallel, n+1, func(ctx context.Context, i int) error {
		name := "bench-" + strconv.Itoa(i)
		if i == n {
			name = "bench-read"
		}
		var conv struct {
			Conversation idObj `json:"conversation"`
		}
		if _, err := c.call(ctx, "POST", "/ops/v1/workspaces/"+f.WorkspaceID+"/conversations", op,
			map[string]any{"kind": "channel", "visibility": "public", "name": name, "memberIds": []string{f.OwnerID}},
			http.StatusCreated, &conv); err != nil {
			return err
		}
		if err := need("conversation.id", conv.Conversation.ID); err != nil {
			return err
		}
		ids[i] = conv.Conversation.ID
		_, err := c.call(ctx, "POST", "/ops/v1/installations/"+f.InstallationID+"/channels", op,
			map[string]any{"conversationId": conv.Conversation.ID}, http.StatusOK, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.Conversations, f.ReadConversation = ids[:n], ids[n]
	cfg.Progress("%d channels created with the bot added in %v", n+1, time.Since(start).Round(time.Millisecond))

	var bot struct {
		Token string `json:"token"`
	}
	if _, err := c.call(ctx, "POST", "/ops/v1/installations/"+f.InstallationID+"/bot-tokens", op,
		nil, http.StatusCreated, &bot); err != nil {
		return nil, err
	}
	f.BotToken = bot.Token
	if err := need("bot token", f.BotToken); err != nil {
		return nil, err
	}

	// Seed the read channel, and keep one real answer of each kind.
	var mu sync.Mutex
	err = parallel(ctx, cfg.Parallel, cfg.Seed, func(ctx context.Context, i int) error {
		data, err := c.call(ctx, "POST", "/api/v1/messages", f.BotToken,
			map[string]any{"conversationId": f.ReadConversation, "text": "seed message " + strconv.Itoa(i)},
			http.StatusCreated, nil)
		if err == nil && i == 0 {
			mu.Lock()
			f.SamplePost = data
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if f.SamplePost == nil {
		// Seed 0: take a sample from a write channel instead.
		data, err := c.call(ctx, "POST", "/api/v1/messages", f.BotToken,
			map[string]any{"conversationId": f.Conversations[0], "text": "bench message 0"},
			http.StatusCreated, nil)
		if err != nil {
			return nil, err
		}
		f.SamplePost = data
	}
	data, err := c.call(ctx, "GET", "/api/v1/conversations/"+f.ReadConversation+"/messages?limit=50",
		f.BotToken, nil, http.StatusOK, nil)
	if err != nil {
		return nil, err
	}
	f.SampleGet = data
	cfg.Progress("seeded %d messages; a post answer is %d bytes, a page of history %d bytes",
		cfg.Seed, len(f.SamplePost), len(f.SampleGet))
	if cfg.PageLimit > 0 {
		if f.HistoryPages, err = walkHistory(ctx, c, f, cfg.PageLimit); err != nil {
			return nil, err
		}
		cfg.Progress("the read channel's history is %d pages of %d", len(f.HistoryPages), cfg.PageLimit)
	}
	if cfg.Webhooks > 0 {
		if f.HookPaths, err = setupWebhooks(ctx, c, f, cfg.Webhooks); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// installKit publishes a Kit with manifest through f's developer token and
// installs it in f's workspace; it returns the installation's id.
func (c *setupClient) installKit(ctx context.Context, f *fixture, manifest string) (string, error) {
	_, inst, err := c.installKitOf(ctx, f, manifest)
	return inst, err
}

// installKitOf is installKit that also returns the Kit's id.
func (c *setupClient) installKitOf(ctx context.Context, f *fixture, manifest string) (kitID, instID string, err error) {
	var kit struct {
		KitID string `json:"kitId"`
	}
	if _, err := c.call(ctx, "POST", "/api/v1/dev/kits/versions", f.DeveloperToken,
		map[string]any{"manifest": manifest, "publish": true}, http.StatusCreated, &kit); err != nil {
		return "", "", err
	}
	if err := need("kitId", kit.KitID); err != nil {
		return "", "", err
	}
	var inst struct {
		Installation idObj `json:"installation"`
	}
	if _, err := c.call(ctx, "POST", "/ops/v1/workspaces/"+f.WorkspaceID+"/installations", c.cfg.OperatorToken,
		map[string]any{"kitId": kit.KitID}, http.StatusCreated, &inst); err != nil {
		return "", "", err
	}
	return kit.KitID, inst.Installation.ID, need("installation.id", inst.Installation.ID)
}

// maxHistoryPages bounds the history walk.
const maxHistoryPages = 1000

// walkHistory pages through the read channel with the bot token and
// returns the URI of each page.
func walkHistory(ctx context.Context, c *setupClient, f *fixture, limit int) ([]string, error) {
	first := "/api/v1/conversations/" + f.ReadConversation + "/messages?limit=" + strconv.Itoa(limit)
	pages := []string{first}
	for len(pages) < maxHistoryPages {
		var page struct {
			NextCursor *string `json:"nextCursor"`
		}
		if _, err := c.call(ctx, "GET", pages[len(pages)-1], f.BotToken, nil, http.StatusOK, &page); err != nil {
			return nil, err
		}
		if page.NextCursor == nil {
			break
		}
		pages = append(pages, first+"&cursor="+url.QueryEscape(*page.NextCursor))
	}
	return pages, nil
}

// parallel runs fn(0..n-1) with at most p calls in flight and returns the
// first error (the remaining calls are cancelled).
func parallel(ctx context.Context, p, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for w := 0; w < p; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err() // the caller's context ended
	}
	return first
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
