package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

// Where the trivial server runs (-trivial).
const (
	// trivialProcess runs it in a child process, as kitd runs in its own:
	// both servers then pay the same cross-process wake-ups and share the
	// CPUs with the generator the same way.
	trivialProcess = "process"
	// trivialInProcess runs it inside kitbench, beside the generator (the
	// method before 2026-11-22; kept to compare with older figures). The
	// server's goroutines then share the generator's Go scheduler, which
	// favours it by 5-7% on the reference machine (bench/README.md).
	trivialInProcess = "in-process"
)

// trivialEnv, set in kitbench's environment, makes the process serve the
// trivial server instead of measuring. Its value is a directory holding the
// answers (files post and get). The child prints its address on stdout and
// serves until its stdin reaches end of file, so it never outlives kitbench.
const trivialEnv = "KITBENCH_SERVE_TRIVIAL"

// trivialServer is a running trivial server.
type trivialServer struct {
	Addr  string
	Pid   int // its process, or 0 when it runs inside kitbench
	close func() error
}

func (t *trivialServer) Close() error { return t.close() }

// startTrivial starts the trivial server where mode says, answering POST
// with post and anything else with get (nil: loadgen.DefaultGetBody).
func startTrivial(mode string, post, get []byte) (*trivialServer, error) {
	switch mode {
	case trivialInProcess:
		t, err := loadgen.StartTrivial(post, get)
		if err != nil {
			return nil, err
		}
		return &trivialServer{Addr: t.Addr, close: t.Close}, nil
	case trivialProcess:
		return startTrivialChild(post, get)
	default:
		return nil, fmt.Errorf("-trivial %q: want %s or %s", mode, trivialProcess, trivialInProcess)
	}
}

func startTrivialChild(post, get []byte) (*trivialServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	dir, err := os.MkdirTemp("", "kitbench-trivial-")
	if err != nil {
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	if get == nil {
		get = loadgen.DefaultGetBody
	}
	if err := errors.Join(os.WriteFile(filepath.Join(dir, "post"), post, 0o600),
		os.WriteFile(filepath.Join(dir, "get"), get, 0o600)); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), trivialEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	stop := func() error {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
		os.RemoveAll(dir)
		return err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case addr := <-line:
		if addr == "" {
			return nil, errors.Join(errors.New("trivial server: exited before listening"), stop())
		}
		return &trivialServer{Addr: addr, Pid: cmd.Process.Pid, close: stop}, nil
	case <-time.After(10 * time.Second):
		return nil, errors.Join(errors.New("trivial server: not listening after 10s"), stop())
	}
}

// serveTrivialChild is the child's side of startTrivialChild.
func serveTrivialChild(dir string) int {
	post, err1 := os.ReadFile(filepath.Join(dir, "post"))
	get, err2 := os.ReadFile(filepath.Join(dir, "get"))
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "kitbench trivial server:", err)
		return 1
	}
	t, err := loadgen.StartTrivial(post, get)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kitbench trivial server:", err)
		return 1
	}
	fmt.Println(t.Addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := t.Close(); err != nil {
		return 1
	}
	return 0
}
