package api

import (
	"bytes"
	"strings"

	"github.com/valyala/fasthttp"
)

// span is where a path parameter is in the path.
type span struct{ from, to int }

// target is where a request goes: its host, the row of its route (nil for
// a path the host does not know) and its parameters within rest.
type target struct {
	host  host
	route *route
	row   int    // the index of route in routes
	rest  []byte // the path after the host's prefix (the app host's without a trailing slash)
	at    [maxParams]span
	n     int // parameters in at
}

// resolve finds the target of a request. It only reads the request.
func resolve(ctx *fasthttp.RequestCtx) target {
	var t target
	if sent := ctx.URI().PathOriginal(); !plainPath(sent) {
		// No route; on the hooks host its one webhook 404 (rowOf), as
		// for a trailing slash: a webhook URL answers no other 404.
		if hasPrefix(sent, "/hooks/") {
			t.host = hostHooks
		}
		return t
	}
	path := ctx.Path()
	switch {
	case hasPrefix(path, "/api/v1/"):
		t.host = hostAPI
		if rest := path[len("/api/v1/"):]; hasPrefix(rest, "dev/") || string(rest) == "dev" {
			t.host = hostDev
		}
	case hasPrefix(path, "/ops/v1/"):
		t.host = hostOps
	case hasPrefix(path, "/hooks/"):
		t.host = hostHooks
	case hasPrefix(path, "/app/api/"):
		t.host = hostMember
	case string(path) == "/app" || hasPrefix(path, "/app/"):
		t.host = hostApp
	case string(path) == "/healthz" || string(path) == "/livez" || string(path) == "/readyz":
		t.host = hostHealth
	case string(path) == "/metrics":
		t.host = hostMetrics
	case string(path) == "/":
		t.host = hostRoot
	default:
		return t
	}
	if t.host == hostApp {
		// /app//x is /app/x, and /app is /app/; a browser's page takes a
		// trailing slash too.
		t.rest = path[len("/app"):]
		if len(t.rest) > 0 {
			t.rest = t.rest[1:]
		}
		if n := len(t.rest); n > 0 && t.rest[n-1] == '/' {
			t.rest = t.rest[:n-1]
		}
	} else {
		// The JSON hosts match a path as their documents spell it: a
		// trailing slash makes a path no document lists, answered 404
		// (docs/decisions.md "Web API").
		t.rest = path[len(hostPrefix[t.host]):]
	}
	method := ctx.Method()
	if string(method) == fasthttp.MethodHead {
		// RFC 9110 9.3.2: HEAD is GET without the content (fasthttp
		// leaves the body out), so it answers what GET would, 404 where
		// GET does.
		method = []byte(fasthttp.MethodGet)
	}
	for i := range routes {
		rt := &routes[i]
		if rt.host != t.host || string(method) != rt.method && rt.method != anyMethod {
			continue
		}
		if n, ok := match(rt.path[len(hostPrefix[rt.host]):], t.rest, &t.at); ok {
			t.route, t.row, t.n = rt, i, n
			break
		}
	}
	return t
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// match reports whether rest fits pattern, segment by segment, and notes
// where the parameters are. A parameter matches any one segment, an empty
// one too (its handler then answers what an id that names nothing gets).
func match(pattern string, rest []byte, at *[maxParams]span) (int, bool) {
	if pattern == "" || len(rest) == 0 {
		return 0, pattern == "" && len(rest) == 0
	}
	n, from := 0, 0
	for pattern != "" {
		if from > len(rest) {
			return 0, false // fewer segments than the pattern
		}
		var p string
		p, pattern, _ = strings.Cut(pattern, "/")
		to := len(rest)
		if k := bytes.IndexByte(rest[from:], '/'); k >= 0 {
			to = from + k
		}
		if p[0] == '{' {
			at[n] = span{from, to}
			n++
		} else if string(rest[from:to]) != p {
			return 0, false
		}
		from = to + 1
	}
	return n, from == len(rest)+1
}

// plainPath reports whether a path, as it was sent, names its segments
// plainly: no "." or ".." segment, and no slash, backslash or dot sent
// percent-encoded. fasthttp decodes and resolves those before routing, so
// DELETE /api/v1/messages/..%2Fconversations%2Fc1 reached another route
// than the one it names: a Kit that puts an id it was given into a path
// must never be steered to another resource. No route's path needs any of
// them, and a browser resolves dot segments before it sends a request.
func plainPath(p []byte) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			if i+2 < len(p) && (p[i+1] == '2' && (p[i+2]|0x20 == 'f' || p[i+2]|0x20 == 'e') || p[i+1] == '5' && p[i+2]|0x20 == 'c') {
				return false
			}
		case '.':
			// A segment of "." or "..": a dot right after a slash, up to
			// the next slash or the end.
			if i > 0 && p[i-1] == '/' {
				end := i + 1
				if end < len(p) && p[end] == '.' {
					end++
				}
				if end == len(p) || p[end] == '/' {
					return false
				}
			}
		}
	}
	return true
}
