package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// Client sends the requests of a run to the nodes.
type Client struct {
	// HTTP is the client used; nil: one of its own, without a proxy from
	// the environment and with enough idle connections for 16 writers.
	HTTP *http.Client
	// Observe, when set, is given every exchange that got an answer (the
	// e2e suite checks them against docs/openapi). It is called from many
	// goroutines at once.
	Observe func(Exchange)
}

// Exchange is one request and its answer, kept whole.
type Exchange struct {
	Method, URL string
	ReqHeader   http.Header
	ReqBody     []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// code returns the error body's code, or "".
func (e *Exchange) code() string {
	var b struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(e.Body, &b)
	return b.Code
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:               nil,
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     30 * time.Second,
}}

// do sends one request within timeout (0: ctx alone bounds it). body nil
// sends none; anything else is JSON-encoded. An error means no answer.
func (c *Client) do(ctx context.Context, timeout time.Duration, method, url, token string, hdr map[string]string, body any) (*Exchange, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var reqBody []byte
	var rd io.Reader
	if body != nil {
		var err error
		if reqBody, err = json.Marshal(body); err != nil {
			return nil, err
		}
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	e := &Exchange{Method: method, URL: url, ReqHeader: req.Header, ReqBody: reqBody, Status: res.StatusCode, Header: res.Header}
	if e.Body, err = io.ReadAll(res.Body); err != nil {
		return nil, err
	}
	if c.Observe != nil {
		c.Observe(*e)
	}
	return e, nil
}
