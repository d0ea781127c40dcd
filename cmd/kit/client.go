package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kitd/kitd/kitclient"
	"github.com/kitd/kitd/kitclient/dev"
)

// maxResponse bounds what the client reads of one answer: the largest
// developer API answer (a Kit detail with many versions) is far below it.
const maxResponse = 16 << 20

// Client calls the developer API ({base_url}/dev/..., docs/api.md "Developer API") of one
// kitd with one developer token.
type Client struct {
	base  string // {base_url}, e.g. http://127.0.0.1:8080/api/v1, no trailing slash
	token string
	http  *http.Client
}

// NewClient returns a client of the API at base ({base_url}).
func NewClient(base, token string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// APIError is an answer other than 2xx: the docs/api.md "Errors" error body and
// the Retry-After seconds of a 429.
type APIError struct {
	Status        int
	Code          string
	Message       string
	CorrelationID string
	RetryAfter    int // seconds; 0 when the answer had no Retry-After
}

func (e *APIError) Error() string {
	var b strings.Builder
	if e.Code == "" {
		// Not a kitd error body (a proxy, or not kitd at all).
		fmt.Fprintf(&b, "server answered HTTP %d %s without an error body", e.Status, http.StatusText(e.Status))
	} else {
		fmt.Fprintf(&b, "%s (%s, correlation id %s)", e.Message, e.Code, e.CorrelationID)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, "; retry after %d s", e.RetryAfter)
	}
	return b.String()
}

// NetworkError is a request that got no answer.
type NetworkError struct {
	Base string
	Err  error
}

func (e *NetworkError) Error() string {
	return fmt.Sprintf("cannot reach the Kit API at %s: %v", e.Base, e.Err)
}

func (e *NetworkError) Unwrap() error { return e.Err }

// Me returns who the token acts as.
func (c *Client) Me(ctx context.Context) (*dev.Me, error) {
	var out dev.Me
	_, err := c.do(ctx, "GET", "/dev/me", nil, &out)
	return &out, err
}

// Validate checks a manifest without changing anything.
func (c *Client) Validate(ctx context.Context, manifest string) (*dev.Validation, error) {
	var out dev.Validation
	_, err := c.do(ctx, "POST", "/dev/kits/validate", dev.ValidateRequest{Manifest: manifest}, &out)
	return &out, err
}

// UploadVersion registers a manifest version, and publishes it when asked.
func (c *Client) UploadVersion(ctx context.Context, manifest string, publish bool) (*dev.VersionResult, error) {
	var out dev.VersionResult
	_, err := c.do(ctx, "POST", "/dev/kits/versions", dev.UploadRequest{Manifest: manifest, Publish: publish}, &out)
	return &out, err
}

// PublishVersion publishes a registered version.
func (c *Client) PublishVersion(ctx context.Context, kitID, version string) (*dev.VersionResult, error) {
	var out dev.VersionResult
	_, err := c.do(ctx, "POST", "/dev/kits/"+url.PathEscape(kitID)+"/versions/"+url.PathEscape(version)+"/publish", map[string]any{}, &out)
	return &out, err
}

// Kits lists the workspace's Kits in creation order.
func (c *Client) Kits(ctx context.Context) (*dev.KitList, error) {
	var out dev.KitList
	_, err := c.do(ctx, "GET", "/dev/kits", nil, &out)
	return &out, err
}

// Kit returns a Kit's detail.
func (c *Client) Kit(ctx context.Context, kitID string) (*dev.KitDetailResponse, error) {
	var out dev.KitDetailResponse
	_, err := c.do(ctx, "GET", "/dev/kits/"+url.PathEscape(kitID), nil, &out)
	return &out, err
}

// LogQuery selects a page of a Kit's developer log; zero values are left out.
type LogQuery struct {
	Cursor, Source, Level string
	Limit                 int
}

// Logs returns one page of a Kit's developer log, newest first.
func (c *Client) Logs(ctx context.Context, kitID string, q LogQuery) (*dev.LogPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"cursor": q.Cursor, "source": q.Source, "level": q.Level} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/dev/kits/" + url.PathEscape(kitID) + "/logs"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out dev.LogPage
	_, err := c.do(ctx, "GET", path, nil, &out)
	return &out, err
}

// DevInstall registers a manifest in the developer sandbox with its
// endpoints moved onto the origin of tunnelURL, and installs it there.
func (c *Client) DevInstall(ctx context.Context, manifest, tunnelURL string) (*dev.DevInstall, error) {
	var out dev.DevInstall
	_, err := c.do(ctx, "POST", "/dev/sandbox/dev-install", dev.DevInstallRequest{Manifest: manifest, URL: tunnelURL}, &out)
	return &out, err
}

