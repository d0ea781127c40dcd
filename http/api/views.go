package api

import (
	"encoding/json"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/msgjson"
	"github.com/kitd/kitd/kitclient"
	"github.com/kitd/kitd/kitclient/dev"
	"github.com/kitd/kitd/proto/kitpb"
)

// The JSON shapes of docs/api.md "Resources". Records travel as protobuf;
// these views decide how they look on the wire, but for a message, which
// internal/msgjson writes by hand (encode_test.go holds it to messageView).
// A view is the public client's own type (kitclient, kitclient/dev) where
// that type says the same bytes, so the client decodes exactly what the
// server writes and the shape is written once; the server may depend on
// its client's wire types, never the other way round.

// timeFormat is ISO 8601 in UTC with milliseconds.
const timeFormat = msgjson.TimeFormat

func isoTime(ns int64) string { return time.Unix(0, ns).UTC().Format(timeFormat) }

func optTime(ns int64) *string {
	if ns == 0 {
		return nil
	}
	s := isoTime(ns)
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type conversationView = kitclient.Conversation

// conversationBody is the answer {conversation}.
type conversationBody struct {
	Conversation conversationView `json:"conversation"`
}

func viewConversation(c *kitpb.Conversation) conversationView {
	return conversationView{
		ID: c.Id, Kind: c.Kind, Visibility: c.Visibility, Name: c.Name, Topic: c.Topic,
		Archived: c.Archived, CreatedAt: isoTime(c.CreatedAt),
	}
}

type memberView = kitclient.Member

type authorView = kitclient.Author

type messageView struct {
	ID             string          `json:"id"`
	ConversationID string          `json:"conversationId"`
	Author         authorView      `json:"author"`
	Text           *string         `json:"text"`
	Blocks         json.RawMessage `json:"blocks"`
	ThreadParentID *string         `json:"threadParentId"`
	CreatedAt      string          `json:"createdAt"`
	EditedAt       *string         `json:"editedAt"`
	DeletedAt      *string         `json:"deletedAt"`
	Reactions      []reactionView  `json:"reactions"`
}

// reactionView is one reaction value on a message (docs/decisions.md).
type reactionView = kitclient.MessageReaction

var jsonNull = json.RawMessage("null")

func viewMessage(m *kitpb.Message) messageView {
	v := messageView{
		ID: m.Id, ConversationID: m.ConversationId,
		Author:         authorView{Kind: m.AuthorKind, ID: m.AuthorId},
		Blocks:         jsonNull,
		ThreadParentID: optString(m.ThreadParentId),
		CreatedAt:      isoTime(m.CreatedAt), EditedAt: optTime(m.EditedAt), DeletedAt: optTime(m.DeletedAt),
		Reactions: []reactionView{},
	}
	if m.DeletedAt == 0 {
		text := m.Text
		v.Text = &text
		if len(m.Blocks) > 0 {
			v.Blocks = m.Blocks
		}
		for _, r := range m.Reactions {
			v.Reactions = append(v.Reactions, reactionView{Reaction: kitclient.Reaction(r.Reaction), Count: len(r.UserIds), UserIDs: r.UserIds})
		}
	}
	return v
}

func viewMessages(ms []*kitpb.Message) []messageView {
	out := make([]messageView, len(ms))
	for i, m := range ms {
		out[i] = viewMessage(m)
	}
	return out
}

type fileView = kitclient.File

func viewFile(f *kitpb.File) fileView {
	return fileView{
		ID: f.Id, ConversationID: f.ConversationId, Name: f.Name, MimeType: f.MimeType,
		SizeBytes: f.SizeBytes, UploadedByUserID: f.UploadedByUserId, CreatedAt: isoTime(f.CreatedAt),
	}
}

// userView leaves email out when empty: without users:read.email, or for
// a user without one.
type userView = kitclient.User

func viewUser(u *kitpb.User, withEmail bool) userView {
	v := userView{ID: u.Id, DisplayName: u.DisplayName, Role: u.Role}
	if withEmail {
		v.Email = u.Email
	}
	return v
}

type installationView = kitclient.Installation

// installationBody is the answer {installation}.
type installationBody struct {
	Installation installationView `json:"installation"`
}

func viewInstallation(in *kitpb.Installation) installationView {
	var v installationView
	v.ID = in.Id
	v.Kit.Slug, v.Kit.Version, v.Kit.DisplayName = in.KitSlug, in.KitVersion, in.KitDisplayName
	v.Workspace.ID, v.Workspace.Name = in.WorkspaceId, in.WorkspaceName
	if actors.HasBot(in) {
		v.BotID = optString(in.BotId) // null for a Kit without a bot (SPEC.md 2: botId uuid?)
	}
	v.Scopes.Bot, v.Scopes.User = nonNil(in.BotScopes), nonNil(in.UserScopes)
	v.ChannelIDs = nonNil(in.ChannelIds)
	v.ModelDataPolicy = "none"
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type workspaceView struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Sandbox bool   `json:"sandbox"`
}

type versionView = dev.Version

func viewVersion(v *kitpb.KitVersion) versionView {
	return versionView{
		ID: v.Id, Version: v.Version, Published: v.Published, PublishedAt: optTime(v.PublishedAt),
		CreatedAt: isoTime(v.CreatedAt), ConsentHash: v.ConsentHash, ManifestHash: v.ManifestHash,
		Distribution: v.Distribution,
	}
}

// kitView is a Kit of the developer API (docs/api.md "Kit").
type kitView = dev.Kit

func viewKit(k *kitpb.Kit, installedHere bool) kitView {
	return kitView{
		KitID: k.Id, Slug: k.Slug, DisplayName: k.DisplayName, Distribution: k.Distribution, State: k.State,
		CreatedAt: isoTime(k.CreatedAt), LatestVersion: optString(k.LatestVersion),
		LatestPublishedVersion: optString(k.LatestPublishedVersion), InstalledHere: installedHere,
	}
}

// logEntryView is a developer log entry (docs/api.md "Developer log entry").
type logEntryView = dev.LogEntry

func viewLogEntry(e *kitpb.DevLogEntry) logEntryView {
	return logEntryView{
		ID: e.Id, At: isoTime(e.At), Source: e.Source, Level: e.Level, Event: e.Event,
		InstallationID: optString(e.InstallationId), Status: optString(e.Status), ErrorCode: optString(e.ErrorCode),
		DurationMs: e.DurationMs, HTTPStatus: optInt(e.HttpStatus), Attempt: optInt(e.Attempt),
	}
}

// optInt is p as an int, nil for nil.
func optInt(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}
