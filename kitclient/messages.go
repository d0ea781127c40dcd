package kitclient

import (
	"context"
	"iter"
	"net/http"
	"net/url"
)

// MessagesPage returns one page of a conversation's messages, top-level
// messages and replies, newest first (GET /conversations/{id}/messages).
func (c *Client) MessagesPage(ctx context.Context, conversationID string, p PageOptions) (*MessagePage, error) {
	var out MessagePage
	return &out, c.doJSON(ctx, c.get("/conversations/"+pathID(conversationID)+"/messages", pageQuery(p), familyRead), &out)
}

// Messages yields a conversation's messages, newest first, to its first.
func (c *Client) Messages(ctx context.Context, conversationID string, limit int) iter.Seq2[Message, error] {
	return walk(ctx, limit, func(ctx context.Context, p PageOptions) ([]Message, *string, error) {
		pg, err := c.MessagesPage(ctx, conversationID, p)
		return pg.Messages, pg.NextCursor, err
	})
}

// RepliesPage returns one page of the replies to a top-level message,
// newest first (GET /messages/{id}/replies).
func (c *Client) RepliesPage(ctx context.Context, messageID string, p PageOptions) (*MessagePage, error) {
	var out MessagePage
	return &out, c.doJSON(ctx, c.get("/messages/"+pathID(messageID)+"/replies", pageQuery(p), familyRead), &out)
}

// Replies yields every reply to a top-level message, newest first.
func (c *Client) Replies(ctx context.Context, messageID string, limit int) iter.Seq2[Message, error] {
	return walk(ctx, limit, func(ctx context.Context, p PageOptions) ([]Message, *string, error) {
		pg, err := c.RepliesPage(ctx, messageID, p)
		return pg.Messages, pg.NextCursor, err
	})
}

// Message returns one message (GET /messages/{id}).
func (c *Client) Message(ctx context.Context, id string) (*Message, error) {
	return c.message(ctx, c.get("/messages/"+pathID(id), nil, familyRead))
}

// PostMessage posts a message (POST /messages). It always sends an
// Idempotency-Key (m.IdempotencyKey, or a random one made for this call),
// so its retries after a lost answer or a server failure post it once: the
// server answers a repeat with the message it stored.
func (c *Client) PostMessage(ctx context.Context, m PostMessage) (*Message, error) {
	cl := c.write(http.MethodPost, "/messages", m)
	if cl.key = m.IdempotencyKey; cl.key == "" {
		cl.key = c.newKey()
	}
	return c.message(ctx, cl)
}

// EditMessage replaces a message's text, and its Blocks as e says
// (PATCH /messages/{id}).
func (c *Client) EditMessage(ctx context.Context, id string, e EditMessage) (*Message, error) {
	return c.message(ctx, c.write(http.MethodPatch, "/messages/"+pathID(id), e))
}

// DeleteMessage deletes a message and returns its tombstone
// (DELETE /messages/{id}); deleting it again answers the same tombstone.
func (c *Client) DeleteMessage(ctx context.Context, id string) (*Message, error) {
	return c.message(ctx, c.write(http.MethodDelete, "/messages/"+pathID(id), nil))
}

func (c *Client) message(ctx context.Context, cl call) (*Message, error) {
	var out struct {
		Message Message `json:"message"`
	}
	return &out.Message, c.doJSON(ctx, cl, &out)
}

// AddReaction adds the member's reaction to a message (POST /reactions;
// user tokens only). Adding one that is there already changes nothing.
func (c *Client) AddReaction(ctx context.Context, messageID string, r Reaction) error {
	_, err := c.do(ctx, c.write(http.MethodPost, "/reactions", reactionBody{MessageID: messageID, Reaction: r}))
	return err
}

// RemoveReaction removes the member's reaction from a message
// (DELETE /reactions; user tokens only). Removing one that is not there
// changes nothing.
func (c *Client) RemoveReaction(ctx context.Context, messageID string, r Reaction) error {
	q := url.Values{"messageId": {messageID}, "reaction": {string(r)}}
	_, err := c.do(ctx, c.write(http.MethodDelete, "/reactions?"+q.Encode(), nil))
	return err
}
