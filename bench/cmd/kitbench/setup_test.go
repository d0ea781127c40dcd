package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSetupAgainstFake(t *testing.T) {
	fk := newFakeKitd("op-secret")
	srv := httptest.NewServer(fk)
	defer srv.Close()

	fx, err := setup(context.Background(), setupConfig{
		BaseURL: srv.URL, OperatorToken: "op-secret", Conversations: 25, Seed: 30, Parallel: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(fx.Conversations) != 25 || fx.ReadConversation == "" || !strings.HasPrefix(fx.BotToken, "kbot_") ||
		!strings.HasPrefix(fx.DeveloperToken, "kdev_") || fx.KitID == "" || fx.InstallationID == "" || fx.OwnerID == "" {
		t.Fatalf("fixture %+v", fx)
	}
	seen := map[string]bool{fx.ReadConversation: true}
	for _, c := range fx.Conversations {
		if c == "" || seen[c] {
			t.Fatalf("conversation ids not distinct: %v", fx.Conversations)
		}
		seen[c] = true
	}
	if got := len(fk.channels[fx.InstallationID]); got != 26 {
		t.Errorf("bot added to %d channels, want 26", got)
	}
	if got := len(fk.msgs[fx.ReadConversation]); got != 30 {
		t.Errorf("seeded %d messages, want 30", got)
	}
	if fk.manifest["slug"] != "bench-kit" || fk.manifest["distribution"] != "private" {
		t.Errorf("manifest %v", fk.manifest)
	}
	var post struct {
		Message struct{ ID, ConversationID string }
	}
	if err := json.Unmarshal(fx.SamplePost, &post); err != nil || post.Message.ConversationID != fx.ReadConversation {
		t.Errorf("sample post %s (%v)", fx.SamplePost, err)
	}
	var page struct{ Messages []any }
	if err := json.Unmarshal(fx.SampleGet, &page); err != nil || len(page.Messages) != 30 {
		t.Errorf("sample get: %d messages (%v)", len(page.Messages), err)
	}
	// The order of the one-off steps is fixed by their dependencies.
	want := []string{"POST /ops/v1/workspaces", "POST /ops/v1/workspaces/", "POST /ops/v1/users/", "POST /api/v1/dev/kits/versions", "POST /ops/v1/workspaces/"}
	for i, w := range want {
		if !strings.HasPrefix(fk.calls[i], w) {
			t.Errorf("call %d = %s, want %s...", i, fk.calls[i], w)
		}
	}
}

func TestSetupReportsFailedCall(t *testing.T) {
	fk := newFakeKitd("op-secret")
	fk.failPath = "/ops/v1/installations/"
	srv := httptest.NewServer(fk)
	defer srv.Close()
	_, err := setup(context.Background(), setupConfig{
		BaseURL: srv.URL, OperatorToken: "op-secret", Conversations: 10, Seed: 1,
	})
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 500 || !strings.Contains(ae.Answer, "internal_error") ||
		!strings.Contains(ae.URL, "/channels") || !strings.Contains(ae.ReqBody, "conversationId") {
		t.Fatalf("want the failed call with its answer, got %v", err)
	}

	// Another slug for a node that already has the bench Kit.
	fk2 := newFakeKitd("op")
	srv2 := httptest.NewServer(fk2)
	defer srv2.Close()
	if _, err := setup(context.Background(), setupConfig{BaseURL: srv2.URL, OperatorToken: "op", Slug: "bench-kit-x", Conversations: 1}); err != nil {
		t.Fatal(err)
	}
	if fk2.manifest["slug"] != "bench-kit-x" || fk2.manifest["version"] != "1.0.0" {
		t.Errorf("manifest %v", fk2.manifest)
	}

	// A wrong operator token fails at the first call.
	_, err = setup(context.Background(), setupConfig{BaseURL: srv.URL, OperatorToken: "wrong", Conversations: 1})
	if !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("want 401, got %v", err)
	}
}
