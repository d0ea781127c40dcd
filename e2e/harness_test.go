package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kitdBin is the binary under test, built once by TestMain.
var kitdBin string

// client is shared by every test: keep-alive connections to the servers.
var client = &http.Client{
	Timeout: 60 * time.Second,
	Transport: &http.Transport{
		Proxy:               nil, // loopback only; never route through a proxy from the environment
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     30 * time.Second,
	},
}

// startupTimeout bounds how long a server may take to print its listening
// line (Pebble recovery of a few thousand messages included).
const startupTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests wait on HTTP far more than they compute: let more than
	// GOMAXPROCS of them run at once unless -parallel was given.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			parallelSet = true
		}
	})
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("KITD_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: KITD_BIN: %v\n", err)
			return 1
		}
		kitdBin = abs
	} else {
		root, err := moduleRoot()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
		dir, err := os.MkdirTemp("", "kitd-e2e-bin-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		kitdBin = filepath.Join(dir, "kitd")
		cmd := exec.Command("go", "build", "-o", kitdBin, "./cmd/kitd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/kitd failed: %v\n%s\n", err, out)
			return 1
		}
	}
	code := m.Run()
	if !conformance.finish() && code == 0 {
		code = 1 // exchanges that do not conform to docs/openapi (e2e/openapi_test.go)
	}
	if cliBin.path != "" && os.Getenv("KIT_CLI_BIN") == "" {
		os.RemoveAll(filepath.Dir(cliBin.path))
	}
	if leaks := leakedSecrets(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: secrets in the servers' output (e2e/secrets_log_test.go):\n  %s\n", strings.Join(leaks, "\n  "))
		code = 1
	}
	if dups := duplicatedLogKeys(); len(dups) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: log lines with a key twice (e2e/logkeys_test.go):\n  %s\n", strings.Join(dups, "\n  "))
		code = 1
	}
	defer dropOutputs()
	if srv := shared.srv; srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e: shared server output (tail):\n%s\n", srv.tail(16<<10))
		}
		srv.stop(15 * time.Second)
		os.RemoveAll(srv.DataDir)
	}
	return code
}

// moduleRoot finds the directory holding go.mod, from the e2e directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the e2e directory")
		}
		dir = parent
	}
}

// ---------------------------------------------------------------------------
// Server processes

// Server is one running `kitd serve` process.
type Server struct {
	URL     string // http://127.0.0.1:PORT
	Addr    string // 127.0.0.1:PORT as printed by the server
	DataDir string
	OpToken string // "" when the server generated its own
	Args    []string

	cmd    *exec.Cmd
	https  *http.Client   // nil: the shared client; an HTTPS server's trusts its roots
	out    *outputWatcher // stdout
	errOut *outputWatcher // stderr
	done   chan struct{}  // closed when the process has exited
}

// ServerOpts are the flags that differ between the servers of the suite.
type ServerOpts struct {
	DataDir     string   // "" = a fresh t.TempDir()
	OpToken     string   // "" = a fresh random token (unless NoOpToken)
	NoOpToken   bool     // start without --operator-token (the server generates one)
	NoTestClock bool     // start without --test-clock
	Limits      string   // --limits value; "" = flag not given (server default)
	Args        []string // more flags
	Env         []string // KEY=value pairs added to the environment (KIT_* are otherwise cleared)
	Bin         string   // "" = the binary under test
}

func startServerOpts(t testing.TB, o ServerOpts) *Server {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	s, err := launch(o)
	if err != nil {
		t.Fatalf("starting kitd: %v", err)
	}
	t.Cleanup(func() {
		// A server the test already stopped or killed is not checked again.
		if !s.exited() {
			s.stopClean(t)
		}
		if t.Failed() {
			t.Logf("kitd %s output (tail):\n%s\n--- its warnings (tail) ---\n%s", strings.Join(s.Args, " "), s.tail(8<<10), s.warnings(8<<10))
		}
	})
	return s
}

