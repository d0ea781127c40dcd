package kitclient

import "encoding/json"

// The Web API's wire types (docs/api.md "Resources" and "Endpoints", docs/openapi/webapi.json).
// Timestamps stay the ISO 8601 strings the server sent and nullable fields
// are pointers, so that a value decoded and encoded again is what the server
// said.

// AuthTest is the token introspection of GET /auth/test.
type AuthTest struct {
	OK             bool     `json:"ok"`
	TokenType      string   `json:"tokenType"` // "bot" or "user"
	WorkspaceID    string   `json:"workspaceId"`
	InstallationID string   `json:"installationId"`
	KitSlug        string   `json:"kitSlug"`
	BotID          *string  `json:"botId"`
	UserID         *string  `json:"userId"`
	Scopes         []string `json:"scopes"` // the effective scopes
}

// Rotation is the answer of POST /auth/rotate.
type Rotation struct {
	Token                  string `json:"token"`                  // the new bot token, shown once
	PreviousTokenExpiresAt string `json:"previousTokenExpiresAt"` // the rotated token works until then
}

// CodeExchange is the authorization_code grant of POST /oauth/kit.access.
type CodeExchange struct {
	ClientID     string `json:"clientId"` // the Kit id
	ClientSecret string `json:"clientSecret"`
	Code         string `json:"code"`
	RedirectURI  string `json:"redirectUri"`            // the one the code was issued for
	CodeVerifier string `json:"codeVerifier,omitempty"` // PKCE; required for user tokens
}

// RefreshExchange is the refresh_token grant of POST /oauth/kit.access.
type RefreshExchange struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	RefreshToken string `json:"refreshToken"` // single use
}

// Grant is the answer of POST /oauth/kit.access: a bot grant (BotID set) or
// a user grant (UserID, RefreshToken and ExpiresIn set), by TokenType.
type Grant struct {
	TokenType      string       `json:"tokenType"` // "bot" or "user"
	AccessToken    string       `json:"accessToken"`
	RefreshToken   string       `json:"refreshToken,omitempty"`
	ExpiresIn      int          `json:"expiresIn,omitempty"` // seconds
	BotID          string       `json:"botId,omitempty"`
	UserID         string       `json:"userId,omitempty"`
	InstallationID string       `json:"installationId"`
	Workspace      WorkspaceRef `json:"workspace"`
	Scopes         []string     `json:"scopes"`
}

