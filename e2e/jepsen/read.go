package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// ReadAll reads every conversation's whole history through every node,
// oldest first. A read that keeps failing (no answer, 5xx) is retried
// until ctx ends; its Read then carries the error.
func ReadAll(ctx context.Context, c *Client, nodes []string, token string, convs []string) []Read {
	var reads []Read
	for _, node := range nodes {
		for _, conv := range convs {
			ms, err := readHistory(ctx, c, node, token, conv)
			reads = append(reads, Read{Node: node, Conv: conv, Messages: ms, Err: err})
		}
	}
	return reads
}

// readHistory walks one conversation's pages (newest first, 200 a page).
func readHistory(ctx context.Context, c *Client, node, token, conv string) ([]Message, error) {
	var ms []Message
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			return nil, fmt.Errorf("more than 10,000 pages")
		}
		q := url.Values{"limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		e, err := readPage(ctx, c, node+"/api/v1/conversations/"+conv+"/messages?"+q.Encode(), token)
		if err != nil {
			return nil, err
		}
		var b struct {
			Messages []struct {
				ID             string `json:"id"`
				ConversationID string `json:"conversationId"`
				Text           string `json:"text"`
			} `json:"messages"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(e.Body, &b); err != nil {
			return nil, fmt.Errorf("page %d: %v", page, err)
		}
		for _, m := range b.Messages {
			ms = append(ms, Message{ID: m.ID, Conv: m.ConversationID, Text: m.Text})
		}
		if b.NextCursor == nil {
			slices.Reverse(ms)
			return ms, nil
		}
		cursor = *b.NextCursor
	}
}

// readPage gets one page, retrying what a client may retry.
func readPage(ctx context.Context, c *Client, u, token string) (*Exchange, error) {
	backoff := 50 * time.Millisecond
	for {
		e, err := c.do(ctx, 10*time.Second, "GET", u, token, nil, nil)
		switch {
		case err == nil && e.Status == 200:
			return e, nil
		case err == nil && e.Status < 500:
			return nil, fmt.Errorf("GET %s: %d %s", u, e.Status, e.code())
		case err == nil:
			err = fmt.Errorf("GET %s: %d %s", u, e.Status, e.code())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%v (gave up: %v)", err, ctx.Err())
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Second)
		}
	}
}
