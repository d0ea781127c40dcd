package api

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/ids"
)

// The deliveries routes of the developer API (docs/deliveries.md): the
// Kit's own workspace only, strict bodies with field paths, nothing echoed.
func TestDeveloperDeliveries(t *testing.T) {
	h := ts
	f := h.newFixture(t)
	g := h.newFixture(t) // another workspace
	sandbox := h.sandboxDeveloper(t)
	list := func(token, inst, query string) request {
		return request{method: "GET", path: "/api/v1/dev/installations/" + inst + "/deliveries" + query, token: token}
	}
	redeliver := func(token, inst string, body map[string]any) request {
		return request{method: "POST", path: "/api/v1/dev/installations/" + inst + "/deliveries/redeliver", token: token, json: body}
	}
	trigger := func(token, kit string, body map[string]any) request {
		return request{method: "POST", path: "/api/v1/dev/kits/" + kit + "/test-events", token: token, json: body}
	}
	const secretish = "zz-not-echoed-zz"
	tests := []struct {
		name       string
		rq         request
		wantStatus int
		wantCode   string
		wantPath   string
	}{
		{"list: the Kit's developer sees its installation's deliveries", list(f.dev, f.inst, ""), 200, "", ""},
		{"list: another workspace's developer gets 404", list(g.dev, f.inst, ""), 404, "not_found", ""},
		{"list: an id that is not a UUID is 404", list(f.dev, "nope", ""), 404, "not_found", ""},
		{"list: an unknown installation is 404", list(f.dev, ids.New(), ""), 404, "not_found", ""},
		{"list: a bot token is 403", list(f.bot, f.inst, ""), 403, "forbidden", ""},
		{"list: limit out of range", list(f.dev, f.inst, "?limit=101"), 400, "validation_error", "limit"},
		{"list: a cursor of another list", list(f.dev, f.inst, "?cursor="+cursorValue("deliveries:"+g.inst, "5")), 400, "validation_error", "cursor"},
		{"list: a cursor that is not a sequence", list(f.dev, f.inst, "?cursor="+cursorValue("deliveries:"+f.inst, "x")), 400, "validation_error", "cursor"},
		{"redeliver: eventId or deadSince is required", redeliver(f.dev, f.inst, map[string]any{}), 400, "validation_error", "eventId"},
		{"redeliver: not both", redeliver(f.dev, f.inst, map[string]any{"eventId": ids.New(), "deadSince": "2026-01-01T00:00:00Z"}), 400, "validation_error", "deadSince"},
		{"redeliver: eventId must be a UUID", redeliver(f.dev, f.inst, map[string]any{"eventId": secretish}), 400, "validation_error", "eventId"},
		{"redeliver: deadSince must be a date-time", redeliver(f.dev, f.inst, map[string]any{"deadSince": secretish}), 400, "validation_error", "deadSince"},
		{"redeliver: an unknown event is 404", redeliver(f.dev, f.inst, map[string]any{"eventId": ids.New()}), 404, "not_found", ""},
		{"redeliver: no dead letter since is 202 with none", redeliver(f.dev, f.inst, map[string]any{"deadSince": "2026-01-01T00:00:00Z"}), 202, "", ""},
		{"redeliver: another workspace's developer gets 404", redeliver(g.dev, f.inst, map[string]any{"deadSince": "2026-01-01T00:00:00Z"}), 404, "not_found", ""},
		{"trigger: type is required", trigger(sandbox, f.kitID, map[string]any{}), 400, "validation_error", "type"},
		{"trigger: type must be an event kind", trigger(sandbox, f.kitID, map[string]any{"type": secretish}), 400, "validation_error", "type"},
		{"trigger: a token outside a sandbox is 403", trigger(f.dev, f.kitID, map[string]any{"type": "message.posted"}), 403, "forbidden", ""},
		{"trigger: a token outside a sandbox is 403 before its body is read, as dev-install's", trigger(f.dev, f.kitID, map[string]any{"type": secretish}), 403, "forbidden", ""},
		{"trigger: a Kit id that is not a UUID is 404", trigger(f.dev, "nope", map[string]any{"type": "message.posted"}), 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.rq)
			if tt.wantCode == "" {
				want(t, r, tt.wantStatus)
			} else {
				wantError(t, r, tt.wantStatus, tt.wantCode)
			}
			if tt.wantPath != "" && !strings.HasPrefix(strAt(r, "message"), tt.wantPath+": ") {
				t.Fatalf("want the field path %q: %s", tt.wantPath, r)
			}
			if strings.Contains(string(r.body), secretish) {
				t.Fatalf("the answer echoes the input: %s", r)
			}
		})
	}
	t.Run("redeliver: an uninstalled installation's events are not sent again, and stay listed", func(t *testing.T) {
		u := h.newFixture(t)
		want(t, h.ops(t, "DELETE", "/installations/"+u.inst, nil), 200)
		for _, body := range []map[string]any{{"eventId": ids.New()}, {"deadSince": "2026-01-01T00:00:00Z"}} {
			wantError(t, h.do(t, redeliver(u.dev, u.inst, body)), 409, "conflict")
		}
		wantError(t, h.do(t, redeliver(u.dev, u.inst, map[string]any{"eventId": secretish})), 400, "validation_error")
		wantError(t, h.do(t, redeliver(g.dev, u.inst, map[string]any{"eventId": ids.New()})), 404, "not_found")
		want(t, h.do(t, list(u.dev, u.inst, "")), 200)
	})
	t.Run("list: an installation without events is empty, its endpoint healthy", func(t *testing.T) {
		r := h.do(t, list(f.dev, f.inst, ""))
		if d := fieldAt(r, "deliveries").([]any); len(d) != 0 || fieldAt(r, "nextCursor") != nil || strAt(r, "endpoint.state") != "healthy" {
			t.Fatalf("%s", r)
		}
	})
}