// AddDomain adds a domain to a Kit (method "" = the server's default, dns).
// added is false when the Kit already had it.
func (c *Client) AddDomain(ctx context.Context, kitID, domain, method string) (res *dev.DomainResult, added bool, err error) {
	body := dev.AddDomainRequest{Domain: domain, Method: method}
	var out dev.DomainResult
	status, err := c.do(ctx, "POST", "/dev/kits/"+url.PathEscape(kitID)+"/domains", body, &out)
	return &out, status == http.StatusCreated, err
}

// VerifyDomain checks the proof of a domain's method.
func (c *Client) VerifyDomain(ctx context.Context, kitID, domain string) (*dev.DomainResult, error) {
	var out dev.DomainResult
	_, err := c.do(ctx, "POST", c.domainPath(kitID, domain)+"/verify", map[string]any{}, &out)
	return &out, err
}

// RemoveDomain removes a domain from a Kit.
func (c *Client) RemoveDomain(ctx context.Context, kitID, domain string) error {
	_, err := c.do(ctx, "DELETE", c.domainPath(kitID, domain), nil, nil)
	return err
}

// CreateInstallLink makes (or replaces) the Kit's install link.
func (c *Client) CreateInstallLink(ctx context.Context, kitID string) (*dev.InstallLinkResult, error) {
	var out dev.InstallLinkResult
	_, err := c.do(ctx, "POST", "/dev/kits/"+url.PathEscape(kitID)+"/install-link", map[string]any{}, &out)
	return &out, err
}

// DeleteInstallLink ends the Kit's install link.
func (c *Client) DeleteInstallLink(ctx context.Context, kitID string) (*dev.InstallLinkResult, error) {
	var out dev.InstallLinkResult
	_, err := c.do(ctx, "DELETE", "/dev/kits/"+url.PathEscape(kitID)+"/install-link", nil, &out)
	return &out, err
}

// Deliveries reads a page of an installation's deliveries.
func (c *Client) Deliveries(ctx context.Context, installationID, cursor string, limit int) (*dev.DeliveryPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/dev/installations/" + url.PathEscape(installationID) + "/deliveries"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out dev.DeliveryPage
	_, err := c.do(ctx, "GET", path, nil, &out)
	return &out, err
}

// Redeliver sends one event again (eventID), or every event dead-lettered
// since deadSince (RFC 3339).
func (c *Client) Redeliver(ctx context.Context, installationID, eventID, deadSince string) (*dev.Redelivered, error) {
	body := map[string]any{}
	if eventID != "" {
		body["eventId"] = eventID
	} else {
		body["deadSince"] = deadSince
	}
	var out dev.Redelivered
	_, err := c.do(ctx, "POST", "/dev/installations/"+url.PathEscape(installationID)+"/deliveries/redeliver", body, &out)
	return &out, err
}

// TriggerEvent has the server send a test event of kind eventType to the
// Kit's installation in the sandbox.
func (c *Client) TriggerEvent(ctx context.Context, kitID, eventType string) (*dev.TestEvent, error) {
	var out dev.TestEvent
	_, err := c.do(ctx, "POST", "/dev/kits/"+url.PathEscape(kitID)+"/test-events", map[string]any{"type": eventType}, &out)
	return &out, err
}

func (c *Client) domainPath(kitID, domain string) string {
	return "/dev/kits/" + url.PathEscape(kitID) + "/domains/" + url.PathEscape(domain)
}

// do sends one request and decodes a 2xx answer into out (when not nil). A
// non-2xx answer is an *APIError, no answer a *NetworkError.
func (c *Client) do(ctx context.Context, method, path string, body, out any) (status int, err error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "kit-cli")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		// url.Error repeats the method and URL; the base is enough.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, &NetworkError{Base: c.base, Err: err}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		if ctx.Err() != nil {
			return res.StatusCode, ctx.Err()
		}
		return res.StatusCode, &NetworkError{Base: c.base, Err: fmt.Errorf("reading the answer to %s %s: %w", method, path, err)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, apiError(res, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return res.StatusCode, fmt.Errorf("decode the answer to %s %s: %w", method, path, err)
		}
	}
	return res.StatusCode, nil
}

// apiError reads the error body of a non-2xx answer. A body that is not the
// error body of docs/api.md "Errors" leaves Code empty, so the message says what came instead.
func apiError(res *http.Response, data []byte) *APIError {
	e := &APIError{Status: res.StatusCode}
	var body kitclient.ErrorBody
	if json.Unmarshal(data, &body) == nil && body.Code != "" {
		e.Code, e.Message, e.CorrelationID = body.Code, body.Message, body.CorrelationID
	}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && n > 0 {
			e.RetryAfter = n
		}
	}
	return e
}
