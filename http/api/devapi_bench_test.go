package api

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/ids"
)

// BenchmarkValidateManifest is the speed check of POST /dev/kits/validate
// (issue: under 2 ms of server time per call): the 60 KB manifest with 50
// tools of internal/manifest/testdata, validated against a published
// version of the same Kit with 45 tools, so that every step runs (body
// decode, authentication, slug actor, schema, warnings, consent summary,
// diff, response encoding). It calls the server's handler directly: server
// time without the socket. Limits are off so that the developer budget of
// 60 a minute does not end the run.
//
//	go test ./http/api/ -run '^$' -bench ValidateManifest -benchmem
func BenchmarkValidateManifest(b *testing.B) {
	raw, err := os.ReadFile("../../internal/manifest/testdata/big.json")
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	doc["slug"] = "b" + strings.ReplaceAll(ids.New()[24:], "-", "")
	text, _ := json.Marshal(doc)
	// The published version: fewer tools, private (an unlisted one would
	// need verified domains).
	prev := map[string]any{}
	for k, v := range doc {
		prev[k] = v
	}
	prev["version"], prev["distribution"] = "2.9.0", "private"
	prev["tools"] = doc["tools"].([]any)[:45]
	prevText, _ := json.Marshal(prev)

	h := ts
	f := h.newFixture(b)
	want(b, h.do(b, request{method: "POST", path: "/api/v1/dev/kits/versions", token: f.dev, json: map[string]any{
		"manifest": string(prevText), "publish": true}}), 201)

	srv := New(Config{Node: h.node, Env: h.env, Auth: h.auth, OperatorToken: h.opToken, PublicURL: "http://kit.test", Logger: discardLogger()})
	body, _ := json.Marshal(map[string]any{"manifest": string(text)})
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://kit.test/api/v1/dev/kits/validate")
	req.Header.Set("Authorization", "Bearer "+f.dev)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)

	srv.handle(&ctx)
	var res struct {
		Valid bool
		Diff  *struct{ AddedTools []any }
	}
	if err := json.Unmarshal(ctx.Response.Body(), &res); err != nil || ctx.Response.StatusCode() != 200 || !res.Valid || res.Diff == nil || len(res.Diff.AddedTools) != 5 {
		b.Fatalf("validate: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		srv.handle(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("validate: %d", ctx.Response.StatusCode())
		}
	}
}
