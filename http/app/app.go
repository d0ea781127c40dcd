// Package app is the app host of OPERATIONS.md section 3: the HTML pages on
// which a member signs in and out, approves or denies a Kit's authorization,
// installs a Kit through an install link, sees the Kits of the workspace
// and revokes their own authorizations (home), and on which an admin
// manages an installation's bot tokens, webhooks and secrets (the API
// access page). It owns the web session
// cookie, the CSRF tokens of its forms and its own HTML error pages. It
// never answers JSON, never takes a bearer token, and holds no rule of its
// own beyond the shape of its forms: every decision is an actor's.
package app

import (
	"log/slog"
	"strings"

	"github.com/valyala/fasthttp"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/http/internal/published"
	"github.com/kitd/kitd/internal/kiterr"
)

// The pages and their error pages are in pages.go, the session cookie and
// the CSRF tokens in session.go, and each page in the file of its flow
// (authorize.go, signin.go, install.go, home.go, access.go).

// Config wires the app host to its node.
type Config struct {
	Node      *cluster.Host
	Env       *actors.Env
	Auth      *actors.Authenticator
	PublicURL string
	Logger    *slog.Logger
	// Published is shared with the developer API.
	Published *published.Cache
	// CorrelationID names a failure in the log and on its page, from the
	// same sequence as the API's error bodies, and keeps it with the
	// request for its request line (docs/decisions.md "Logs").
	CorrelationID func(*fasthttp.RequestCtx) string
}

// Server serves the pages of the app host; http/api routes to them.
type Server struct {
	node          *cluster.Host
	env           *actors.Env
	auth          *actors.Authenticator
	publicURL     string
	log           *slog.Logger
	published     *published.Cache
	correlationID func(*fasthttp.RequestCtx) string
}

// New returns the app host of cfg.
func New(cfg Config) *Server {
	return &Server{
		node: cfg.Node, env: cfg.Env, auth: cfg.Auth, publicURL: strings.TrimRight(cfg.PublicURL, "/"),
		log: cfg.Logger, published: cfg.Published, correlationID: cfg.CorrelationID,
	}
}

// ask sends msg to the actor and returns its reply as R.
func ask[R proto.Message](s *Server, kind, identity string, msg proto.Message) (R, error) {
	return cluster.Call[R](s.node, kind, identity, msg)
}

// NotFound is the page of a path the app host does not have.
func (s *Server) NotFound(ctx *fasthttp.RequestCtx) {
	s.errorPage(ctx, kiterr.NotFound, "There is no page at this address.")
}

// Fail answers err as an error page (failPage): the front end's refusals
// of an app host request (a per-address limit) are pages too.
func (s *Server) Fail(ctx *fasthttp.RequestCtx, err error) { s.failPage(ctx, err) }
