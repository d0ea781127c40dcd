package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `kit logs KIT --source S` prints the command for the older entries; the
// server's cursor does not hold the filters (http/api/devapi.go kitLogs:
// the list is "devlog:"+kitID), so a hint without them reads the next page
// of the whole log.
func TestLogsHintForOlderEntriesKeepsTheFilters(t *testing.T) {
	page := `{"entries":[{"id":"e1","at":"2025-01-01T00:00:01Z","source":"delivery","level":"error","event":"x","installationId":null,"status":null,"errorCode":null,"durationMs":null,"httpStatus":null,"attempt":null}],"nextCursor":"CUR","sources":["tool_call","audit","delivery"]}`
	f := newFakeAPI(t, map[string]http.HandlerFunc{"GET /api/v1/dev/kits/" + kitID + "/logs": fixed(200, page)})
	code, out, errOut := runKit(t, f.srv.URL, "kdev_x", "", "logs", kitID, "--source", "delivery", "--level", "error")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "--cursor CUR") {
		t.Fatalf("no cursor hint in %q", out)
	}
	if !strings.Contains(out, "--source delivery") || !strings.Contains(out, "--level error") {
		t.Errorf("the hint for older entries drops the filters:\n%s", out)
	}
}

// `kit versions upload FILE --publish` of a version uploaded before as a
// draft with the same manifest publishes it (actors/kit.go upload:
// m.Publish && !existing.Published -> publish, answered created=false).
// The CLI says "nothing changed".
func TestUploadThatPublishesADraftSaysSo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(file, []byte(`{"slug":"my-kit"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	answer := `{"kitId":"` + kitID + `","created":false,"version":{"id":"v","version":"1.0.0","published":true,"publishedAt":"2026-01-01T00:00:00.000Z","createdAt":"2025-12-31T00:00:00.000Z","consentHash":"h","manifestHash":"m","distribution":"private"},"installationId":null}`
	f := newFakeAPI(t, map[string]http.HandlerFunc{"POST /api/v1/dev/kits/versions": fixed(201, answer)})
	code, out, errOut := runKit(t, f.srv.URL, "kdev_x", "", "versions", "upload", file, "--publish")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "nothing changed") {
		t.Errorf("a publish of a draft is reported as nothing changed:\n%s", out)
	}
}

// KIT is "a Kit id or the slug of one of the workspace's Kits"; a slug may
// have the 8-4-4-4-12 shape of an id (2-40 of a-z 0-9 -, starting with a
// letter: internal/manifest slugProblem), and then the CLI sends it as an id.
func TestASlugShapedLikeAnIDIsLookedUp(t *testing.T) {
	const slug = "deadbeef-0000-4000-8000-000000000000"
	list := `{"kits":[{"kitId":"` + kitID + `","slug":"` + slug + `","displayName":"D","distribution":"private","state":"active","createdAt":"T","latestVersion":"1.0.0","latestPublishedVersion":null,"installedHere":false}]}`
	detail := `{"detail":{"kit":{"kitId":"` + kitID + `","slug":"` + slug + `","displayName":"D","distribution":"private","state":"active","createdAt":"T","latestVersion":"1.0.0","latestPublishedVersion":null,"installedHere":false},"versions":[],"domains":[],"credentials":{},"installLink":{"active":false,"createdAt":null},"endpointHosts":[],"unverifiedHosts":[]}}`
	f := newFakeAPI(t, map[string]http.HandlerFunc{
		"GET /api/v1/dev/kits":          fixed(200, list),
		"GET /api/v1/dev/kits/" + kitID: fixed(200, detail),
	})
	code, _, errOut := runKit(t, f.srv.URL, "kdev_x", "", "kits", "show", slug)
	if code != 0 {
		t.Errorf("kit kits show %s: exit %d: %s", slug, code, errOut)
	}
}

// `kit deliveries list INSTALLATION --limit N` prints the command for the
// next page; the server's cursor holds a sequence only (http/api
// devapi_deliveries.go listDeliveries), so a hint without --limit reads
// the next page in the server's default size, as `kit logs` keeps it.
func TestDeliveriesHintForTheNextPageKeepsTheLimit(t *testing.T) {
	f := newFakeAPI(t, map[string]http.HandlerFunc{"GET /api/v1/dev/installations/" + instID + "/deliveries": fixed(200, deliveryPage)})
	code, out, errOut := runKit(t, f.srv.URL, "kdev_x", "", "deliveries", "list", instID, "--limit", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "more: kit deliveries list " + instID + " --limit 2 --cursor c2\n"; !strings.Contains(out, want) {
		t.Errorf("the hint for the next page drops --limit; want %q in:\n%s", want, out)
	}
}
