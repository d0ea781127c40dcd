package loadgen

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// Trivial is the reference server every kitd figure is compared with: a
// bare fasthttp handler that answers GET (and anything but POST) with 200 and
// a fixed body, and POST with 201 and a fixed body. It does no work beyond
// HTTP parsing, so kitd ÷ trivial shows what kitd's own work costs on the
// machine at hand.
type Trivial struct {
	ln  net.Listener
	srv *fasthttp.Server
	// Addr is the loopback host:port the server listens on.
	Addr string
}

// DefaultGetBody is the trivial GET answer.
var DefaultGetBody = []byte(`{"ok":true}`)

// StartTrivial starts a trivial server on a fresh loopback port. postBody is
// the 201 answer to POST (give it a body of the size of a real kitd answer);
// getBody is the 200 answer to every other method (nil: DefaultGetBody).
func StartTrivial(postBody, getBody []byte) (*Trivial, error) {
	if getBody == nil {
		getBody = DefaultGetBody
	}
	if postBody == nil {
		postBody = DefaultGetBody
	}
	post := append([]byte(nil), postBody...)
	get := append([]byte(nil), getBody...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &fasthttp.Server{
		Name: "trivial",
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			if ctx.IsPost() {
				ctx.SetStatusCode(fasthttp.StatusCreated)
				ctx.SetBody(post)
				return
			}
			ctx.SetBody(get)
		},
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  time.Minute,
		Concurrency:                  1 << 16,
		NoDefaultDate:                false,
		DisablePreParseMultipartForm: true,
	}
	go func() { _ = srv.Serve(ln) }()
	return &Trivial{ln: ln, srv: srv, Addr: ln.Addr().String()}, nil
}

// Close stops the server and closes its open connections.
func (t *Trivial) Close() error {
	return t.srv.Shutdown()
}
