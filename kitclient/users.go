package kitclient

import (
	"context"
	"iter"
)

// UsersPage returns one page of the workspace's active members
// (GET /users); Email is set only with scope users:read.email.
func (c *Client) UsersPage(ctx context.Context, p PageOptions) (*UserPage, error) {
	var out UserPage
	return &out, c.doJSON(ctx, c.get("/users", pageQuery(p), familyRead), &out)
}

// Users yields every active member of the workspace.
func (c *Client) Users(ctx context.Context, limit int) iter.Seq2[User, error] {
	return walk(ctx, limit, func(ctx context.Context, p PageOptions) ([]User, *string, error) {
		pg, err := c.UsersPage(ctx, p)
		return pg.Users, pg.NextCursor, err
	})
}

// User returns one member (GET /users/{id}).
func (c *Client) User(ctx context.Context, id string) (*User, error) {
	var out struct {
		User User `json:"user"`
	}
	return &out.User, c.doJSON(ctx, c.get("/users/"+pathID(id), nil, familyRead), &out)
}

// Me says whom the token acts as (GET /users/me).
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var out Me
	return &out, c.doJSON(ctx, c.get("/users/me", nil, familyRead), &out)
}

// Run returns a run of a Kit tool (GET /runs/{id}; user tokens with
// runs:read only).
func (c *Client) Run(ctx context.Context, id string) (*Run, error) {
	var out struct {
		Run Run `json:"run"`
	}
	return &out.Run, c.doJSON(ctx, c.get("/runs/"+pathID(id), nil, familyRead), &out)
}

// Installation returns the token's installation (GET /installation).
func (c *Client) Installation(ctx context.Context) (*Installation, error) {
	var out struct {
		Installation Installation `json:"installation"`
	}
	return &out.Installation, c.doJSON(ctx, c.get("/installation", nil, familyRead), &out)
}
