package actors_test

import (
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestWorkspaceRules(t *testing.T) {
	n := shared
	createUser := func(wsID, email string) error {
		_, err := try[*kitpb.UserReply](n, actors.KindWorkspace, wsID, &kitpb.CreateUser{
			UserId: ids.New(), DisplayName: "someone", Email: email, Role: "member",
		})
		return err
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an email is used once per workspace, case-insensitively", func(t *testing.T) {
			w := n.workspace(t, 0)
			noErr(t, createUser(w.id, "Ada@Example.com"))
			wantCode(t, createUser(w.id, "ada@example.COM"), kiterr.EmailTaken, "email")
		}},
		{"the same email may be used in another workspace", func(t *testing.T) {
			a, b := n.workspace(t, 0), n.workspace(t, 0)
			noErr(t, createUser(a.id, "same@example.com"))
			noErr(t, createUser(b.id, "same@example.com"))
		}},
		{"a workspace is created once", func(t *testing.T) {
			w := n.workspace(t, 0)
			_, err := try[*kitpb.WorkspaceReply](n, actors.KindWorkspace, w.id, &kitpb.CreateWorkspace{Name: "again"})
			wantCode(t, err, kiterr.Conflict)
		}},
		{"an unknown workspace is not found", func(t *testing.T) {
			wantCode(t, createUser(ids.New(), ""), kiterr.NotFound)
		}},
		{"a deactivated member is no longer listed", func(t *testing.T) {
			w := n.workspace(t, 2)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.DeactivateUser{UserId: w.users[0]})
			r := ask[*kitpb.UsersReply](t, n, actors.KindWorkspace, w.id, &kitpb.ListUsers{Limit: 10})
			if len(r.Users) != 1 || r.Users[0].Id != w.users[1] {
				t.Fatalf("users %v", r.Users)
			}
		}},
		{"users list pages in creation order", func(t *testing.T) {
			w := n.workspace(t, 3)
			var got []string
			after := ""
			for range 5 {
				r := ask[*kitpb.UsersReply](t, n, actors.KindWorkspace, w.id, &kitpb.ListUsers{AfterId: after, Limit: 1})
				for _, u := range r.Users {
					got = append(got, u.Id)
					after = u.Id
				}
				if !r.More {
					break
				}
			}
			if len(got) != 3 || got[0] != w.users[0] || got[1] != w.users[1] || got[2] != w.users[2] {
				t.Fatalf("users %v, want %v", got, w.users)
			}
		}},
		{"a deactivated member cannot start a conversation with others", func(t *testing.T) {
			w := n.workspace(t, 2)
			ask[*kitpb.Ok](t, n, actors.KindWorkspace, w.id, &kitpb.DeactivateUser{UserId: w.users[1]})
			_, err := try[*kitpb.ConversationReply](n, actors.KindWorkspace, w.id, &kitpb.CreateConversation{
				ConversationId: ids.New(), Kind: "dm", Visibility: "private", MemberIds: w.users,
			})
			wantCode(t, err, kiterr.Validation, "memberIds[1]")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
