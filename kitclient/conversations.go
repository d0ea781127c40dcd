package kitclient

import (
	"context"
	"iter"
)

// ConversationsPage returns one page of the token's conversations
// (GET /conversations): for a bot token the channels the Kit bot was added
// to, for a user token the member's conversations.
func (c *Client) ConversationsPage(ctx context.Context, p PageOptions) (*ConversationPage, error) {
	var out ConversationPage
	return &out, c.doJSON(ctx, c.get("/conversations", pageQuery(p), familyRead), &out)
}

// Conversations yields every conversation of the token, fetching pages of
// limit (0: the server's default).
func (c *Client) Conversations(ctx context.Context, limit int) iter.Seq2[Conversation, error] {
	return walk(ctx, limit, func(ctx context.Context, p PageOptions) ([]Conversation, *string, error) {
		pg, err := c.ConversationsPage(ctx, p)
		return pg.Conversations, pg.NextCursor, err
	})
}

// Conversation returns one conversation (GET /conversations/{id}).
func (c *Client) Conversation(ctx context.Context, id string) (*Conversation, error) {
	var out struct {
		Conversation Conversation `json:"conversation"`
	}
	return &out.Conversation, c.doJSON(ctx, c.get("/conversations/"+pathID(id), nil, familyRead), &out)
}

// MembersPage returns one page of a conversation's members
// (GET /conversations/{id}/members).
func (c *Client) MembersPage(ctx context.Context, conversationID string, p PageOptions) (*MemberPage, error) {
	var out MemberPage
	return &out, c.doJSON(ctx, c.get("/conversations/"+pathID(conversationID)+"/members", pageQuery(p), familyRead), &out)
}

// Members yields every member of a conversation.
func (c *Client) Members(ctx context.Context, conversationID string, limit int) iter.Seq2[Member, error] {
	return walk(ctx, limit, func(ctx context.Context, p PageOptions) ([]Member, *string, error) {
		pg, err := c.MembersPage(ctx, conversationID, p)
		return pg.Members, pg.NextCursor, err
	})
}
