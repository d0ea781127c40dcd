package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// kitdProc is a kitd node started for the bench.
type kitdProc struct {
	cmd  *exec.Cmd
	Addr string
	// Gossip is the gossip address a cluster member printed on start
	// ("kitd cluster: gossip on <addr>, ..."); "" for a node alone.
	Gossip  string
	Token   string
	DataDir string
	LogPath string
	log     *os.File
	exited  chan struct{}
	waitErr error
}

// randomToken returns 32 random bytes in hex.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// buildKitd builds ./cmd/kitd of the current module into dir.
func buildKitd(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "kitd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/kitd/kitd/cmd/kitd")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kitd: %w", err)
	}
	return out, nil
}

// startKitd runs `kitd serve --limits <limits>` on a loopback port with a
// fresh data directory under workDir, and waits for its
// "kitd listening on <addr>" line, and for a member of a cluster
// (--cluster-bind in extra) its "kitd cluster: gossip on <addr>" line too.
// Everything kitd prints goes to workDir/kitd.log.
func startKitd(ctx context.Context, bin, workDir, limits string, extra []string) (*kitdProc, error) {
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	p := &kitdProc{
		Token:   randomToken(),
		DataDir: filepath.Join(workDir, "data"),
		LogPath: filepath.Join(workDir, "kitd.log"),
		exited:  make(chan struct{}),
	}
	logf, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	p.log = logf
	args := append([]string{"serve",
		"--listen", "127.0.0.1:0",
		"--data", p.DataDir,
		"--limits", limits,
		"--operator-token", p.Token,
	}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // our Ctrl-C is not kitd's
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	addrCh, gossipCh := make(chan string, 1), make(chan string, 1)
	var copyDone sync.WaitGroup
	copyDone.Add(1)
	go func() {
		defer copyDone.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent, sentGossip := false, false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if !sent {
				if i := strings.Index(line, "kitd listening on "); i >= 0 {
					addrCh <- strings.TrimSpace(line[i+len("kitd listening on "):])
					sent = true
				}
			}
			if !sentGossip {
				if m := gossipLine.FindStringSubmatch(line); m != nil {
					gossipCh <- m[1]
					sentGossip = true
				}
			}
		}
		_, _ = io.Copy(logf, stdout)
	}()
	go func() {
		copyDone.Wait()
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	member := slices.Contains(args, "--cluster-bind")
	for p.Addr == "" || member && p.Gossip == "" {
		select {
		case addr := <-addrCh:
			p.Addr = normalizeAddr(addr)
		case p.Gossip = <-gossipCh:
		case <-p.exited:
			p.log.Close()
			return nil, fmt.Errorf("kitd exited before listening (%v); its output:\n%s", p.waitErr, tail(p.LogPath, 40))
		case <-timer.C:
			p.stop(5 * time.Second)
			return nil, fmt.Errorf("kitd did not print \"kitd listening on\" (and, in a cluster, its gossip address) within 60 s; its output:\n%s", tail(p.LogPath, 40))
		case <-ctx.Done():
			p.stop(5 * time.Second)
			return nil, ctx.Err()
		}
	}
	return p, nil
}

// gossipLine is what a member of a cluster prints on start.
var gossipLine = regexp.MustCompile(`kitd cluster: gossip on (\S+),`)

// normalizeAddr turns what kitd printed into host:port ("http://h:p/" and
// "[::]:p" are accepted too).
func normalizeAddr(a string) string {
	a = strings.TrimPrefix(strings.TrimPrefix(a, "http://"), "https://")
	a = strings.TrimRight(a, "/")
	if f := strings.Fields(a); len(f) > 0 {
		a = f[0]
	}
	return a
}

// alive reports whether kitd is still running.
func (p *kitdProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop asks kitd to stop (SIGINT), waits up to grace, then kills it. It
// returns kitd's exit error, if any.
func (p *kitdProc) stop(grace time.Duration) error {
	defer p.log.Close()
	if !p.alive() {
		return p.waitErr
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("kitd did not stop within " + grace.String() + " of SIGINT; killed")
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + string(bytes.Join(lines, []byte("\n    ")))
}