func launch(o ServerOpts) (*Server, error) {
	if o.OpToken == "" && !o.NoOpToken {
		o.OpToken = "op_" + randToken()
	}
	// A line per request, in JSON (e2e/logs_test.go), so that the secrets
	// check reads every request's line too; a test's own flags come later
	// and win.
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data", o.DataDir}
	if o.Bin == "" {
		// Request lines in JSON, which the secrets check reads; an older
		// build (o.Bin) may not know the flags.
		args = append(args, "--log-level", "info", "--log-format", "json")
	}
	if !o.NoTestClock {
		args = append(args, "--test-clock")
	}
	if o.OpToken != "" {
		args = append(args, "--operator-token", o.OpToken)
	}
	if o.Limits != "" {
		args = append(args, "--limits", o.Limits)
	}
	args = append(args, o.Args...)

	s := &Server{
		DataDir: o.DataDir,
		OpToken: o.OpToken,
		Args:    args,
		out:     newOutputWatcher("kitd listening on "),
		errOut:  newOutputWatcher(""),
		done:    make(chan struct{}),
	}
	s.out.keepWhole()
	s.errOut.keepWhole()
	bin := kitdBin
	if o.Bin != "" {
		bin = o.Bin
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), o.Env...)
	cmd.Stdout = s.out
	cmd.Stderr = s.errOut
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()

	noteServer(s)
	select {
	case addr := <-s.out.found:
		s.Addr = addr
		s.URL = "http://" + addr
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("kitd %s exited (%v) before listening; output:\n%s",
			strings.Join(args, " "), cmd.ProcessState, s.tail(8<<10))
	case <-time.After(startupTimeout):
		s.kill()
		return nil, fmt.Errorf("kitd %s printed no 'kitd listening on' line in %v; output:\n%s",
			strings.Join(args, " "), startupTimeout, s.tail(8<<10))
	}
}

// cleanEnv is the test's environment without KIT_* variables, so that only
// the flags of the test configure the server.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// exited reports whether the process has ended.
func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits; after timeout it sends SIGQUIT (the Go
// runtime prints every goroutine's stack, saved by hangDump) and then
// SIGKILL. It returns the exit code (-1 when ended by a signal).
func (s *Server) stop(timeout time.Duration) int {
	code, _ := s.stopReport(timeout)
	return code
}

// stopReport is stop that also says whether SIGTERM was not enough.
func (s *Server) stopReport(timeout time.Duration) (code int, hung bool) {
	if !s.exited() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(timeout):
			hung = true
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.done
			}
		}
	}
	return s.cmd.ProcessState.ExitCode(), hung
}

// stopClean stops the server with SIGTERM and checks OPERATIONS.md section 1:
// kitd stops cleanly on SIGTERM (flushes, then exits 0). It reports whether
// the server exited within 15 s.
func (s *Server) stopClean(t testing.TB) bool {
	t.Helper()
	start := time.Now()
	code, hung := s.stopReport(15 * time.Second)
	switch {
	case hung:
		t.Errorf("kitd did not exit within 15 s of SIGTERM; goroutine dump (SIGQUIT) saved in %s", s.saveOutput("sigterm-hang"))
		return false
	case code != 0:
		t.Errorf("kitd exited with %d after SIGTERM (%v), want 0", code, time.Since(start).Round(time.Millisecond))
	}
	return true
}

// saveOutput writes the whole output of the process to a file that outlives
// the test and returns its path.
func (s *Server) saveOutput(what string) string {
	dir := filepath.Join(os.TempDir(), "kitd-e2e-artifacts")
	_ = os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.txt", what, s.cmd.Process.Pid, time.Now().UnixNano()))
	s.out.mu.Lock()
	s.errOut.mu.Lock()
	body := "args: " + strings.Join(s.Args, " ") + "\n--- stdout ---\n" + string(s.out.buf) + "\n--- stderr ---\n" + string(s.errOut.buf)
	s.errOut.mu.Unlock()
	s.out.mu.Unlock()
	_ = os.WriteFile(path, []byte(body), 0o644)
	return path
}

// kill ends the process with SIGKILL at once (a crash: nothing is flushed).
func (s *Server) kill() {
	if !s.exited() {
		_ = s.cmd.Process.Kill()
	}
	<-s.done
}

