package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/partition"
)

// TestBackupFaults: a cluster's backup (OPERATIONS.md §8, README "Backup
// and restore") under the death of the members it reads from. The fault
// tier runs it (Makefile, FAULTS): each row kills two of three nodes.
func TestBackupFaults(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a backup whose partition's holders die mid-stream is cut short, and restore refuses it", backupWhoseHoldersDie},
		{"a backup no quorum can serve answers 503 after its 10 s, not 10 s a partition", backupWithoutAQuorum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t)
		})
	}
}

// backupWhoseHoldersDie: the two members that hold the partition the
// asked node lacks (two replicas of three), read last, die while the
// backup streams: the stream must fail visibly, never end cleanly, and
// what was received must be refused by restore.
func backupWhoseHoldersDie(t *testing.T) {
	c := newTestCluster()
	c.replicas = 2
	for range 3 {
		c.add(t, "--replicas", "2")
	}
	c.waitSettled(t, 3)
	c.waitStable(t)

	lacks := c.lacked(t, 2)
	// The lacked partition read last: nothing but held partitions after it.
	last := partition.ID(0)
	for p := range lacks {
		last = max(last, p)
	}
	w := newWorkspace(t, c.nodes[0])
	var conv string
	for range 400 {
		if id := w.channel(t, "public", w.Owner.ID).ID; partition.Of(id) == last {
			conv = id
			break
		}
	}
	if conv == "" {
		t.Fatalf("no channel of partition %d", last)
	}
	in := w.install(t, w.kit(t, baseScopes...), conv)
	// About 6 MB in that partition: more than the connection buffers.
	text := strings.Repeat("x", 7900)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 130 {
				r, err := c.nodes[g%2].request("POST", "/api/v1/messages", in.Token, postBody(conv, fmt.Sprint(g, i, text)), nil)
				if err != nil || r.Status != 201 {
					t.Errorf("post: %v %v", err, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	req, _ := http.NewRequest("GET", c.nodes[2].URL+"/ops/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+c.op)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /ops/v1/backup: %d", res.StatusCode)
	}
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(res.Body, head); err != nil {
		t.Fatal(err)
	}
	// Both holders of the last lacked partition die.
	c.nodes[0].kill()
	c.nodes[1].kill()
	rest, err := io.ReadAll(res.Body)
	got := append(head, rest...)
	if err == nil {
		t.Fatalf("the backup's stream ended cleanly (%d bytes) though the only holders of partition %d died mid-backup", len(got), last)
	}
	t.Logf("the stream failed after %d bytes: %v", len(got), err)
	file := filepath.Join(t.TempDir(), "kitd.backup")
	if err := os.WriteFile(file, got, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runRestore(file, filepath.Join(t.TempDir(), "restored"))
	if err == nil || !strings.Contains(out, "cut short") {
		t.Fatalf("kitd restore of a backup cut short: %v\n%s", err, out)
	}
}

// backupWithoutAQuorum: with two of three members dead no partition has
// a quorum; the call must answer 503 soon after the 10 s a partition no
// node could serve is waited for, not after 10 s for each of the 64 in
// turn (over ten minutes of silence).
func backupWithoutAQuorum(t *testing.T) {
	c := startCluster(t, 3)
	c.nodes[0].kill()
	c.nodes[1].kill()
	start := time.Now()
	cl := &http.Client{Timeout: 40 * time.Second}
	req, _ := http.NewRequest("GET", c.nodes[2].URL+"/ops/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+c.op)
	res, err := cl.Do(req)
	if err != nil {
		t.Fatalf("GET /ops/v1/backup with two of three members dead: no answer after %v: %v", time.Since(start).Round(time.Second), err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("GET /ops/v1/backup with two of three members dead: %d %s, want 503 unavailable", res.StatusCode, clip(string(body), 300))
	}
	t.Logf("503 after %v", time.Since(start).Round(100*time.Millisecond))
}
