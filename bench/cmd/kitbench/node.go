package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchNode is a kitd node under test: one kitbench started, or a running
// one given by -addr.
type benchNode struct {
	o      options
	proc   *kitdProc // nil for a running node
	addr   string
	token  string
	label  string       // for the report
	client *setupClient // set by setup
	// pprof is the address of its --pprof server (with -pprof).
	pprof string
}

// pid is the node's process id, or 0 for a running node.
func (n *benchNode) pid() int {
	if n.proc == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// check fails when a node kitbench started has exited.
func (n *benchNode) check() error {
	if n.proc != nil && !n.proc.alive() {
		return fmt.Errorf("kitd exited (%v); its output:\n%s", n.proc.waitErr, tail(n.proc.LogPath, 40))
	}
	return nil
}

// settle waits, up to -settle, for the node to go idle.
func (n *benchNode) settle(ctx context.Context) {
	if n.proc == nil || n.o.settle <= 0 {
		return
	}
	if waited := settle(ctx, n.pid(), n.o.settle); waited >= n.o.settle {
		logf("kitd still busy after %v; measuring anyway", n.o.settle)
	}
}

// setup creates the bench's workspace and Kit on the node (setupConfig
// says what else); the connection fields of cfg are the node's.
func (n *benchNode) setup(ctx context.Context, cfg setupConfig) (*fixture, error) {
	cfg.BaseURL, cfg.OperatorToken = "http://"+n.addr, n.token
	cfg.Progress = func(f string, a ...any) { logf("setup: "+f, a...) }
	if n.proc == nil { // a node that may have run the bench before
		cfg.Slug = "bench-kit-" + randomToken()[:8]
	}
	n.client = newSetupClient(cfg)
	fx, err := n.client.setup(ctx)
	if err != nil && n.proc != nil {
		logf("kitd output (tail):\n%s", tail(n.proc.LogPath, 30))
	}
	return fx, err
}

// nodeSet starts the nodes of one kitbench run and stops them at its end.
type nodeSet struct {
	o       options
	work    string // temporary directory of every node started
	started []*benchNode
}

// start starts a node with --limits limits (or, with -addr, returns the
// running node, which must run with limits off).
func (s *nodeSet) start(ctx context.Context, limits string, extra []string) (*benchNode, error) {
	o := s.o
	if o.addr != "" {
		if o.operatorToken == "" {
			return nil, fmt.Errorf("-addr needs -operator-token")
		}
		return &benchNode{o: o, addr: o.addr, token: o.operatorToken, label: "running node at " + o.addr}, nil
	}
	if s.work == "" {
		work, err := os.MkdirTemp("", "kitbench-")
		if err != nil {
			return nil, err
		}
		s.work = work
	}
	bin := o.kitd
	if _, err := os.Stat(bin); err != nil {
		logf("%s not found; building ./cmd/kitd", bin)
		if bin, err = buildKitd(ctx, s.work); err != nil {
			return nil, err
		}
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	dir := s.work
	if len(s.started) > 0 {
		dir = filepath.Join(s.work, "node"+strconv.Itoa(len(s.started)+1))
	}
	pprof := ""
	if o.pprofDir != "" { // every node serves pprof, so its profile can be taken
		var err error
		if pprof, err = freeLoopbackAddr(); err != nil {
			return nil, err
		}
		extra = append(slices.Clip(extra), "--pprof", pprof)
	}
	proc, err := startKitd(ctx, bin, dir, limits, append(strings.Fields(o.kitdArgs), extra...))
	if err != nil {
		return nil, err
	}
	n := &benchNode{o: o, proc: proc, addr: proc.Addr, token: proc.Token, label: bin, pprof: pprof}
	s.started = append(s.started, n)
	logf("kitd (--limits %s) listening on %s (data %s, log %s)", limits, n.addr, proc.DataDir, proc.LogPath)
	return n, nil
}

// close stops every node started, and removes their directory unless -keep.
func (s *nodeSet) close() {
	for _, n := range s.started {
		if err := n.proc.stop(15 * time.Second); err != nil {
			logf("kitd exit: %v (log: %s)", err, n.proc.LogPath)
		}
	}
	if s.work == "" {
		return
	}
	if s.o.keep {
		logf("kept %s", s.work)
		return
	}
	os.RemoveAll(s.work)
}
