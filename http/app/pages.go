package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"html/template"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/kiterr"
)

// The app host's pages are plain HTML forms; the one script is the Copy
// button of a secret shown once. Errors are HTML pages that name the error
// code, at the status the API answers the same error with.

const pageHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · Kit</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;background:#fff}
h1{font-size:1.5rem}label{display:block;margin:.75rem 0 .25rem;font-weight:600}
input[type=email],input[type=password],input[type=text]{width:100%;padding:.5rem;font:inherit;border:1px solid #767676;border-radius:4px;box-sizing:border-box}
button{font:inherit;padding:.5rem 1.25rem;margin:1rem .5rem 0 0;border-radius:4px;border:1px solid #1b1b1b;background:#fff;cursor:pointer}
button.primary{background:#0b5394;border-color:#0b5394;color:#fff}
button:focus,input:focus{outline:3px solid #f0a30a;outline-offset:2px}
.error{color:#a00;font-weight:600}ul.scopes li{margin:.25rem 0}code{font-size:.9em}
h2{font-size:1.2rem;margin-top:2rem}select{font:inherit;padding:.4rem;max-width:100%;border:1px solid #767676;border-radius:4px}
button.danger{border-color:#a00;color:#a00}.notice{color:#1f6f2b;font-weight:600}
ul.items{list-style:none;padding:0}ul.items li{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem;border-bottom:1px solid #ddd;padding:.25rem 0}
ul.items li span{flex:1 1 14rem}ul.items button{margin:0}
.shown{border:2px solid #0b5394;border-radius:6px;padding:0 1rem 1rem;margin:1rem 0}.shown input{font-family:monospace}
a:focus,select:focus{outline:3px solid #f0a30a;outline-offset:2px}
</style></head><body><main>
`

// copyScript is the pages' only script: the Copy button of a secret shown
// once. It is allowed by its hash (scriptHash), so the policy still
// forbids any other script.
const copyScript = `document.addEventListener('click',function(e){var b=e.target.closest('button[data-copy]');if(!b)return;` +
	`var i=document.getElementById(b.dataset.copy);i.select();var done=function(){b.textContent='Copied'};` +
	`if(navigator.clipboard){navigator.clipboard.writeText(i.value).then(done,function(){document.execCommand('copy');done()})}` +
	`else{document.execCommand('copy');done()}});`

var scriptHash = func() string {
	sum := sha256.Sum256([]byte(copyScript))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

const pageFoot = `</main></body></html>
`

var pages = template.Must(template.New("").Parse(`
{{define "error"}}` + pageHead + `<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
<p>Error code: <code>{{.Code}}</code></p>
` + pageFoot + `{{end}}

`))

func (s *Server) render(ctx *fasthttp.RequestCtx, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("internal error")
		return
	}
	h := &ctx.Response.Header
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src "+scriptHash+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

// errorPage answers an HTML error page of code, at the status the API
// answers code with (kiterr's one table).
func (s *Server) errorPage(ctx *fasthttp.RequestCtx, code kiterr.Code, message string) {
	status := code.Status()
	title := pageTitles[status]
	if title == "" {
		title = "Error"
	}
	s.render(ctx, status, "error", struct{ Title, Message, Code string }{title, message, string(code)})
}

// pageTitles heads the error pages by status.
var pageTitles = map[int]string{
	400: "This request cannot be completed", 401: "Sign-in failed", 403: "Not allowed", 404: "Not found",
	409: "This cannot be done now", 410: "Gone", 429: "Too many requests", 500: "Something went wrong",
	502: "The Kit did not answer", 503: "Try again in a moment",
}

// failPage turns an error into an error page with the status, the code
// and the Retry-After the API answers the same error with, so that a
// member and a Kit see one answer (during an election: 503 unavailable,
// not 500). Errors that are not domain errors are logged and shown
// without detail; so is an unavailable answer's cause.
func (s *Server) failPage(ctx *fasthttp.RequestCtx, err error) {
	var e *kiterr.Error
	if !errors.As(err, &e) {
		e = kiterr.New(kiterr.Internal, "")
	}
	if r := e.RetryAfter(); r > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(r))
	}
	code := e.Code
	if code.Status() == fasthttp.StatusInternalServerError {
		code = kiterr.Internal // a code of no known status is one too
	}
	switch code {
	case kiterr.Validation:
		s.errorPage(ctx, e.Code, "The authorization request is not valid: "+e.Message+".")
	case kiterr.NotFound:
		s.errorPage(ctx, e.Code, "What this page needs does not exist, or you cannot see it.")
	case kiterr.Unavailable:
		corr := s.correlationID(ctx)
		if kiterr.Unexplained(err) {
			s.log.Warn("app request unavailable", "correlationId", corr, "path", string(ctx.Path()), "err", err)
		}
		s.errorPage(ctx, e.Code, "The server that holds this data cannot be reached right now. Try again in a moment (correlation id "+corr+").")
	case kiterr.RateLimited:
		s.errorPage(ctx, e.Code, "Too many requests. Try again in "+strconv.Itoa(e.RetryAfter())+" seconds.")
	case kiterr.Internal:
		corr := s.correlationID(ctx)
		s.log.Error("app request failed", "correlationId", corr, "path", string(ctx.Path()), "err", err)
		s.errorPage(ctx, code, "Please try again later (correlation id "+corr+").")
	default:
		s.errorPage(ctx, e.Code, e.Message+".")
	}
}
