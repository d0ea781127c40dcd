package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestFilesBench is the speed check of the files issue, run on demand
// (a binary of your own, since others rebuild bin/kitd):
//
//	go build -o /tmp/fileskitd ./cmd/kitd && KITD_BIN=/tmp/fileskitd KITD_FILES_BENCH=1 go test ./e2e/ -run TestFilesBench -v -count=1
//
// It measures upload and download of 1 MB files against kitd and against a
// plain fasthttp handler in this process that answers the same bytes from
// memory (download) or reads the same body and answers 201 (upload), with
// the same client and concurrency, in the same run; then the peak RSS of a
// fresh kitd while 16 clients upload 5 MB files in parallel. Targets:
// download at least 50% of the plain handler; peak RSS under 200 MB. The
// machine's other load moves every figure: repeat it (docs/files.md, Speed).
func TestFilesBench(t *testing.T) {
	if os.Getenv("KITD_FILES_BENCH") == "" {
		t.Skip("set KITD_FILES_BENCH=1 to run the files benchmark")
	}
	d := 5 * time.Second
	if v := os.Getenv("KITD_FILES_BENCH_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	const conns = 8
	oneMB := make([]byte, 1_000_000)
	for i := range oneMB {
		oneMB[i] = byte(rand.Uint32())
	}
	uploadJSON := func(conv string, content []byte) []byte {
		b, _ := json.Marshal(map[string]any{"conversationId": conv, "name": "bench.bin", "mimeType": "text/plain", "contentBase64": base64.StdEncoding.EncodeToString(content)})
		return b
	}

	s := startServerOpts(t, ServerOpts{Limits: "off", NoTestClock: true})
	e := newFilesEnv(t, s)
	member := userToken(t, e.In, e.W.Mem.ID)
	r := s.api(t, member, "POST", "/files", uploadBody(e.Chan.ID, "text/plain", oneMB), nil)
	want(t, r, 201)
	fileID := r.Str("file.id")
	body := uploadJSON(e.Chan.ID, oneMB)

	trivial := startTrivial(t, oneMB)
	kitdAddr := strings.TrimPrefix(s.URL, "http://")

	down := func(addr string) float64 {
		return load(t, addr, conns, d, func(req *fasthttp.Request) {
			req.SetRequestURI("http://" + addr + "/api/v1/files/" + fileID + "/content")
			req.Header.Set("Authorization", "Bearer "+member)
		}, 200)
	}
	up := func(addr string) float64 {
		return load(t, addr, conns, d, func(req *fasthttp.Request) {
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://" + addr + "/api/v1/files")
			req.Header.Set("Authorization", "Bearer "+member)
			req.Header.SetContentType("application/json")
			req.SetBodyRaw(body)
		}, 201) * float64(len(oneMB)) / float64(len(body)) // decoded bytes, not base64
	}
	trivialDown, kitdDown := down(trivial), down(kitdAddr)
	trivialUp, kitdUp := up(trivial), up(kitdAddr)
	t.Logf("download 1 MB: kitd %.0f MB/s, plain fasthttp %.0f MB/s, ratio %.2f (target >= 0.50)", kitdDown, trivialDown, kitdDown/trivialDown)
	t.Logf("upload 1 MB:   kitd %.0f MB/s, plain fasthttp %.0f MB/s, ratio %.2f", kitdUp, trivialUp, kitdUp/trivialUp)
	if kitdDown < trivialDown/2 {
		t.Errorf("download is %.2f of the plain handler, want at least 0.50", kitdDown/trivialDown)
	}

	// Peak RSS on a fresh node: 16 clients, 4 uploads of 5 MB each.
	s2 := startServerOpts(t, ServerOpts{Limits: "off", NoTestClock: true})
	e2 := newFilesEnv(t, s2)
	member2 := userToken(t, e2.In, e2.W.Mem.ID)
	five := make([]byte, 5_000_000)
	for i := range five {
		five[i] = byte(rand.Uint32())
	}
	big := uploadJSON(e2.Chan.ID, five)
	before := peakRSS(t, s2)
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &fasthttp.Client{MaxConnsPerHost: 1, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
			for range 4 {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.Header.SetMethod("POST")
				req.SetRequestURI(s2.URL + "/api/v1/files")
				req.Header.Set("Authorization", "Bearer "+member2)
				req.Header.SetContentType("application/json")
				req.SetBodyRaw(big)
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 201 {
					failed.Add(1)
				}
				fasthttp.ReleaseRequest(req)
				fasthttp.ReleaseResponse(resp)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	after := peakRSS(t, s2)
	t.Logf("16 parallel clients x 4 uploads of 5 MB in %v: peak RSS %d MB before, %d MB after (target < 200 MB)", took.Round(time.Millisecond), before>>20, after>>20)
	if failed.Load() > 0 {
		t.Errorf("%d uploads failed", failed.Load())
	}
	if after >= 200<<20 {
		t.Errorf("peak RSS %d MB, want under 200 MB", after>>20)
	}
}

// load runs conns closed-loop clients for d and returns MB/s of response
// plus request bodies.
func load(t *testing.T, addr string, conns int, d time.Duration, prepare func(*fasthttp.Request), status int) float64 {
	t.Helper()
	var bytes, bad atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &fasthttp.HostClient{Addr: addr, MaxConns: 1, ReadTimeout: 30 * time.Second, MaxResponseBodySize: 16 << 20}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for time.Now().Before(stop) {
				req.Reset()
				prepare(req)
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != status {
					bad.Add(1)
					continue
				}
				bytes.Add(int64(len(resp.Body()) + len(req.Body())))
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%s: %d requests failed", addr, n)
	}
	return float64(bytes.Load()) / 1e6 / d.Seconds()
}

// startTrivial serves content from memory on GET and reads the body and
// answers 201 on POST, with the headers kitd sends.
func startTrivial(t *testing.T, content []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{MaxRequestBodySize: 16 << 20, Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Method()) == "POST" {
			var v map[string]any
			_ = json.Unmarshal(ctx.PostBody(), &v)
			ctx.SetStatusCode(201)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"file":{}}`)
			return
		}
		ctx.SetContentType("application/octet-stream")
		ctx.Response.Header.Set("X-Service-Content-Type", "text/plain")
		ctx.Response.Header.Set("Content-Disposition", `attachment; filename="bench.bin"`)
		ctx.SetBody(content)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// peakRSS is the server process's VmHWM in bytes.
func peakRSS(t *testing.T, s *Server) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Skipf("peak RSS needs /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
