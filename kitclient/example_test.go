package kitclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/kitd/kitd/kitclient"
)

// fakeKitd stands in for kitd in the examples: a few routes with canned
// answers. A real backend points the client at its kitd's {base_url}.
func fakeKitd() *httptest.Server {
	mux := http.NewServeMux()
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("GET /api/v1/auth/test", answer(200, `{"ok":true,"tokenType":"bot","workspaceId":"0190f5a0-0000-7000-8000-000000000001",
		"installationId":"0190f5a0-0000-7000-8000-000000000002","kitSlug":"deploy-bot","botId":"0190f5a0-0000-7000-8000-000000000003",
		"userId":null,"scopes":["conversations:read","messages:write"]}`))
	mux.HandleFunc("POST /api/v1/messages", func(w http.ResponseWriter, r *http.Request) {
		var in kitclient.PostMessage
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Text == "" {
			answer(400, `{"code":"validation_error","message":"text: is required","correlationId":"3f9c1a2b"}`)(w, r)
			return
		}
		out, _ := json.Marshal(map[string]any{"message": map[string]any{
			"id": "0190f5a3-0000-7000-8000-000000000010", "conversationId": in.ConversationID,
			"author": map[string]any{"kind": "bot", "id": "0190f5a0-0000-7000-8000-000000000003"},
			"text":   in.Text, "blocks": in.Blocks, "threadParentId": nil, "createdAt": "2026-05-01T09:31:00.000Z",
			"editedAt": nil, "deletedAt": nil, "reactions": []any{},
		}})
		answer(201, string(out))(w, r)
	})
	mux.HandleFunc("GET /api/v1/conversations", func(w http.ResponseWriter, r *http.Request) {
		conv := func(id, name string) string {
			return fmt.Sprintf(`{"id":%q,"kind":"channel","visibility":"public","name":%q,"topic":null,"archived":false,"createdAt":"2026-05-01T09:30:00.000Z"}`, id, name)
		}
		if r.URL.Query().Get("cursor") == "" {
			answer(200, `{"conversations":[`+conv("0190f5a2-0000-7000-8000-000000000001", "deploys")+`],"nextCursor":"page-2"}`)(w, r)
			return
		}
		answer(200, `{"conversations":[`+conv("0190f5a2-0000-7000-8000-000000000002", "alerts")+`],"nextCursor":null}`)(w, r)
	})
	mux.HandleFunc("POST /api/v1/oauth/kit.access", answer(200, `{"tokenType":"user","accessToken":"kusr_example","refreshToken":"kref_example",
		"expiresIn":3600,"userId":"0190f5a0-0000-7000-8000-000000000004","installationId":"0190f5a0-0000-7000-8000-000000000002",
		"workspace":{"id":"0190f5a0-0000-7000-8000-000000000001","name":"Acme"},"scopes":["messages:read"]}`))
	mux.HandleFunc("POST /hooks/v1/{installation}/{webhook}/{secret}", answer(200, `{"ok":true}`))
	return httptest.NewServer(mux)
}

func Example() {
	kitd := fakeKitd()
	defer kitd.Close()

	c := kitclient.New(kitd.URL+"/api/v1", "kbot_...")
	me, err := c.AuthTest(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(me.TokenType, me.KitSlug, me.Scopes)
	// Output: bot deploy-bot [conversations:read messages:write]
}

func ExampleClient_PostMessage() {
	kitd := fakeKitd()
	defer kitd.Close()

	c := kitclient.New(kitd.URL+"/api/v1", "kbot_...")
	// An Idempotency-Key is made for the call: if the answer is lost and the
	// client retries, the server answers with the message it stored.
	m, err := c.PostMessage(context.Background(), kitclient.PostMessage{
		ConversationID: "0190f5a2-0000-7000-8000-000000000001",
		Text:           "Deploy of api 1.4.0 finished",
		Blocks: []kitclient.Block{
			{"type": "header", "text": "Deploy finished"},
			{"type": "fields", "fields": []map[string]string{{"label": "Service", "value": "api"}}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Author.Kind, *m.Text, len(m.Blocks))
	// Output: bot Deploy of api 1.4.0 finished 2
}

func ExampleClient_Conversations() {
	kitd := fakeKitd()
	defer kitd.Close()

	c := kitclient.New(kitd.URL+"/api/v1", "kbot_...")
	// The iterator fetches the next page when the loop reaches it, and
	// stops after the page whose nextCursor is null.
	for conv, err := range c.Conversations(context.Background(), 100) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(*conv.Name)
	}
	// Output:
	// deploys
	// alerts
}

func ExampleClient_ExchangeCode() {
	kitd := fakeKitd()
	defer kitd.Close()

	// The Kit's backend, called back at its redirect URL with ?code=&state=
	// (after checking state), trades the code for a token.
	c := kitclient.New(kitd.URL+"/api/v1", "")
	g, err := c.ExchangeCode(context.Background(), kitclient.CodeExchange{
		ClientID:     "0190f5a0-0000-7000-8000-000000000005", // the Kit id
		ClientSecret: "kcs_...",
		Code:         "kcode_...",
		RedirectURI:  "https://kit.example.com/oauth/callback",
		CodeVerifier: "the PKCE verifier of this authorization",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.TokenType, g.ExpiresIn, g.Workspace.Name)
	// Act as the member with the user token.
	_ = c.WithToken(g.AccessToken)
	// Output: user 3600 Acme
}

func ExampleWebhook_Post() {
	kitd := fakeKitd()
	defer kitd.Close()

	hook := kitclient.NewWebhook(kitd.URL + "/hooks/v1/0190f5a0-0000-7000-8000-000000000002/0190f5a0-0000-7000-8000-000000000006/secret")
	err := hook.Post(context.Background(), kitclient.WebhookMessage{Text: "Nightly backup done"})
	fmt.Println(err)
	// Output: <nil>
}

func ExampleError() {
	kitd := fakeKitd()
	defer kitd.Close()

	c := kitclient.New(kitd.URL+"/api/v1", "kbot_...")
	_, err := c.PostMessage(context.Background(), kitclient.PostMessage{ConversationID: "0190f5a2-0000-7000-8000-000000000001"})
	var e *kitclient.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, e.Path, e.CorrelationID)
	}
	// Output: 400 validation_error text 3f9c1a2b
}
