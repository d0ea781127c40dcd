package kitclient

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// Every answer type decodes every field the server sends: each fixture (the
// shape of docs/openapi/webapi.json, every field set) is decoded by its
// call and encoded again, and must come back the same.
func TestDecodeEveryAnswer(t *testing.T) {
	const (
		conv    = `{"id":"0190f5a2-7b1c-7d3e-9f00-5c2d8e4a1b01","kind":"channel","visibility":"public","name":"deploys","topic":null,"archived":false,"createdAt":"2026-05-01T09:30:00.000Z"}`
		msg     = `{"id":"0190f5a3-1c2d-7e4f-8a00-6d3e9f5b2c02","conversationId":"0190f5a2-7b1c-7d3e-9f00-5c2d8e4a1b01","author":{"kind":"bot","id":"0190f5a1-0a0b-7c0d-8e00-4b1c7d3f0a03"},"text":"Deploy finished","blocks":[{"type":"header","text":"Deploy finished"},{"type":"fields","fields":[{"label":"Service","value":"api"}]}],"threadParentId":null,"createdAt":"2026-05-01T09:31:00.000Z","editedAt":"2026-05-01T09:32:00.000Z","deletedAt":null,"reactions":[{"reaction":"eyes","count":2,"userIds":["u1","u2"]}]}`
		tomb    = `{"id":"m2","conversationId":"c","author":{"kind":"user","id":"u"},"text":null,"blocks":null,"threadParentId":"m1","createdAt":"2026-05-01T09:31:00.000Z","editedAt":null,"deletedAt":"2026-05-01T09:33:00.000Z","reactions":[]}`
		file    = `{"id":"f","conversationId":"c","name":"report.pdf","mimeType":"application/pdf","sizeBytes":48213,"uploadedByUserId":"u","createdAt":"2026-05-01T09:32:00.000Z"}`
		user    = `{"id":"u","displayName":"Ada","role":"admin","email":"ada@example.com"}`
		install = `{"id":"i","kit":{"slug":"deploy-bot","version":"1.4.0","displayName":"Deploy bot"},"workspace":{"id":"w","name":"Acme"},"botId":"b","scopes":{"bot":["messages:write"],"user":["messages:read"]},"channelIds":["c"],"modelDataPolicy":"none"}`
	)
	ctx := context.Background()
	tests := []struct {
		name string
		body string
		call func(*Client) (any, error)
		// inner is the key the call unwraps ("" = the whole body).
		inner string
	}{
		{"auth test", `{"ok":true,"tokenType":"user","workspaceId":"w","installationId":"i","kitSlug":"deploy-bot","botId":null,"userId":"u","scopes":["messages:read"]}`,
			func(c *Client) (any, error) { return c.AuthTest(ctx) }, ""},
		{"rotation", `{"token":"kbot_new","previousTokenExpiresAt":"2026-05-02T09:00:00.000Z"}`,
			func(c *Client) (any, error) { return c.RotateToken(ctx) }, ""},
		{"bot grant", `{"tokenType":"bot","accessToken":"kbot_x","botId":"b","installationId":"i","workspace":{"id":"w","name":"Acme"},"scopes":["messages:write"]}`,
			func(c *Client) (any, error) { return c.ExchangeCode(ctx, CodeExchange{}) }, ""},
		{"user grant", `{"tokenType":"user","accessToken":"kusr_x","refreshToken":"kref_x","expiresIn":3600,"userId":"u","installationId":"i","workspace":{"id":"w","name":"Acme"},"scopes":["messages:read"]}`,
			func(c *Client) (any, error) { return c.RefreshToken(ctx, RefreshExchange{}) }, ""},
		{"conversation page", `{"conversations":[` + conv + `],"nextCursor":"abc"}`,
			func(c *Client) (any, error) { return c.ConversationsPage(ctx, PageOptions{}) }, ""},
		{"conversation", `{"conversation":` + conv + `}`,
			func(c *Client) (any, error) { return c.Conversation(ctx, "c") }, "conversation"},
		{"member page", `{"members":[{"userId":"u","joinedAt":"2026-05-01T09:30:00.000Z"}],"nextCursor":null}`,
			func(c *Client) (any, error) { return c.MembersPage(ctx, "c", PageOptions{}) }, ""},
		{"message page", `{"messages":[` + msg + `,` + tomb + `],"nextCursor":null}`,
			func(c *Client) (any, error) { return c.MessagesPage(ctx, "c", PageOptions{}) }, ""},
		{"reply page", `{"messages":[` + tomb + `],"nextCursor":"n"}`,
			func(c *Client) (any, error) { return c.RepliesPage(ctx, "m", PageOptions{}) }, ""},
		{"message", `{"message":` + msg + `}`,
			func(c *Client) (any, error) { return c.Message(ctx, "m") }, "message"},
		{"posted message", `{"message":` + msg + `}`,
			func(c *Client) (any, error) { return c.PostMessage(ctx, PostMessage{}) }, "message"},
		{"edited message", `{"message":` + msg + `}`,
			func(c *Client) (any, error) { return c.EditMessage(ctx, "m", EditMessage{}) }, "message"},
		{"tombstone", `{"message":` + tomb + `}`,
			func(c *Client) (any, error) { return c.DeleteMessage(ctx, "m") }, "message"},
		{"uploaded file", `{"file":` + file + `}`,
			func(c *Client) (any, error) { return c.UploadFile(ctx, "c", "n", "text/plain", []byte("x")) }, "file"},
		{"file", `{"file":` + file + `}`,
			func(c *Client) (any, error) { return c.File(ctx, "f") }, "file"},
		{"user page", `{"users":[` + user + `,{"id":"u2","displayName":"Bo","role":"guest"}],"nextCursor":null}`,
			func(c *Client) (any, error) { return c.UsersPage(ctx, PageOptions{}) }, ""},
		{"user", `{"user":` + user + `}`,
			func(c *Client) (any, error) { return c.User(ctx, "u") }, "user"},
		{"me of a user token", `{"user":` + user + `,"bot":null}`,
			func(c *Client) (any, error) { return c.Me(ctx) }, ""},
		{"me of a bot token", `{"user":null,"bot":{"id":"b","displayName":"Deploy bot"}}`,
			func(c *Client) (any, error) { return c.Me(ctx) }, ""},
		{"run", `{"run":{"id":"r","status":"succeeded","tool":"lookup","requesterUserId":"u","conversationId":"c","createdAt":"2026-05-01T09:32:00.000Z","finishedAt":"2026-05-01T09:32:00.412Z","result":{"n":1},"errorCode":null}}`,
			func(c *Client) (any, error) { return c.Run(ctx, "r") }, "run"},
		{"installation", `{"installation":` + install + `}`,
			func(c *Client) (any, error) { return c.Installation(ctx) }, "installation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, reply{status: 200, body: tt.body})
			got, err := tt.call(testClient(f, newFakeClock()))
			if err != nil {
				t.Fatal(err)
			}
			var want any
			if err := json.Unmarshal([]byte(tt.body), &want); err != nil {
				t.Fatal(err)
			}
			if tt.inner != "" {
				want = want.(map[string]any)[tt.inner]
			}
			again, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back any
			if err := json.Unmarshal(again, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, want) {
				t.Errorf("decoded and encoded again:\n got %s\nwant %s", again, mustJSON(want))
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestFileContent(t *testing.T) {
	f := newFakeServer(t, reply{status: 200, header: map[string]string{"Content-Type": "application/octet-stream", "X-Service-Content-Type": "image/png"}, body: "\x89PNG"})
	got, err := testClient(f, newFakeClock()).FileContent(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, []byte("\x89PNG")) || got.MimeType != "image/png" {
		t.Errorf("got %q %q", got.Data, got.MimeType)
	}
}

// What each call sends: method, path and query, credential and body.
func TestRequests(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name              string
		call              func(*Client) error
		method, uri, body string
		noAuth            bool
	}{
		{"auth test", func(c *Client) error { _, err := c.AuthTest(ctx); return err }, "GET", "/api/v1/auth/test", "", false},
		{"rotate", func(c *Client) error { _, err := c.RotateToken(ctx); return err }, "POST", "/api/v1/auth/rotate", "", false},
		{"code exchange sends the client credentials, not the token", func(c *Client) error {
			_, err := c.ExchangeCode(ctx, CodeExchange{ClientID: "k", ClientSecret: "kcs_s", Code: "kcode_c", RedirectURI: "https://x/cb", CodeVerifier: "v"})
			return err
		}, "POST", "/api/v1/oauth/kit.access", `{"grantType":"authorization_code","clientId":"k","clientSecret":"kcs_s","code":"kcode_c","redirectUri":"https://x/cb","codeVerifier":"v"}`, true},
		{"code exchange of a bot token leaves codeVerifier out", func(c *Client) error {
			_, err := c.ExchangeCode(ctx, CodeExchange{ClientID: "k", ClientSecret: "kcs_s", Code: "kcode_c", RedirectURI: "https://x/cb"})
			return err
		}, "POST", "/api/v1/oauth/kit.access", `{"grantType":"authorization_code","clientId":"k","clientSecret":"kcs_s","code":"kcode_c","redirectUri":"https://x/cb"}`, true},
		{"refresh", func(c *Client) error {
			_, err := c.RefreshToken(ctx, RefreshExchange{ClientID: "k", ClientSecret: "kcs_s", RefreshToken: "kref_r"})
			return err
		}, "POST", "/api/v1/oauth/kit.access", `{"grantType":"refresh_token","clientId":"k","clientSecret":"kcs_s","refreshToken":"kref_r"}`, true},
		{"conversations page", func(c *Client) error {
			_, err := c.ConversationsPage(ctx, PageOptions{Cursor: "a/b", Limit: 7})
			return err
		}, "GET", "/api/v1/conversations?cursor=a%2Fb&limit=7", "", false},
		{"conversation", func(c *Client) error { _, err := c.Conversation(ctx, "c1"); return err }, "GET", "/api/v1/conversations/c1", "", false},
		{"members", func(c *Client) error { _, err := c.MembersPage(ctx, "c1", PageOptions{}); return err }, "GET", "/api/v1/conversations/c1/members", "", false},
		{"messages", func(c *Client) error { _, err := c.MessagesPage(ctx, "c1", PageOptions{Limit: 200}); return err }, "GET", "/api/v1/conversations/c1/messages?limit=200", "", false},
		{"replies", func(c *Client) error { _, err := c.RepliesPage(ctx, "m1", PageOptions{Cursor: "x"}); return err }, "GET", "/api/v1/messages/m1/replies?cursor=x", "", false},
		{"message", func(c *Client) error { _, err := c.Message(ctx, "m1"); return err }, "GET", "/api/v1/messages/m1", "", false},
		{"post leaves empty optional fields out", func(c *Client) error {
			_, err := c.PostMessage(ctx, PostMessage{ConversationID: "c1", Text: "hi", IdempotencyKey: "k"})
			return err
		}, "POST", "/api/v1/messages", `{"conversationId":"c1","text":"hi"}`, false},
		{"post a reply with blocks", func(c *Client) error {
			_, err := c.PostMessage(ctx, PostMessage{ConversationID: "c1", Text: "hi", Blocks: []Block{{"type": "divider"}}, ThreadParentID: "m0"})
			return err
		}, "POST", "/api/v1/messages", `{"conversationId":"c1","text":"hi","blocks":[{"type":"divider"}],"threadParentId":"m0"}`, false},
		{"edit without blocks keeps them", func(c *Client) error { _, err := c.EditMessage(ctx, "m1", EditMessage{Text: "t"}); return err },
			"PATCH", "/api/v1/messages/m1", `{"text":"t"}`, false},
		{"edit with blocks replaces them", func(c *Client) error {
			_, err := c.EditMessage(ctx, "m1", EditMessage{Text: "t", Blocks: []Block{{"type": "divider"}}})
			return err
		}, "PATCH", "/api/v1/messages/m1", `{"text":"t","blocks":[{"type":"divider"}]}`, false},
		{"edit with ClearBlocks removes them", func(c *Client) error {
			_, err := c.EditMessage(ctx, "m1", EditMessage{Text: "t", ClearBlocks: true})
			return err
		}, "PATCH", "/api/v1/messages/m1", `{"text":"t","blocks":null}`, false},
		{"delete", func(c *Client) error { _, err := c.DeleteMessage(ctx, "m1"); return err }, "DELETE", "/api/v1/messages/m1", "", false},
		{"add reaction", func(c *Client) error { return c.AddReaction(ctx, "m1", Eyes) }, "POST", "/api/v1/reactions", `{"messageId":"m1","reaction":"eyes"}`, false},
		{"remove reaction", func(c *Client) error { return c.RemoveReaction(ctx, "m1", Check) }, "DELETE", "/api/v1/reactions?messageId=m1&reaction=check", "", false},
		{"upload encodes padded base64", func(c *Client) error {
			_, err := c.UploadFile(ctx, "c1", "a.txt", "text/plain", []byte("hi"))
			return err
		},
			"POST", "/api/v1/files", `{"conversationId":"c1","name":"a.txt","mimeType":"text/plain","contentBase64":"aGk="}`, false},
		{"file", func(c *Client) error { _, err := c.File(ctx, "f1"); return err }, "GET", "/api/v1/files/f1", "", false},
		{"file content", func(c *Client) error { _, err := c.FileContent(ctx, "f1"); return err }, "GET", "/api/v1/files/f1/content", "", false},
		{"users", func(c *Client) error { _, err := c.UsersPage(ctx, PageOptions{}); return err }, "GET", "/api/v1/users", "", false},
		{"me", func(c *Client) error { _, err := c.Me(ctx); return err }, "GET", "/api/v1/users/me", "", false},
		{"user", func(c *Client) error { _, err := c.User(ctx, "u1"); return err }, "GET", "/api/v1/users/u1", "", false},
		{"run", func(c *Client) error { _, err := c.Run(ctx, "r1"); return err }, "GET", "/api/v1/runs/r1", "", false},
		{"installation", func(c *Client) error { _, err := c.Installation(ctx); return err }, "GET", "/api/v1/installation", "", false},
		{"a path id is escaped", func(c *Client) error { _, err := c.Message(ctx, "../x"); return err }, "GET", "/api/v1/messages/..%2Fx", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, reply{status: 200, body: `{}`})
			if err := tt.call(testClient(f, newFakeClock())); err != nil {
				t.Fatal(err)
			}
			r := f.requests()[0]
			if r.method != tt.method || r.uri != tt.uri {
				t.Errorf("sent %s %s, want %s %s", r.method, r.uri, tt.method, tt.uri)
			}
			if r.body != tt.body {
				t.Errorf("sent body %s, want %s", r.body, tt.body)
			}
			if ct := r.header.Get("Content-Type"); (tt.body != "") != (ct == "application/json") {
				t.Errorf("Content-Type %q with body %q", ct, tt.body)
			}
			auth := r.header.Get("Authorization")
			if tt.noAuth && auth != "" || !tt.noAuth && auth != "Bearer kbot_test" {
				t.Errorf("Authorization %q", auth)
			}
		})
	}
}