// tail returns the last n bytes of stdout and of stderr.
func (s *Server) tail(n int) string {
	return "--- stdout ---\n" + s.out.tail(n) + "\n--- stderr ---\n" + s.errOut.tail(n)
}

// warnings is the tail, at most n bytes, of the lines of the server's log
// at WARN or ERROR until it began to drain: what a failure needs from
// before the tail's window (a request's 503 and its cause), without its
// request lines or the dials that fail while the cluster stops.
func (s *Server) warnings(n int) string {
	out := s.warningLines(false)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// logged reports whether a line of the server's log holds every one of
// parts.
func (s *Server) logged(parts ...string) bool {
	for line := range bytes.Lines(s.errOut.all()) {
		all := true
		for _, p := range parts {
			all = all && bytes.Contains(line, []byte(p))
		}
		if all {
			return true
		}
	}
	return false
}

// warningsWhileStopping is the lines of the server's log at WARN or ERROR
// from the moment it began to drain.
func (s *Server) warningsWhileStopping() string { return string(s.warningLines(true)) }

// warningLines are the lines at WARN or ERROR before the server began to
// drain, or (stopping) from then on.
func (s *Server) warningLines(stopping bool) []byte {
	var out []byte
	drained := false
	for line := range bytes.Lines(s.errOut.all()) {
		if bytes.Contains(line, []byte(`"msg":"draining"`)) || bytes.Contains(line, []byte(" msg=draining ")) {
			drained = true
		}
		if drained != stopping {
			continue
		}
		if bytes.Contains(line, []byte(`"level":"WARN"`)) || bytes.Contains(line, []byte(`"level":"ERROR"`)) ||
			bytes.Contains(line, []byte(" level=WARN ")) || bytes.Contains(line, []byte(" level=ERROR ")) {
			out = append(out, line...)
		}
	}
	return out
}

// outputWatcher keeps the output of the process (the last 1 MiB) and reports
// the first line that starts with prefix.
type outputWatcher struct {
	prefix string
	found  chan string

	mu      sync.Mutex
	buf     []byte
	partial []byte
	seen    bool
	// whole, when set, gets everything written: buf keeps the last MiB,
	// and the secrets check must read all of a server's output, whose
	// request lines run to many MiB.
	whole *os.File
}

// keepWhole makes w also keep everything written to it, in a file.
func (w *outputWatcher) keepWhole() {
	if f, err := os.CreateTemp("", "kitd-e2e-output-"); err == nil {
		w.whole = f
	}
}

// all returns everything written to w (its last MiB without keepWhole).
func (w *outputWatcher) all() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.whole != nil {
		if b, err := os.ReadFile(w.whole.Name()); err == nil {
			return b
		}
	}
	return append([]byte(nil), w.buf...)
}

// dropWhole removes the file of keepWhole.
func (w *outputWatcher) dropWhole() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.whole != nil {
		w.whole.Close()
		os.Remove(w.whole.Name())
		w.whole = nil
	}
}

func newOutputWatcher(prefix string) *outputWatcher {
	return &outputWatcher{prefix: prefix, found: make(chan string, 1)}
}

func (w *outputWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.whole != nil {
		w.whole.Write(p)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) > 1<<20 {
		w.buf = append([]byte(nil), w.buf[len(w.buf)-(1<<19):]...)
	}
	if w.prefix != "" && !w.seen {
		w.partial = append(w.partial, p...)
		for {
			i := bytes.IndexByte(w.partial, '\n')
			if i < 0 {
				break
			}
			line := strings.TrimSpace(string(w.partial[:i]))
			w.partial = w.partial[i+1:]
			if j := strings.Index(line, w.prefix); j >= 0 {
				rest := strings.Fields(line[j+len(w.prefix):])
				if len(rest) > 0 {
					addr := strings.TrimPrefix(strings.TrimPrefix(rest[0], "http://"), "https://")
					addr = strings.TrimRight(addr, "/")
					w.seen = true
					w.partial = nil
					w.found <- addr
					break
				}
			}
		}
	}
	return len(p), nil
}

