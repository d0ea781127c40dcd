package kitclient

import (
	"context"
	"net/http"
)

// AuthTest introspects the token (GET /auth/test).
func (c *Client) AuthTest(ctx context.Context) (*AuthTest, error) {
	var out AuthTest
	return &out, c.doJSON(ctx, c.get("/auth/test", nil, familyRead), &out)
}

// RotateToken replaces the client's bot token (POST /auth/rotate): the
// answer's Token is the new one, and the old one works until
// PreviousTokenExpiresAt. A token rotates once; the client keeps sending
// the old token (use [Client.WithToken]). Never retried after a failure
// that may have rotated it.
func (c *Client) RotateToken(ctx context.Context) (*Rotation, error) {
	var out Rotation
	return &out, c.doJSON(ctx, c.write(http.MethodPost, "/auth/rotate", nil), &out)
}

// ExchangeCode trades an authorization code for a token
// (POST /oauth/kit.access, grant authorization_code). The client's own
// token is not sent: the client credentials are in the body. A code is
// single use, so the call is not retried after a failure that may have
// spent it.
func (c *Client) ExchangeCode(ctx context.Context, x CodeExchange) (*Grant, error) {
	body := struct {
		GrantType string `json:"grantType"`
		CodeExchange
	}{"authorization_code", x}
	return c.kitAccess(ctx, body)
}

// RefreshToken trades a refresh token for a new user token and refresh
// token (POST /oauth/kit.access, grant refresh_token). A refresh token is
// single use and using it twice revokes the whole grant, so the call is
// not retried after a failure that may have spent it.
func (c *Client) RefreshToken(ctx context.Context, x RefreshExchange) (*Grant, error) {
	body := struct {
		GrantType string `json:"grantType"`
		RefreshExchange
	}{"refresh_token", x}
	return c.kitAccess(ctx, body)
}

func (c *Client) kitAccess(ctx context.Context, body any) (*Grant, error) {
	cl := c.write(http.MethodPost, "/oauth/kit.access", body)
	cl.family, cl.noAuth = familyNone, true
	var out Grant
	return &out, c.doJSON(ctx, cl, &out)
}
