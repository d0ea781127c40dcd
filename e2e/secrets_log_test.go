package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// No secret the suite was shown or sent ever appears in a server's output
// (its log): every token and secret an answer carried (docs/api.md "Credentials"
// formats, webhook URLs, session cookies), every bearer token a test sent,
// and the operator tokens the servers were started with. The harness notes
// them as the exchanges happen (request, launch); TestMain checks the
// output of every server the run started once the tests are done.
var secrets struct {
	seen secretSet

	mu      sync.Mutex
	servers []*Server
}

// secretSet is the secrets seen so far.
type secretSet struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// secretPattern matches the secrets of docs/api.md "Credentials" (and kitd's
// sign-in choice and generated operator tokens) by their prefixes and 43
// base64url characters.
var secretPattern = regexp.MustCompile(`k(?:bot|usr|ref|code|cs|ss|dev|sic|op|resp)_[A-Za-z0-9_-]{43}`)

// hookURLPattern finds a webhook URL's secret, its last segment.
var hookURLPattern = regexp.MustCompile(`/hooks/v1/[0-9a-f-]{36}/[0-9a-f-]{36}/([A-Za-z0-9_-]{16,})`)

// minSecretLen keeps short made-up values (a test's "x" token) out: they
// would match innocent log text.
const minSecretLen = 16

func (set *secretSet) add(s string) {
	if len(s) < minSecretLen {
		return
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.seen == nil {
		set.seen = make(map[string]struct{})
	}
	set.seen[s] = struct{}{}
}

// noteSecrets records the secrets of one exchange of the run.
func noteSecrets(r *Resp) { secrets.seen.note(r) }

// note records the secrets of one exchange.
func (set *secretSet) note(r *Resp) {
	if auth := r.ReqHeader.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		set.add(strings.TrimPrefix(auth, "Bearer "))
	}
	texts := []string{string(r.Body), string(r.ReqBody)}
	for _, k := range []string{"Location", "Set-Cookie"} {
		texts = append(texts, r.Header.Values(k)...)
	}
	for _, text := range texts {
		for _, m := range secretPattern.FindAllString(text, -1) {
			set.add(m)
		}
		for _, m := range hookURLPattern.FindAllStringSubmatch(text, -1) {
			set.add(m[1])
		}
	}
	for _, c := range r.Header.Values("Set-Cookie") {
		if name, rest, ok := strings.Cut(c, "="); ok && strings.HasPrefix(name, "kit_") {
			v, _, _ := strings.Cut(rest, ";")
			if u, err := url.QueryUnescape(v); err == nil {
				set.add(u)
			}
		}
	}
}

// noteServer records a started server, whose output TestMain checks.
func noteServer(s *Server) {
	secrets.seen.add(s.OpToken)
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	secrets.servers = append(secrets.servers, s)
}

// leakedSecrets lists, without the secrets themselves, each secret of the
// run found in a server's output.
func leakedSecrets() []string {
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	secrets.seen.mu.Lock()
	defer secrets.seen.mu.Unlock()
	return leaks(secrets.servers, secrets.seen.seen)
}

// leaks lists each of seen found in the output of servers: all of it
// (outputWatcher.keepWhole), request lines included.
func leaks(servers []*Server, seen map[string]struct{}) []string {
	// The output of a run is tens of MiB and the secrets thousands: each
	// position is looked up by the minSecretLen bytes a secret starts
	// with, instead of searching for each secret in turn.
	byPrefix := make(map[string][]string, len(seen))
	for secret := range seen {
		p := secret[:minSecretLen]
		byPrefix[p] = append(byPrefix[p], secret)
	}
	var found []string
	for _, s := range servers {
		if slices.Contains(s.Args, "--demo") {
			continue // prints the demo's tokens on its first start, by design (README)
		}
		hit := map[string]bool{}
		for _, out := range [][]byte{s.out.all(), s.errOut.all()} {
			for i := 0; i+minSecretLen <= len(out); i++ {
				for _, secret := range byPrefix[string(out[i:i+minSecretLen])] {
					if bytes.HasPrefix(out[i:], []byte(secret)) {
						hit[secret] = true
					}
				}
			}
		}
		for secret := range hit {
			found = append(found, fmt.Sprintf("kitd %s: a secret of %d characters starting %q", strings.Join(s.Args, " "), len(secret), secret[:5]))
		}
	}
	return found
}

// dropOutputs removes the files that kept the servers' whole output.
func dropOutputs() {
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	for _, s := range secrets.servers {
		s.out.dropWhole()
		s.errOut.dropWhole()
	}
}

// The check finds what it must: each kind of secret an exchange shows, in
// either output stream, and only those.
func TestSecretsCheckFindsLeaks(t *testing.T) {
	bot := "kbot_" + strings.Repeat("A", 43)
	hook := "HOOKSECRET" + strings.Repeat("b", 33)
	cookie := strings.Repeat("c", 43)
	bearer := "op_" + strings.Repeat("d", 40)
	exchange := &Resp{
		ReqHeader: http.Header{"Authorization": {"Bearer " + bearer}},
		Header:    http.Header{"Set-Cookie": {"kit_session=" + cookie + "; Path=/; HttpOnly"}},
		Body:      []byte(`{"token":"` + bot + `","url":"http://h/hooks/v1/` + newUUID() + "/" + newUUID() + "/" + hook + `"}`),
	}
	var set secretSet
	set.note(exchange)
	seen := set.seen
	for _, tc := range []struct {
		name   string
		output string
		leaks  int
	}{
		{"a bot token from an answer", "issued " + bot, 1},
		{"a webhook URL's secret", "POST /hooks/v1/x/y/" + hook, 1},
		{"a session cookie", "session " + cookie, 1},
		{"a bearer token a test sent", "auth " + bearer, 1},
		{"all of them", bot + hook + cookie + bearer, 4},
		{"none", "kitd listening on 127.0.0.1:1", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []string{"stdout", "stderr"} {
				s := &Server{Args: []string{"serve"}, out: newOutputWatcher(""), errOut: newOutputWatcher("")}
				w := s.out
				if stream == "stderr" {
					w = s.errOut
				}
				fmt.Fprintln(w, tc.output)
				if got := leaks([]*Server{s}, seen); len(got) != tc.leaks {
					t.Errorf("%s: found %d leaks, want %d: %v", stream, len(got), tc.leaks, got)
				}
			}
		})
	}
}