func (w *outputWatcher) tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > n {
		return "..." + string(w.buf[len(w.buf)-n:])
	}
	return string(w.buf)
}

// shared is the server most functional tests use: started on first use,
// stopped by TestMain. Tests isolate themselves by creating fresh workspaces.
// It runs with --limits off (functional rules only; rate limits are tested on
// their own server) and --test-clock, which only process_test advances by a
// few seconds.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

func sharedServer(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "kitd-e2e-shared-")
		if err != nil {
			shared.err = err
			return
		}
		shared.srv, shared.err = launch(ServerOpts{DataDir: dir, Limits: "off"})
	})
	if shared.err != nil {
		t.Fatalf("starting the shared kitd: %v", shared.err)
	}
	if shared.srv.exited() {
		t.Fatalf("the shared kitd has exited; output:\n%s", shared.srv.tail(8<<10))
	}
	return shared.srv
}

// ---------------------------------------------------------------------------
// HTTP

// raw is a request body sent byte for byte (not JSON-encoded).
type raw []byte

// Resp is one HTTP exchange, kept whole so that failures can show it.
type Resp struct {
	Method, Path string
	ReqHeader    http.Header
	ReqBody      []byte

	Status int
	Header http.Header
	Body   []byte
	JSON   any // decoded body; nil when the body is not JSON
}

