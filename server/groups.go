package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/http/api"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/replica"
	"github.com/kitd/kitd/server/clusternode"
)

// groups is how this node commits: straight to its store (neither set),
// through raft groups of its own (--replicate), or as a node of a
// cluster (--cluster-bind).
type groups struct {
	replica     *replica.Replica
	clusterNode *clusternode.Node
	wakes       *wakes
}

// startGroups starts the raft groups cfg asks for and makes the actors
// commit through them.
func startGroups(cfg Config, store *persistence.Store, env *actors.Env, httpAddr string, logger, membershipLogger *slog.Logger) (groups, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hosts := wakingHosts{hosts: env.Host, env: env, log: logger, wakes: newWakes()}
	switch {
	case cfg.ClusterBind != "":
		peerListen := cfg.PeerListen
		if peerListen == "" {
			host, _, err := net.SplitHostPort(cfg.ClusterBind)
			if err != nil {
				return groups{}, err
			}
			peerListen = net.JoinHostPort(host, "0")
		}
		m, err := clusternode.Start(ctx, clusternode.Config{
			NodeName: cfg.NodeName, GossipBind: cfg.ClusterBind, Join: cfg.Join, ClusterKey: cfg.ClusterKey,
			PeerListen: peerListen, PeerAdvertise: cfg.PeerAdvertise, HTTPAddr: httpAddr, Store: store, Node: env.Host, Hosts: hosts, Logger: logger, MembershipLogger: membershipLogger,
			DownTimeout: cfg.DownTimeout, ForgetAfter: cfg.ForgetAfter, Replicas: cfg.Replicas,
		})
		if err != nil {
			hosts.wakes.stop()
			return groups{}, err
		}
		env.Commits = m.Log()
		env.Reads = m
		env.Remote = m
		env.Invalidator = m.Invalidator(env.Invalidator)
		m.Open()
		hosts.wakes.open()
		return groups{clusterNode: m, wakes: hosts.wakes}, nil
	case cfg.Replicate:
		r, err := replica.Start(ctx, replica.Config{Store: store, Hosts: hosts, Logger: logger, CurrentKey: actors.CurrentKey})
		if err != nil {
			hosts.wakes.stop()
			return groups{}, err
		}
		env.Commits = r.Log
		hosts.wakes.open()
		return groups{replica: r, wakes: hosts.wakes}, nil
	}
	return groups{}, nil
}

// refuseGroupsUnasked refuses to commit straight to a store that ran raft
// groups (multiraft.RanGroups): its records are the groups' applied state,
// and their logs may hold entries to apply again over them, so a write
// made without the groups would be undone by the next start with them,
// and in a cluster would never reach the other replicas. A backup restored
// into a new directory leaves the groups behind (docs/cluster.md,
// "Backups") and runs alone.
func refuseGroupsUnasked(cfg Config, store *persistence.Store) error {
	if cfg.ClusterBind != "" || cfg.Replicate {
		return nil
	}
	ran, err := multiraft.RanGroups(store)
	if err != nil {
		return err
	}
	if ran {
		return fmt.Errorf("%s ran with raft groups (--replicate or --cluster-bind): start it the same way, "+
			"or restore a backup of it into a new directory to run that without them", cfg.DataDir)
	}
	return nil
}

// view is what the front end shows of the cluster: nil for a node alone.
func (g groups) view() api.ClusterView {
	if g.clusterNode == nil {
		return nil
	}
	return g.clusterNode
}

// replicas is this node's raft groups, nil for a node that commits
// straight to its store.
func (g groups) replicas() *replica.Replica {
	switch {
	case g.clusterNode != nil:
		return g.clusterNode.Replica()
	case g.replica != nil:
		return g.replica
	}
	return nil
}

// Close stops the groups; the actors must be stopped first. It returns
// once no wake of deliveries reads the store any more, so the store may
// close after it.
func (g groups) Close() error {
	if g.wakes != nil {
		g.wakes.stop()
	}
	var err error
	if g.clusterNode != nil {
		err = g.clusterNode.Close()
	}
	if g.replica != nil {
		err = errors.Join(err, g.replica.Close())
	}
	return err
}

// wakingHosts hosts a partition's activations and wakes its installations'
// deliveries: the node that starts to lead a partition sends what the
// previous leader queued.
type wakingHosts struct {
	hosts *cluster.Host
	env   *actors.Env
	log   *slog.Logger
	wakes *wakes
}

func (h wakingHosts) Release(p partition.ID) { h.hosts.Release(p) }

func (h wakingHosts) Host(p partition.ID) {
	h.hosts.Host(p)
	h.wakes.start(func() {
		if err := actors.WakeDeliveriesIn(h.env, p); err != nil {
			h.log.Warn("wake deliveries", "partition", p, "err", err)
		}
	})
}

// wakes runs the wakes of deliveries, which scan the store, on goroutines
// that stop lets finish: a wake still scanning when the store closed made
// Pebble panic on SIGTERM. A wake waits until the actors commit through
// the groups (open): the groups host partitions while they start, and a
// delivery actor a wake activated before then read the partitions not yet
// applied again and committed straight to the store.
type wakes struct {
	mu      sync.Mutex // orders start against stop
	running sync.WaitGroup
	ready   chan struct{} // closed by open
	halt    chan struct{} // closed by stop
	opened  sync.Once
}

func newWakes() *wakes { return &wakes{ready: make(chan struct{}), halt: make(chan struct{})} }

// open lets the wakes run: the actors commit through the groups now.
func (w *wakes) open() { w.opened.Do(func() { close(w.ready) }) }

// start runs wake on a goroutine of its own once the wakes are open,
// unless stop was called.
func (w *wakes) start(wake func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.halted() {
		return
	}
	w.running.Go(func() {
		select {
		case <-w.ready:
		case <-w.halt:
			return
		}
		if !w.halted() { // stop may have come with open
			wake()
		}
	})
}

func (w *wakes) halted() bool {
	select {
	case <-w.halt:
		return true
	default:
		return false
	}
}

// stop starts no more wakes, drops those not open yet, and waits for
// those running.
func (w *wakes) stop() {
	w.mu.Lock()
	if !w.halted() {
		close(w.halt)
	}
	w.mu.Unlock()
	w.running.Wait()
}