// WorkspaceRef names a workspace.
type WorkspaceRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Conversation is the Web API's Conversation.
type Conversation struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`       // channel, dm, group
	Visibility string  `json:"visibility"` // public, private
	Name       *string `json:"name"`
	Topic      *string `json:"topic"`
	Archived   bool    `json:"archived"`
	CreatedAt  string  `json:"createdAt"`
}

// Member is a conversation member.
type Member struct {
	UserID   string `json:"userId"`
	JoinedAt string `json:"joinedAt"`
}

// Block is one Blocks element (docs/api.md "Blocks", docs/blocks.md), e.g.
// Block{"type": "header", "text": "Deploy finished"}. The server validates
// Blocks and answers a validation_error with the path of the first problem.
type Block map[string]any

// Message is the Web API's Message (docs/api.md "Message"). Text and Blocks are null on a deleted
// message (a tombstone: DeletedAt set).
type Message struct {
	ID             string            `json:"id"`
	ConversationID string            `json:"conversationId"`
	Author         Author            `json:"author"`
	Text           *string           `json:"text"`
	Blocks         []Block           `json:"blocks"`
	ThreadParentID *string           `json:"threadParentId"`
	CreatedAt      string            `json:"createdAt"`
	EditedAt       *string           `json:"editedAt"`
	DeletedAt      *string           `json:"deletedAt"`
	Reactions      []MessageReaction `json:"reactions"`
}

// Author is who posted a message.
type Author struct {
	Kind string `json:"kind"` // user or bot
	ID   string `json:"id"`
}

// MessageReaction is one reaction value on a message and who added it.
type MessageReaction struct {
	Reaction Reaction `json:"reaction"`
	Count    int      `json:"count"`
	UserIDs  []string `json:"userIds"`
}

// Reaction is one of the reaction values of docs/api.md "Reactions".
type Reaction string

// The reactions of docs/api.md "Reactions".
const (
	ThumbsUp  Reaction = "thumbs_up"
	Heart     Reaction = "heart"
	Laugh     Reaction = "laugh"
	Celebrate Reaction = "celebrate"
	Eyes      Reaction = "eyes"
	Thinking  Reaction = "thinking"
	Thanks    Reaction = "thanks"
	Check     Reaction = "check"
)

// PostMessage is the body of POST /messages.
type PostMessage struct {
	ConversationID string  `json:"conversationId"`
	Text           string  `json:"text"` // required: the notification and search fallback of Blocks
	Blocks         []Block `json:"blocks,omitempty"`
	ThreadParentID string  `json:"threadParentId,omitempty"` // a top-level message: post a reply
	// IdempotencyKey is sent as the Idempotency-Key header; empty: the
	// client makes a random one for the call. Set it to make a post that
	// may be repeated across calls (or processes) happen once.
	IdempotencyKey string `json:"-"`
}

// EditMessage is the body of PATCH /messages/{id}.
type EditMessage struct {
	Text string
	// Blocks replaces the message's Blocks; nil keeps them unless
	// ClearBlocks is set.
	Blocks      []Block
	ClearBlocks bool
}

// MarshalJSON leaves blocks out (keep them), sends them, or sends null
// (remove them), as PATCH /messages/{id} distinguishes the three.
func (e EditMessage) MarshalJSON() ([]byte, error) {
	w := struct {
		Text   string   `json:"text"`
		Blocks *[]Block `json:"blocks,omitempty"`
	}{Text: e.Text}
	var null []Block
	switch {
	case e.ClearBlocks:
		w.Blocks = &null
	case e.Blocks != nil:
		w.Blocks = &e.Blocks
	}
	return json.Marshal(w)
}

// reactionBody is the body of POST /reactions.
type reactionBody struct {
	MessageID string   `json:"messageId"`
	Reaction  Reaction `json:"reaction"`
}

// uploadBody is the body of POST /files.
type uploadBody struct {
	ConversationID string `json:"conversationId"`
	Name           string `json:"name"`
	MimeType       string `json:"mimeType"`
	ContentBase64  string `json:"contentBase64"`
}

// File is the Web API's File.
type File struct {
	ID               string `json:"id"`
	ConversationID   string `json:"conversationId"`
	Name             string `json:"name"`
	MimeType         string `json:"mimeType"`
	SizeBytes        int64  `json:"sizeBytes"`
	UploadedByUserID string `json:"uploadedByUserId"`
	CreatedAt        string `json:"createdAt"`
}

// FileContent is the answer of GET /files/{id}/content.
type FileContent struct {
	Data     []byte
	MimeType string // the stored type (X-Service-Content-Type)
}

// User is the Web API's User.
type User struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
	Role        string `json:"role"`            // owner, admin, member, guest
	Email       string `json:"email,omitempty"` // only with scope users:read.email
}

// Bot is the Kit bot of a bot token.
type Bot struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
}

// Me is the answer of GET /users/me: the member of a user token or the Kit
// bot of a bot token; the other is nil.
type Me struct {
	User *User `json:"user"`
	Bot  *Bot  `json:"bot"`
}

// Run is a run of a Kit tool (GET /runs/{id}); the contract does not show its
// fields: these are kitd's (docs/deliveries.md "Tool calls and runs").
type Run struct {
	ID              string          `json:"id"`
	Status          string          `json:"status"` // queued, running, succeeded, failed
	Tool            string          `json:"tool"`
	RequesterUserID string          `json:"requesterUserId"`
	ConversationID  string          `json:"conversationId"`
	CreatedAt       string          `json:"createdAt"`
	FinishedAt      *string         `json:"finishedAt"`
	Result          json.RawMessage `json:"result"` // null unless succeeded
	ErrorCode       *string         `json:"errorCode"`
}

// Installation is the Web API's Installation.
type Installation struct {
	ID              string             `json:"id"`
	Kit             InstalledKit       `json:"kit"`
	Workspace       WorkspaceRef       `json:"workspace"`
	BotID           *string            `json:"botId"`
	Scopes          InstallationScopes `json:"scopes"`
	ChannelIDs      []string           `json:"channelIds"` // channels the Kit bot was added to
	ModelDataPolicy string             `json:"modelDataPolicy"`
}

// InstalledKit is the installed Kit and version.
type InstalledKit struct {
	Slug        string `json:"slug"`
	Version     string `json:"version"`
	DisplayName string `json:"displayName"`
}

// InstallationScopes are the scopes granted to the bot and to user tokens.
type InstallationScopes struct {
	Bot  []string `json:"bot"`
	User []string `json:"user"`
}

// WebhookMessage is the body of an incoming-webhook post.
type WebhookMessage struct {
	Text   string  `json:"text"` // 1-4000 characters, not blank
	Blocks []Block `json:"blocks,omitempty"`
}

// PageOptions selects one page of a list.
type PageOptions struct {
	Cursor string // a NextCursor, passed unchanged; "" = the first page
	Limit  int    // 1-200; 0 = the server's default (50)
}

// ConversationPage is one page of GET /conversations.
type ConversationPage struct {
	Conversations []Conversation `json:"conversations"`
	NextCursor    *string        `json:"nextCursor"` // nil on the last page
}

// MemberPage is one page of GET /conversations/{id}/members.
type MemberPage struct {
	Members    []Member `json:"members"`
	NextCursor *string  `json:"nextCursor"`
}

// MessagePage is one page of a conversation's messages or a thread's
// replies, newest first.
type MessagePage struct {
	Messages   []Message `json:"messages"`
	NextCursor *string   `json:"nextCursor"`
}

// UserPage is one page of GET /users.
type UserPage struct {
	Users      []User  `json:"users"`
	NextCursor *string `json:"nextCursor"`
}