// request performs one HTTP call. path is absolute on the server
// ("/api/v1/messages"). token "" sends no Authorization header. body nil sends
// no body; raw is sent as is; anything else is JSON-encoded. A body gets
// Content-Type application/json unless hdr sets one.
func (s *Server) request(method, path, token string, body any, hdr map[string]string) (*Resp, error) {
	var reqBody []byte
	hasBody := body != nil
	switch b := body.(type) {
	case nil:
	case raw:
		reqBody = b
	default:
		var err error
		if reqBody, err = json.Marshal(b); err != nil {
			return nil, err
		}
	}
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		if v == "\x00delete" {
			req.Header.Del(k)
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	r := &Resp{Method: method, Path: path, ReqHeader: req.Header.Clone(), ReqBody: reqBody}
	c := client
	if s.https != nil {
		c = s.https
	}
	res, err := c.Do(req)
	if err != nil {
		return r, err
	}
	defer res.Body.Close()
	r.Status = res.StatusCode
	r.Header = res.Header
	if r.Body, err = io.ReadAll(res.Body); err != nil {
		return r, err
	}
	if len(bytes.TrimSpace(r.Body)) > 0 {
		var v any
		if json.Unmarshal(r.Body, &v) == nil {
			r.JSON = v
		}
	}
	conformance.check(r) // docs/openapi; reported by do or TestMain
	noteSecrets(r)       // checked against every server's log by TestMain
	return r, nil
}

// do is request for a test goroutine: a transport error ends the test.
func (s *Server) do(t testing.TB, method, path, token string, body any, hdr map[string]string) *Resp {
	t.Helper()
	r, err := s.request(method, path, token, body, hdr)
	if err != nil {
		note := ""
		if s.exited() {
			note = "\nthe server has exited; output:\n" + s.tail(8<<10)
		}
		t.Fatalf("%s %s: %v%s", method, path, err, note)
	}
	conformance.report(t, r)
	return r
}

// ops calls the operator API with the operator token. path starts with
// /ops/v1.
func (s *Server) ops(t testing.TB, method, path string, body any) *Resp {
	t.Helper()
	return s.do(t, method, path, s.OpToken, body, nil)
}

// api calls the Web API (and the developer API) with token. path is relative
// to {base_url} = /api/v1.
func (s *Server) api(t testing.TB, token, method, path string, body any, hdr map[string]string) *Resp {
	t.Helper()
	return s.do(t, method, "/api/v1"+path, token, body, hdr)
}

// String shows the exchange as a failure message wants it.
func (r *Resp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n  request:  %s %s", r.Method, r.Path)
	for _, k := range []string{"Content-Type", "Idempotency-Key"} {
		if v, ok := r.ReqHeader[k]; ok {
			fmt.Fprintf(&b, "\n            %s: %q", k, v)
		}
	}
	if r.ReqBody != nil {
		fmt.Fprintf(&b, "\n            %s", clip(string(r.ReqBody), 400))
	}
	fmt.Fprintf(&b, "\n  response: %d", r.Status)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		switch k {
		case "Date", "Content-Length", "Server", "Connection":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n            %s: %s", k, strings.Join(r.Header[k], ", "))
	}
	fmt.Fprintf(&b, "\n            %s", clip(string(r.Body), 1200))
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

// Get returns the value at a dotted path ("message.author.id",
// "messages.0.id") of the JSON body, or nil.
func (r *Resp) Get(path string) any { return jget(r.JSON, path) }

// Str returns the string at path, or "".
func (r *Resp) Str(path string) string { return jstr(r.JSON, path) }

func jget(v any, path string) any {
	if path == "" {
		return v
	}
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func jstr(v any, path string) string {
	s, _ := jget(v, path).(string)
	return s
}

func jobj(v any, path string) map[string]any {
	m, _ := jget(v, path).(map[string]any)
	return m
}

func jarr(v any, path string) []any {
	a, _ := jget(v, path).([]any)
	return a
}

// has reports whether the object at path has key (even with a null value).
func has(v any, path, key string) bool {
	m := jobj(v, path)
	if m == nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// ---------------------------------------------------------------------------
// Assertions

// want fails the test unless r has status.
func want(t testing.TB, r *Resp, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want status %d, got %d%s", status, r.Status, r)
	}
}

// checkErrorBody checks the error body shape of docs/api.md "Errors": exactly
// code, message and correlationId, all non-empty strings.
func checkErrorBody(t testing.TB, r *Resp) {
	t.Helper()
	m, ok := r.JSON.(map[string]any)
	if !ok {
		t.Errorf("error body is not a JSON object%s", r)
		return
	}
	for _, k := range []string{"code", "message", "correlationId"} {
		if s, _ := m[k].(string); s == "" {
			t.Errorf("error body: %q must be a non-empty string%s", k, r)
		}
	}
	if len(m) != 3 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Errorf("error body must have exactly code, message, correlationId; has %v%s", keys, r)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json%s", ct, r)
	}
}

// wantError checks status, code and the error body shape.
func wantError(t testing.TB, r *Resp, status int, code string) {
	t.Helper()
	if r.Status != status || r.Str("code") != code {
		t.Fatalf("want %d %s, got %d %q%s", status, code, r.Status, r.Str("code"), r)
	}
	checkErrorBody(t, r)
}

// wantValidation checks a 400 validation_error whose message names path and
// whose body echoes none of the sentinels.
func wantValidation(t testing.TB, r *Resp, path string, sentinels ...string) {
	t.Helper()
	wantError(t, r, 400, "validation_error")
	if path != "" && !strings.Contains(r.Str("message"), path) {
		t.Errorf("validation message should name the path %q%s", path, r)
	}
	noEcho(t, r, sentinels...)
}

// noEcho fails when the response (body or headers) contains a submitted value.
func noEcho(t testing.TB, r *Resp, sentinels ...string) {
	t.Helper()
	for _, s := range sentinels {
		if s == "" {
			continue
		}
		if bytes.Contains(r.Body, []byte(s)) {
			t.Errorf("response echoes the submitted value %q%s", s, r)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					t.Errorf("response header %s echoes the submitted value %q%s", k, s, r)
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Values

// randToken is 32 random bytes in base64url (43 characters).
func randToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// randHex is n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", b)
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// parseTime parses an ISO 8601 date-time as the server writes it.
func parseTime(t testing.TB, what, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Errorf("%s = %q is not an ISO 8601 date-time: %v", what, s, err)
	}
	return ts
}

func queryEscape(s string) string { return url.QueryEscape(s) }

func sortedStrings(v []string) []string {
	c := append([]string(nil), v...)
	sort.Strings(c)
	return c
}

func strs(a []any) []string {
	out := make([]string, 0, len(a))
	for _, v := range a {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = sortedStrings(a), sortedStrings(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
