package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// interactiveKit installs a Kit whose manifest declares interactivity
// (OPERATIONS.md section 4) into env's workspace and channel.
func interactiveKit(t *testing.T, env *BotEnv) *Install {
	t.Helper()
	k := &Kit{Slug: newSlug(), Version: "1.0.0", Scopes: baseScopes}
	k.Manifest = manifest(k.Slug, k.Version, baseScopes)
	k.Manifest["interactivity"] = map[string]any{"url": "https://example.com/interact"}
	r := env.W.uploadVersion(t, k.Manifest, true)
	want(t, r, 201)
	k.ID = r.Str("kitId")
	return env.W.install(t, k, env.Chan.ID)
}

var (
	headerBlock  = map[string]any{"type": "header", "text": "Deploy finished"}
	actionsBlock = map[string]any{"type": "actions", "elements": []any{
		map[string]any{"type": "button", "actionId": "approve", "text": "Approve", "value": "yes", "style": "primary"},
	}}
	buttonSection = map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "*Ready*"},
		"accessory": map[string]any{"type": "button", "actionId": "open", "text": "Open"}}
)

func blockTypes(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	for _, b := range jarr(m, "blocks") {
		bm := b.(map[string]any)
		typ, _ := bm["type"].(string)
		if _, ok := bm["accessory"]; ok {
			typ += "+accessory"
		}
		out = append(out, typ)
	}
	return out
}

// docs/blocks.md "Removal of interactive elements": interactive elements are kept only when the
// manifest declares interactivity; otherwise removed before storing.
func TestBlocks_InteractivePolicy(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	interactive := interactiveKit(t, env)
	blocks := []any{headerBlock, actionsBlock, buttonSection}

	for _, tc := range []struct {
		name string
		in   *Install
		want string
	}{
		{"without interactivity actions blocks and button accessories are removed", env.In, "header,section"},
		{"with interactivity they are kept", interactive, "header,actions,section+accessory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.in.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": "deploy", "blocks": blocks})
			want(t, r, 201)
			if got := strings.Join(blockTypes(t, jobj(r.JSON, "message")), ","); got != tc.want {
				t.Fatalf("stored blocks %s, want %s", got, tc.want)
			}
			// What was answered is what was stored.
			id := r.Str("message.id")
			g := tc.in.api(t, "GET", "/messages/"+id, nil)
			want(t, g, 200)
			if got := strings.Join(blockTypes(t, jobj(g.JSON, "message")), ","); got != tc.want {
				t.Fatalf("read back blocks %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("PATCH applies the same policy", func(t *testing.T) {
		m := env.In.post(t, env.Chan.ID, "plain")
		r := env.In.api(t, "PATCH", "/messages/"+jstr(m, "id"), map[string]any{"text": "edited", "blocks": blocks})
		want(t, r, 200)
		if got := strings.Join(blockTypes(t, jobj(r.JSON, "message")), ","); got != "header,section" {
			t.Fatalf("edited blocks %s", got)
		}
	})
}

// Invalid Blocks answer 400 validation_error with the path of the first
// problem, never the submitted value, and store nothing.
func TestBlocks_Errors(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := newBotEnv(t, s)
	const sentinel = "zz-SENTINEL-zz"
	long := strings.Repeat("h", 151)
	for _, tc := range []struct {
		name   string
		blocks any
		path   string
	}{
		{"an unknown block type", []any{map[string]any{"type": sentinel}}, "blocks[0].type"},
		{"an unknown key, reported at its block and never named", []any{headerBlock, map[string]any{"type": "divider", sentinel: "red"}}, "blocks[1]"},
		{"a header of 151 characters", []any{map[string]any{"type": "header", "text": long + sentinel}}, "blocks[0].text"},
		{"an http link in mrkdwn", []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "<http://" + sentinel + ".example>"}}}, "blocks[0].text.text"},
		{"an image of a file that does not exist", []any{map[string]any{"type": "image", "fileId": newUUID(), "alt": sentinel}}, "blocks[0].fileId"},
		{"51 blocks", dividers(51), "blocks"},
		{"a danger button without confirm", []any{map[string]any{"type": "actions", "elements": []any{
			map[string]any{"type": "button", "actionId": "x", "text": "Delete", "style": "danger", "value": sentinel}}}}, "blocks[0].elements[0].confirm"},
		{"blocks that are not an array", map[string]any{"type": "divider"}, "blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?limit=1", nil)
			r := env.In.api(t, "POST", "/messages", map[string]any{"conversationId": env.Chan.ID, "text": "x", "blocks": tc.blocks})
			wantValidation(t, r, tc.path, sentinel)
			after := env.In.api(t, "GET", "/conversations/"+env.Chan.ID+"/messages?limit=1", nil)
			b1, _ := json.Marshal(before.JSON)
			b2, _ := json.Marshal(after.JSON)
			if string(b1) != string(b2) {
				t.Fatalf("a refused post changed the history")
			}
		})
	}
}
