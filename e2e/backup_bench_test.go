package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestBackupBench measures a backup and a restore of a node holding N
// messages, run on demand (a binary of your own, since others rebuild
// bin/kitd):
//
//	go build -o /tmp/backupkitd ./cmd/kitd && KITD_BIN=/tmp/backupkitd KITD_BACKUP_BENCH=100000 go test ./e2e/ -run 'TestBackupBench$' -v -count=1
//
// It posts N messages of about 100 bytes over 100 channels, then times
// GET /ops/v1/backup (read whole, to a file), `kitd restore` of that file,
// and the start of a node on the restored directory, with the backup's
// size and the CPU the serving process spent on it (bench/README.md).
func TestBackupBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KITD_BACKUP_BENCH"))
	if n <= 0 {
		t.Skip("set KITD_BACKUP_BENCH=N (messages) to run the backup benchmark")
	}
	s := startServerOpts(t, ServerOpts{Limits: "off", NoTestClock: true})
	token, convs := postForBackup(t, s, n)
	file := timeBackup(t, s, s.OpToken, n)

	dir := filepath.Join(t.TempDir(), "restored")
	start := time.Now()
	out, err := runRestore(file, dir)
	if err != nil {
		t.Fatalf("kitd restore: %v\n%s", err, out)
	}
	t.Logf("restore: %v (%s)", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	start = time.Now()
	r := startServerOpts(t, ServerOpts{DataDir: dir, Limits: "off", NoTestClock: true})
	t.Logf("start on the restored directory: %v", time.Since(start).Round(time.Millisecond))
	if got := len(walk(t, r, token, "/conversations/"+convs[7]+"/messages", "messages", 200)); got != n/100 {
		t.Errorf("a restored conversation has %d messages, want %d", got, n/100)
	}
}

// TestBackupBenchCluster is TestBackupBench through the third node of
// three on --replicas 2 (it reads a third of the partitions from the
// others): KITD_BACKUP_BENCH_CLUSTER=N.
func TestBackupBenchCluster(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KITD_BACKUP_BENCH_CLUSTER"))
	if n <= 0 {
		t.Skip("set KITD_BACKUP_BENCH_CLUSTER=N (messages) to run the backup benchmark of a cluster")
	}
	c := newTestCluster()
	c.replicas = 2
	for range 3 {
		c.add(t, "--replicas", "2")
	}
	c.waitSettled(t, 3)
	postForBackup(t, c.nodes[0], n)
	timeBackup(t, c.nodes[2], c.op, n)
}

// postForBackup posts n messages into 100 channels of a new workspace
// through s, and returns the bot token and the channels.
func postForBackup(t *testing.T, s *Server, n int) (string, []string) {
	t.Helper()
	w := newWorkspace(t, s)
	var convs []string
	for range 100 {
		convs = append(convs, w.channel(t, "public", w.Owner.ID).ID)
	}
	in := w.install(t, w.kit(t, baseScopes...), convs...)

	start := time.Now()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &fasthttp.Client{MaxConnsPerHost: 1}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				req.Reset()
				req.Header.SetMethod("POST")
				req.SetRequestURI(s.URL + "/api/v1/messages")
				req.Header.Set("Authorization", "Bearer "+in.Token)
				req.Header.SetContentType("application/json")
				req.SetBodyString(fmt.Sprintf(`{"conversationId":%q,"text":"message %08d of the backup benchmark, some seventy bytes of text"}`, convs[i%100], i))
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 201 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// A cluster answers a few 503s while leaderships settle.
	if f := failed.Load(); f > int64(n)/100 {
		t.Fatalf("%d of %d posts failed", f, n)
	}
	t.Logf("%d messages posted in %v (%d failed)", n, time.Since(start).Round(time.Millisecond), failed.Load())
	return in.Token, convs
}

// timeBackup reads GET /ops/v1/backup of s whole into a file, which it
// returns, and logs how long it took and the CPU s spent on it.
func timeBackup(t *testing.T, s *Server, op string, n int) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "kitd.backup")
	cpu0 := processCPU(t, s)
	start := time.Now()
	req, _ := http.NewRequest("GET", s.URL+"/ops/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+op)
	res, err := client.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /ops/v1/backup: %v %v", err, res)
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	size, err := io.Copy(f, res.Body)
	res.Body.Close()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	cpu := processCPU(t, s) - cpu0
	t.Logf("backup of %d messages: %d MB in %v (%.0f MB/s), %.2f s of the serving node's CPU", n, size>>20, took.Round(time.Millisecond), float64(size)/took.Seconds()/(1<<20), cpu)
	return file
}

// processCPU is the user and system CPU seconds s's process spent so far.
func processCPU(t *testing.T, s *Server) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Fields after the command name in parentheses: utime and stime are
	// the 12th and 13th (clock ticks, 100 a second on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}
