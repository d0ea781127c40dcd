package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
	"github.com/kitd/kitd/e2e/clusterview"
)

// The cluster comparison (-cluster N, bench/README.md): N nodes on loopback, each
// on its own data directory, the first founding the cluster and the others
// joining it by its gossip address, measured on the same request stream as
// a node alone and the trivial server, with 64 connections spread over the
// N nodes round-robin. Any node serves any request, so the set-up goes
// through the first.

// minClusterNodes is the least -cluster accepts: a cluster of one is a
// node alone on the replicated path, not what the comparison is about.
const minClusterNodes = 2

// clusterOptions checks -cluster against the other flags and narrows the
// run to one of the two scenarios a cluster runs: the write load over
// -conversations channels (the default), or, when -only names it, the
// events scenario on a cluster of its own (its set-up then creates no
// webhooks, pages, seeded messages or mixed node).
func clusterOptions(o options) (options, error) {
	if o.cluster == 0 {
		switch {
		case o.pprofDir != "" && o.only != eventsScenarioName(o.conversations):
			return o, fmt.Errorf("-pprof needs -cluster or -only %s", eventsScenarioName(o.conversations))
		case o.clusterEntry != 0:
			return o, errors.New("-cluster-entry needs -cluster")
		}
		return o, nil
	}
	switch {
	case o.cluster < minClusterNodes:
		return o, fmt.Errorf("-cluster must be at least %d nodes", minClusterNodes)
	case o.clusterEntry < 0 || o.clusterEntry > o.cluster:
		return o, fmt.Errorf("-cluster-entry must be 0 (every node) to -cluster (%d)", o.cluster)
	case o.addr != "":
		return o, errors.New("-cluster starts nodes of its own; -addr gives a running one")
	case o.soak > 0:
		return o, errors.New("-cluster and -soak do not go together")
	}
	o.seed, o.webhooks, o.pageLimit, o.mixed = 0, 0, 0, 0
	if o.only == eventsScenarioName(o.conversations) {
		if o.clusterEntry != 0 {
			return o, errors.New("-cluster-entry is for the write load, not the events scenario")
		}
		o.events = true
		return o, nil
	}
	o.only, o.events = fmt.Sprintf("post-%d-conversations", o.conversations), false
	return o, nil
}

// benchCluster is the N nodes of -cluster.
type benchCluster struct {
	nodes []*benchNode
	names []string
	// entry is how many nodes, from the first, the load enters
	// (-cluster-entry; 0: all).
	entry int
}

// startCluster starts o.cluster nodes named n1..nN with a random cluster
// key and extra flags, each joining the first, and waits until the
// cluster has settled.
func startCluster(ctx context.Context, nodes *nodeSet, o options, extra ...string) (*benchCluster, error) {
	key := randomToken()
	c := &benchCluster{entry: o.clusterEntry}
	for i := range o.cluster {
		name := "n" + strconv.Itoa(i+1)
		args := append([]string{"--node-name", name, "--cluster-key", key, "--cluster-bind", "127.0.0.1:0"}, extra...)
		if i > 0 {
			args = append(args, "--join", c.nodes[0].proc.Gossip)
		}
		n, err := nodes.start(ctx, "off", args)
		if err != nil {
			return nil, fmt.Errorf("cluster node %s: %w", name, err)
		}
		c.nodes, c.names = append(c.nodes, n), append(c.names, name)
		logf("cluster node %s: HTTP %s, gossip %s", name, n.addr, n.proc.Gossip)
	}
	t0 := time.Now()
	if err := c.waitSettled(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	logf("cluster of %d settled in %v", len(c.nodes), time.Since(t0).Round(time.Millisecond))
	return c, nil
}

// waitSettled polls every node's /healthz and GET /ops/v1/cluster until
// all answer 200 and every view is settled.
func (c *benchCluster) waitSettled(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := ""
	for {
		if last = c.unsettled(ctx); last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not settle within %v: %s", limit, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *benchCluster) unsettled(ctx context.Context) string {
	for _, n := range c.nodes {
		if err := n.check(); err != nil {
			return err.Error()
		}
		cl := newSetupClient(setupConfig{BaseURL: "http://" + n.addr})
		if _, err := cl.call(ctx, http.MethodGet, "/healthz", "", nil, http.StatusOK, nil); err != nil {
			return err.Error()
		}
		var v clusterview.View
		if _, err := cl.call(ctx, http.MethodGet, "/ops/v1/cluster", n.token, nil, http.StatusOK, &v); err != nil {
			return err.Error()
		}
		if why := v.Unsettled(len(c.nodes)); why != "" {
			return why
		}
	}
	return ""
}

// leaders says how many partitions each node leads, as the first sees it.
func (c *benchCluster) leaders(ctx context.Context) string {
	var v clusterview.View
	n := c.nodes[0]
	if _, err := newSetupClient(setupConfig{BaseURL: "http://" + n.addr}).call(ctx, http.MethodGet, "/ops/v1/cluster", n.token, nil, http.StatusOK, &v); err != nil {
		return err.Error()
	}
	var parts []string
	for _, m := range v.Members {
		parts = append(parts, fmt.Sprintf("%s leads %d", m.Name, len(m.Led)))
	}
	return strings.Join(parts, ", ")
}

// target is the cluster as one server of a scenario: the HTTP addresses
// of the nodes the connections enter, spread over them, and every node's
// process.
func (c *benchCluster) target(sc loadgen.Scenario) target {
	t := target{server: fmt.Sprintf("cluster of %d", len(c.nodes)), sc: sc, nodes: c.nodes, names: c.names}
	for _, n := range c.nodes {
		t.pids = append(t.pids, n.pid())
	}
	for _, n := range c.nodes[:c.entries()] {
		t.addrs = append(t.addrs, n.addr)
	}
	return t
}

// entries is how many nodes the load enters.
func (c *benchCluster) entries() int {
	if c.entry <= 0 || c.entry > len(c.nodes) {
		return len(c.nodes)
	}
	return c.entry
}

// entryNames names the nodes the load enters.
func (c *benchCluster) entryNames() []string { return c.names[:c.entries()] }

// profileCPU fetches a CPU profile of every node of nodes that serves
// pprof, over the window that starts warmup from now, into
// dir/<name><suffix>.pprof, and returns a wait for them.
func profileCPU(ctx context.Context, dir string, nodes []*benchNode, names []string, suffix string, warmup, window time.Duration) func() {
	var wg sync.WaitGroup
	secs := max(1, int(window.Round(time.Second)/time.Second))
	for i, n := range nodes {
		if n.pprof == "" {
			continue
		}
		path := filepath.Join(dir, names[i]+suffix+".pprof")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fetchProfile(ctx, n.pprof, secs, path, warmup); err != nil {
				logf("CPU profile of %s: %v", names[i], err)
			}
		}()
	}
	return wg.Wait
}

// fetchProfile waits warmup, then saves the CPU profile of the next secs
// seconds of the pprof server at addr into path.
func fetchProfile(ctx context.Context, addr string, secs int, path string, warmup time.Duration) error {
	if err := loadgen.SleepUntil(ctx, time.Now().Add(warmup)); err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Duration(secs)*time.Second + 30*time.Second}
	cl := newSetupClient(setupConfig{BaseURL: "http://" + addr, Client: client})
	data, err := cl.call(ctx, http.MethodGet, "/debug/pprof/profile?seconds="+strconv.Itoa(secs), "", nil, http.StatusOK, nil)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
