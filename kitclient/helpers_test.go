package kitclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// reply is one canned answer of a fake server.
type reply struct {
	status int
	header map[string]string
	body   string
	hangUp bool // close the connection without an answer
}

// seen is one request the fake server got.
type seen struct {
	method, uri string
	header      http.Header
	body        string
}

// fakeServer answers its replies in order (the last one again once they
// run out) and records every request.
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	got     []seen
}

func newFakeServer(t *testing.T, replies ...reply) *fakeServer {
	t.Helper()
	f := &fakeServer{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.got)
	f.got = append(f.got, seen{r.Method, r.URL.RequestURI(), r.Header.Clone(), string(body)})
	rp := f.replies[min(n, len(f.replies)-1)]
	f.mu.Unlock()
	if rp.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	if rp.body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rp.status)
	io.WriteString(w, rp.body)
}

func (f *fakeServer) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...)
}

// fakeClock is a clock whose sleeps pass at once and are recorded.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	return nil
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// testClient is a client of f on a fake clock.
func testClient(f *fakeServer, clock *fakeClock, opts ...Option) *Client {
	return New(f.URL+"/api/v1", "kbot_test", append([]Option{WithClock(clock.now, clock.sleep)}, opts...)...)
}

const errorBody = `{"code":"%s","message":"%s","correlationId":"c-1"}`
