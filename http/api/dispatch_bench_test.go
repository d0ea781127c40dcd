package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The hot paths through the front end: routing, authentication, the rate
// buckets, the body and the answer of POST /api/v1/messages and of an
// incoming webhook post, each a whole call of the server's handler (the
// actors included, the socket not). The allocations the front end adds per
// request show as the difference between two runs of allocs/op; the actors'
// own are the same in both.
//
//	go test ./http/api/ -run '^$' -bench Dispatch -benchmem
//
// The test clock moves two seconds per call so that no bucket runs dry
// (writes: 50 a minute).

func BenchmarkDispatchPostMessage(b *testing.B) {
	h := ts
	f := h.newFixture(b)
	benchmarkDispatch(b, "POST", "/api/v1/messages", f.bot,
		`{"conversationId":"`+f.conv+`","text":"deploy finished"}`, 201)
}

func BenchmarkDispatchHookPost(b *testing.B) {
	h := ts
	f := h.newFixture(b)
	// Version 1.0.1 asks for incoming webhooks; installing it updates the
	// fixture's installation.
	var man map[string]any
	if err := json.Unmarshal([]byte(manifestText("x", "1.0.1", append(defaultBotScopes, "incoming-webhook"), nil)), &man); err != nil {
		b.Fatal(err)
	}
	kit := h.do(b, request{method: "GET", path: "/api/v1/dev/kits/" + f.kitID, token: f.dev})
	want(b, kit, 200)
	man["slug"], man["incomingWebhooks"] = kit.str("detail.kit.slug"), map[string]any{"maxPerInstallation": 1}
	text, _ := json.Marshal(man)
	want(b, h.do(b, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{"manifest": string(text)}}), 201)
	want(b, h.ops(b, "POST", "/workspaces/"+f.ws+"/installations", map[string]any{"kitId": f.kitID, "version": "1.0.1"}), 201)
	r := h.ops(b, "POST", "/installations/"+f.inst+"/webhooks", map[string]any{"conversationId": f.conv, "createdByUserId": f.member})
	want(b, r, 201)
	path := strings.TrimPrefix(r.str("url"), "http://kit.test")
	benchmarkDispatch(b, "POST", path, "", `{"text":"deploy finished"}`, 200)
}

func benchmarkDispatch(b *testing.B, method, path, token, body string, status int) {
	h := ts
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI("http://kit.test" + path)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		h.clk.Advance(2 * time.Second)
		ctx.Response.Reset()
		h.srv.handle(&ctx)
		if ctx.Response.StatusCode() != status {
			b.Fatalf("%s %s: %d %s", method, path, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

// BenchmarkResolve is the route lookup alone, for the two hot paths.
func BenchmarkResolve(b *testing.B) {
	for name, path := range map[string]string{
		"messages": "/api/v1/messages",
		"hook":     "/hooks/v1/0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8c/0190a3f2-7d4e-7b1a-9c3e-2f4d5e6a7b8d/secret",
	} {
		b.Run(name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI(path)
			b.ReportAllocs()
			for b.Loop() {
				if resolve(&ctx).route == nil {
					b.Fatal("no route")
				}
			}
		})
	}
}
