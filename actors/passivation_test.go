package actors_test

import (
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Requests for ids that do not exist must not leave actors behind: a client
// could otherwise fill the node's memory with made-up UUIDs.
func TestAbsentEntitiesLeaveNoActor(t *testing.T) {
	n := shared
	probes := []struct {
		name string
		kind string
		msg  func() *kitpb.GetConversation
	}{
		{"an unknown conversation", actors.KindConversation, func() *kitpb.GetConversation {
			return &kitpb.GetConversation{Caller: &kitpb.Caller{Kind: actors.CallerOperator}}
		}},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			// Warm up: the first requests create reply slots and the like.
			for range 10 {
				_, err := try[*kitpb.ConversationReply](n, p.kind, ids.New(), p.msg())
				wantCode(t, err, kiterr.NotFound)
			}
			before := n.node.LocalProcesses()
			for range 300 {
				_, err := try[*kitpb.ConversationReply](n, p.kind, ids.New(), p.msg())
				wantCode(t, err, kiterr.NotFound)
			}
			deadline := time.Now().Add(15 * time.Second) // stopping is asynchronous; slow under load
			for time.Now().Before(deadline) && n.node.LocalProcesses() > before+20 {
				time.Sleep(20 * time.Millisecond)
			}
			if after := n.node.LocalProcesses(); after > before+20 {
				t.Fatalf("300 requests for unknown ids left %d more processes", after-before)
			}
		})
	}
	for _, tc := range []struct {
		name string
		kind string
		req  func() (string, error)
	}{
		{"an unknown workspace", actors.KindWorkspace, func() (string, error) {
			_, err := try[*kitpb.WorkspaceReply](n, actors.KindWorkspace, ids.New(), &kitpb.GetWorkspace{})
			return "", err
		}},
		{"an unknown installation", actors.KindInstallation, func() (string, error) {
			_, err := try[*kitpb.InstallationReply](n, actors.KindInstallation, ids.New(), &kitpb.GetInstallation{})
			return "", err
		}},
		{"an unknown kit", actors.KindKit, func() (string, error) {
			_, err := try[*kitpb.KitReply](n, actors.KindKit, ids.New(), &kitpb.GetKit{})
			return "", err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.node.LocalProcesses()
			for range 200 {
				_, err := tc.req()
				wantCode(t, err, kiterr.NotFound)
			}
			deadline := time.Now().Add(15 * time.Second) // stopping is asynchronous; slow under load
			for time.Now().Before(deadline) && n.node.LocalProcesses() > before+20 {
				time.Sleep(20 * time.Millisecond)
			}
			if after := n.node.LocalProcesses(); after > before+20 {
				t.Fatalf("200 requests for unknown ids left %d more processes", after-before)
			}
		})
	}
}
