package clusternode

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/cluster/membership"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
	"github.com/kitd/kitd/replica"
)

// Config is what a member needs; package server fills it from its own
// Config, which cmd/kitd reads from the flags of OPERATIONS.md section 7
// and README.
type Config struct {
	NodeName   string   // --node-name
	GossipBind string   // --cluster-bind
	Join       []string // --join: gossip addresses of members
	ClusterKey string   // --cluster-key
	PeerListen string   // --peer-listen: node-to-node (mutual TLS)
	// PeerAdvertise is the node-to-node address the others dial
	// (--peer-advertise): a NAT's or a proxy's in front of PeerListen;
	// empty: PeerListen's address (on gossip's host when it names every
	// interface).
	PeerAdvertise string
	HTTPAddr      string // where this node serves HTTP, published to the others

	Store *persistence.Store
	Node  *cluster.Host // this node's activations
	// Hosts is the switch of where activations run; nil: Node.
	Hosts  replica.Hosts
	Logger *slog.Logger
	// MembershipLogger gets the membership's lines: members joining,
	// leaving and failing, at info and warn, which an operator reads
	// where Logger may keep warnings only; nil: Logger.
	MembershipLogger *slog.Logger
	// Timing of gossip's failure detector; zero: by the bind address
	// (membership.LocalTiming on loopback).
	Timing membership.Timing
	// TickInterval is raft's tick (default 100 ms).
	TickInterval time.Duration
	// DownTimeout is how long a member may be gone before the leaders
	// remove its replicas (replica.Config.DownTimeout).
	DownTimeout time.Duration
	// ForgetAfter is how long a replica hears no leader before its
	// group's leader is asked whether it was removed
	// (replica.Config.ForgetAfter).
	ForgetAfter time.Duration
	// Replicas is how many replicas each partition has
	// (replica.Config.Replicas): 0, every node.
	Replicas int
}

// Node is this process's membership of a cluster.
type Node struct {
	cfg Config
	log *slog.Logger
	id  uint64 // raft id
	ms  *membership.Membership
	pt  *peer.Transport
	rep *replica.Replica
	rn  *raftNet
	dir atomic.Pointer[map[uint64]string] // raft id → peer address
	// members are the raft ids gossip counts members now: not dead, not
	// gone (routes never name another node).
	members atomic.Pointer[map[uint64]bool]
	// going are the names and node-to-node addresses of the members that
	// are leaving on purpose: they said goodbye, or drain.
	going atomic.Pointer[map[string]bool]
	// departed are the node-to-node addresses of dead and gone members
	// that no member carries now: no route may lead there.
	departed atomic.Pointer[map[string]bool]
	reqs     requestIDs
	// learned are leaders that Moved answers taught (router).
	learned learnedLeaders

	local   atomic.Pointer[actors.Invalidator] // this node's authenticator
	started atomic.Pointer[replica.Replica]    // rep, once Start returned it
	opened  atomic.Bool                        // Open: the actors commit through Log
	backups backupReads                        // snapshots of other members' backups

	draining atomic.Bool
	stop     chan struct{}
	done     sync.WaitGroup
}

// Start joins (or founds) the cluster and returns once this node's raft
// groups run; it serves their partitions once opened (Open). A node
// started without Join founds the cluster on its first start: it creates
// every group and leads them until others join; the others take a fair
// share of replicas and leaderships as they come (replica.Config.Found,
// replica/grow.go).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MembershipLogger == nil {
		cfg.MembershipLogger = cfg.Logger
	}
	if cfg.ClusterKey == "" {
		return nil, errors.New("member: a cluster needs --cluster-key: its members authenticate each other with it")
	}
	id, err := multiraft.NodeID(cfg.Store)
	if err != nil {
		return nil, err
	}
	m := &Node{cfg: cfg, log: cfg.Logger.With("component", "member"), id: id, stop: make(chan struct{})}
	m.reqs.prefix = randomPrefix()
	empty := map[uint64]string{}
	m.dir.Store(&empty)
	none := map[uint64]bool{}
	m.members.Store(&none)
	nobody := map[string]bool{}
	m.going.Store(&nobody)
	m.departed.Store(&nobody)
	if m.rn, err = newRaftNet(m); err != nil {
		return nil, err
	}
	m.pt, err = peer.Listen(peer.Config{
		NodeName: cfg.NodeName, ListenAddr: cfg.PeerListen, ClusterKey: []byte(cfg.ClusterKey),
		Registry: registry(), Handler: m.handle, OneWay: m.rn.HandleBatch, Stream: m.rn.HandleStream,
		Logger: cfg.Logger, Departed: m.leaving,
	})
	if err != nil {
		return nil, fmt.Errorf("member: node-to-node listener: %w", err)
	}
	m.rn.Bind(m.pt)
	m.ms, err = membership.Start(membership.Config{
		NodeName: cfg.NodeName, BindAddr: cfg.GossipBind, Join: cfg.Join, ClusterKey: cfg.ClusterKey,
		Timing: cfg.Timing, Logger: cfg.MembershipLogger,
		Meta: membership.Meta{HTTPAddr: cfg.HTTPAddr, PeerAddr: m.AdvertisedPeerAddr(), RaftID: id, State: membership.StateJoining},
	})
	if err != nil {
		m.pt.Close()
		return nil, err
	}
	m.refreshDirectory()
	// Before the groups start: hosting a partition may wake actors at once.
	cfg.Node.SetLease(m.leaseValid)
	if err := cfg.Node.EnableForwarding(cluster.Forwarding{Router: router{m}, Peers: m.pt}); err != nil {
		m.ms.Shutdown()
		m.pt.Close()
		return nil, err
	}
	var hosts replica.Hosts = cfg.Node
	if cfg.Hosts != nil {
		hosts = cfg.Hosts
	}
	m.rep, err = replica.Start(ctx, replica.Config{
		Store: cfg.Store, Hosts: hosts, Logger: cfg.Logger, TickInterval: cfg.TickInterval,
		Transport: m.rn, Found: len(cfg.Join) == 0, LiveNodes: m.alive, Remote: m.remotePropose,
		ReadIndex: m.readIndex, DownTimeout: cfg.DownTimeout, Replicas: cfg.Replicas, LeaderOf: m.leaderOf,
		AskMembers: m.askMembers, ForgetAfter: cfg.ForgetAfter, Live: m.isMember, CurrentKey: actors.CurrentKey,
	})
	if err != nil {
		m.ms.Shutdown()
		m.pt.Close()
		return nil, err
	}
	m.rn.deliverTo(m.rep)
	m.started.Store(m.rep)

	m.done.Add(2)
	go m.watch()
	go m.publish()
	return m, nil
}

// leaseValid is the lease check of cluster.Host.SetLease: no lease until
// the groups run and the node is open.
func (m *Node) leaseValid(p partition.ID) bool {
	if !m.opened.Load() {
		return false
	}
	r := m.started.Load()
	return r != nil && r.LeaseValid(p)
}

// Open lets this node serve the partitions it leads, once the actors
// commit through Log. Start cannot: the actors learn Log only after it
// returns, and a request a peer forwards before then would reach an
// actor that commits straight to the store, outside the groups, and
// never to the other replicas. Until Open, requests for those partitions
// wait as during an election (cluster.Host's forward).
func (m *Node) Open() { m.opened.Store(true) }

// Log is what the actors commit through.
func (m *Node) Log() *replica.Log { return m.rep.Log }

// Replica is this node's replicas.
func (m *Node) Replica() *replica.Replica { return m.rep }

// GossipAddr and PeerAddr are where this node listens for gossip and for
// node-to-node traffic.
func (m *Node) GossipAddr() string { return m.ms.Addr() }
func (m *Node) PeerAddr() string   { return m.pt.Addr() }

// AdvertisedPeerAddr is the node-to-node address the others dial: once
// gossip runs, what it publishes (a listener on every interface is
// published on gossip's host).
func (m *Node) AdvertisedPeerAddr() string {
	if m.ms != nil {
		return m.ms.Local().PeerAddr
	}
	if m.cfg.PeerAdvertise != "" {
		return m.cfg.PeerAdvertise
	}
	return m.pt.Addr()
}

// alive lists the members replica may place replicas on: alive in gossip,
// running raft groups.
func (m *Node) alive() []replica.LiveNode {
	var out []replica.LiveNode
	for _, mb := range m.ms.Nodes() {
		if mb.State == membership.StateAlive && mb.Meta.RaftID != 0 {
			out = append(out, replica.LiveNode{RaftID: mb.Meta.RaftID, Led: bits.OnesCount64(uint64(mb.Meta.Led))})
		}
	}
	return out
}

// Members counts the members running raft groups that gossip does not
// know dead or gone: the nodes that may lead partitions, and so send
// their installations' deliveries (deliveries.Sender.ShareKitSlots).
func (m *Node) Members() int { return len(*m.members.Load()) }

// addr is the node-to-node address of the node with raft id.
func (m *Node) addr(id uint64) (string, bool) {
	a, ok := (*m.dir.Load())[id]
	return a, ok
}

// isMember reports whether gossip counts the node with raft id a member
// now: joining, alive, draining or suspect; not dead, not gone.
func (m *Node) isMember(id uint64) bool { return (*m.members.Load())[id] }

// leaving reports whether the member named peer, or at node-to-node
// address peer, is leaving on purpose (it said goodbye, or drains): the
// refused dials and reset connections of a cluster being stopped or
// restarted are expected, not warned of.
func (m *Node) leaving(peer string) bool { return (*m.going.Load())[peer] }

// hasDeparted reports whether the node-to-node address addr is a dead or
// gone member's, carried by no member now.
func (m *Node) hasDeparted(addr string) bool { return (*m.departed.Load())[addr] }

// refreshDirectory rebuilds raft id → address, who is a member and who is
// leaving, from gossip. Dead and left members keep their address (raft
// drops what it cannot deliver; a restarted node republishes its
// address), but routes leave them at once (replica.Config.Live).
func (m *Node) refreshDirectory() {
	d, live, going := map[uint64]string{}, map[uint64]bool{}, map[string]bool{}
	carried, departed := map[string]bool{}, map[string]bool{}
	for _, mb := range m.ms.Nodes() {
		member := mb.State != membership.StateDead && mb.State != membership.StateLeft
		if mb.Meta.PeerAddr != "" {
			if member {
				carried[mb.Meta.PeerAddr] = true
			} else {
				departed[mb.Meta.PeerAddr] = true
			}
		}
		// A raft id has the address of the member that carries it now,
		// never a former life's under another name (a node restarted
		// on its data directory keeps its raft id, not its host name).
		if mb.Meta.RaftID != 0 && mb.Meta.PeerAddr != "" && (member || !live[mb.Meta.RaftID]) {
			d[mb.Meta.RaftID] = mb.Meta.PeerAddr
		}
		if mb.Meta.RaftID != 0 && member {
			live[mb.Meta.RaftID] = true
		}
		if mb.State == membership.StateLeft || mb.State == membership.StateDraining {
			going[mb.Name] = true
			if mb.Meta.PeerAddr != "" {
				going[mb.Meta.PeerAddr] = true
			}
		}
	}
	for a := range carried {
		delete(departed, a) // a node restarted at a former life's address
	}
	m.dir.Store(&d)
	m.members.Store(&live)
	m.going.Store(&going)
	m.departed.Store(&departed)
}

// watch keeps the directory current with gossip's events.
func (m *Node) watch() {
	defer m.done.Done()
	events := m.ms.Events()
	for {
		select {
		case <-m.stop:
			return
		case _, ok := <-events:
			if !ok {
				return
			}
			m.refreshDirectory()
		}
	}
}

// publish tells the others, through gossip, this node's state and the
// partitions it leads and replicates, whenever they change.
func (m *Node) publish() {
	defer m.done.Done()
	t := clock.AlignedTicker(100 * time.Millisecond)
	defer t.Stop()
	var last membership.Meta
	var trouble publishTrouble
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		led, replicated := m.rep.Partitions()
		state := membership.StateAlive
		switch {
		case m.draining.Load():
			state = membership.StateDraining
		case !m.ms.Joined():
			state = membership.StateJoining
		}
		next := membership.Meta{State: state, Led: membership.Partitions(led), Replicated: membership.Partitions(replicated)}
		if next.State == last.State && next.Led == last.Led && next.Replicated == last.Replicated {
			continue
		}
		err := m.ms.UpdateMeta(func(mt *membership.Meta) {
			mt.State, mt.Led, mt.Replicated = next.State, next.Led, next.Replicated
		})
		switch {
		case errors.Is(err, membership.ErrStopped):
			return // the node left
		case err != nil && m.draining.Load():
			// Members stopped together do not gossip each other's last
			// news; the node leaves either way. Asked when the publish
			// failed: one begun before the drain waits out its broadcast
			// in it.
			m.log.Debug("publish meta", "err", err)
			continue
		case err != nil:
			if trouble.failed(time.Now()) {
				m.log.Warn("publish meta", "err", err, "failingFor", publishPatience)
			} else {
				m.log.Debug("publish meta", "err", err)
			}
			continue
		}
		trouble.ok()
		last = next
	}
}

// publishPatience is how long publishing may fail before it is worth a
// warning. A publish waits for its broadcast, which times out while the
// members are still joining or busy (a cluster's start under load); the
// next tick publishes again.
const publishPatience = 5 * time.Second

// publishTrouble follows an episode of failing publishes: one warning an
// episode, once it has lasted publishPatience.
type publishTrouble struct {
	since  time.Time // the first failure of the episode; zero: none
	warned bool
}

// failed notes a failure at now and reports whether to warn of it.
func (p *publishTrouble) failed(now time.Time) bool {
	if p.since.IsZero() {
		p.since = now
	}
	if p.warned || now.Sub(p.since) < publishPatience {
		return false
	}
	p.warned = true
	return true
}

// ok ends the episode: a publish went through.
func (p *publishTrouble) ok() { *p = publishTrouble{} }

// remotePropose asks the leader of g (raft id to) to propose data.
func (m *Node) remotePropose(ctx context.Context, to uint64, g multiraft.GroupID, data []byte) error {
	a, ok := m.addr(to)
	if !ok {
		return &multiraft.NotLeaderError{Group: g}
	}
	id := m.reqs.next()
	req := &kitpb.ProposeEntry{Group: uint32(g), Data: data}
	for attempt := 0; ; attempt++ {
		res, err := m.pt.Call(ctx, a, req, id)
		// A lost reply may hide an applied entry: its Sets and Deletes
		// applied again are the same records (docs/cluster.md).
		if errors.Is(err, peer.ErrConnLost) && attempt < 2 {
			continue
		}
		switch {
		case errors.Is(err, peer.ErrUnavailable) && attempt > 0:
			// This try sent nothing, but an earlier one may have appended
			// the entry: not dropped, which Log sends to the next leader.
			return fmt.Errorf("%w (the retry: %v)", peer.ErrConnLost, err)
		case errors.Is(err, peer.ErrUnavailable):
			// Nothing was sent: the entry may go again (replica.Config.Remote).
			return fmt.Errorf("%w: %w", multiraft.ErrProposalDropped, err)
		}
		if refused, ok := res.(*kitpb.ProposeRefused); ok {
			return &multiraft.NotLeaderError{Group: g, Leader: refused.GetLeader(), Term: refused.GetTerm()}
		}
		return err
	}
}

// readIndex asks the leader of g (raft id to) for its commit index.
func (m *Node) readIndex(ctx context.Context, to uint64, g multiraft.GroupID) (uint64, error) {
	reply, err := askLeader[*kitpb.ReadIndexReply](ctx, m, to, g, &kitpb.ReadIndex{Group: uint32(g)})
	return reply.GetIndex(), err
}

// askMembers asks the leader of g (raft id to) for the group's members.
func (m *Node) askMembers(ctx context.Context, to uint64, g multiraft.GroupID) ([]uint64, error) {
	reply, err := askLeader[*kitpb.GroupMembersReply](ctx, m, to, g, &kitpb.GroupMembers{Group: uint32(g)})
	return reply.GetMembers(), err
}

// askLeader sends req to the leader of g (raft id to) and returns its
// reply of type R.
func askLeader[R proto.Message](ctx context.Context, m *Node, to uint64, g multiraft.GroupID, req proto.Message) (R, error) {
	var zero R
	a, ok := m.addr(to)
	if !ok {
		return zero, kiterr.New(kiterr.Unavailable, fmt.Sprintf("no address of the leader of partition %d", g))
	}
	res, err := m.pt.Call(ctx, a, req, m.reqs.next())
	if err != nil {
		return zero, err
	}
	reply, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("member: %T answered %T", req, res)
	}
	return reply, nil
}

// catchUpTimeout bounds a catch-up, as a request is bounded.
const catchUpTimeout = 10 * time.Second

// CatchUp is replica.CatchUp within the time of a request (actors.Env.Reads).
func (m *Node) CatchUp(p partition.ID) error {
	r := m.started.Load()
	if r == nil {
		return kiterr.New(kiterr.Unavailable, "the node is starting")
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	if err := r.CatchUp(ctx, p); err != nil {
		return fmt.Errorf("%w: %w", err, kiterr.New(kiterr.Unavailable, "this node's replica could not catch up"))
	}
	return nil
}

// handle runs the requests other members send this node.
func (m *Node) handle(ctx context.Context, from string, msg proto.Message, requestID string) (proto.Message, error) {
	switch r := msg.(type) {
	case *kitpb.Forward:
		return m.cfg.Node.ServePeer(ctx, from, r, requestID)
	case *kitpb.ReadIndex:
		index, err := m.rep.CommitIndex(multiraft.GroupID(r.GetGroup()))
		if err != nil {
			return nil, kiterr.New(kiterr.Unavailable, err.Error())
		}
		return &kitpb.ReadIndexReply{Index: index}, nil
	case *kitpb.GroupMembers:
		members, err := m.rep.GroupMembers(multiraft.GroupID(r.GetGroup()))
		if err != nil {
			return nil, kiterr.New(kiterr.Unavailable, err.Error())
		}
		return &kitpb.GroupMembersReply{Members: members}, nil
	case *kitpb.Invalidate:
		if err := m.invalidateHere(r.GetKind(), r.GetId()); err != nil {
			return nil, err
		}
		return &kitpb.Ok{}, nil
	case *kitpb.ReadRecords:
		return m.serveRead(ctx, from, r)
	case *kitpb.BackupRead:
		return m.serveBackupRead(ctx, from, r)
	case *kitpb.ProposeEntry:
		err := m.rep.ProposeHere(ctx, multiraft.GroupID(r.GetGroup()), r.GetData())
		var nl *multiraft.NotLeaderError
		switch {
		case err == nil:
			return &kitpb.Ok{}, nil
		case errors.As(err, &nl):
			return &kitpb.ProposeRefused{Leader: nl.Leader, Term: nl.Term}, nil
		case errors.Is(err, multiraft.ErrProposalDropped), errors.Is(err, multiraft.ErrUnknownGroup):
			return &kitpb.ProposeRefused{}, nil
		}
		return nil, err
	}
	return nil, fmt.Errorf("member: %s sent %T, which no handler takes", from, msg)
}

// registry lists the messages a request or reply between members may be.
func registry() *peer.Registry {
	return cluster.PeerRegistry()
}

// State is this node's state as OPERATIONS.md section 7 names it.
func (m *Node) State() string {
	switch {
	case m.draining.Load():
		return "draining"
	case !m.ms.Joined():
		return "joining"
	}
	return "alive"
}

// Nodes lists every member this node knows of, itself included.
func (m *Node) Nodes() []cluster.NodeView {
	var out []cluster.NodeView
	for _, mb := range m.ms.Nodes() {
		if mb.State == membership.StateLeft {
			continue // not a member any more
		}
		v := cluster.NodeView{Name: mb.Name, State: mb.State.String(), HTTPAddr: mb.Meta.HTTPAddr}
		led, repl := uint64(mb.Meta.Led), uint64(mb.Meta.Replicated)
		if mb.State == membership.StateDead {
			// Its gossip is its last word: its groups elected others,
			// whose own word names the partitions, each led once.
			led = 0
		}
		if mb.Name == m.cfg.NodeName {
			v.State = m.State()
			led, repl = m.rep.Partitions()
		}
		v.Led, v.Replicated = list(led), list(repl)
		out = append(out, v)
	}
	return out
}

func list(set uint64) []partition.ID {
	out := []partition.ID{}
	for p := range partition.ID(partition.Count) {
		if set&(1<<uint(p)) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// Drain hands every leadership of this node to another voter, then leaves
// gossip: a node stopped by SIGTERM leaves no group waiting for an
// election. It gives up at ctx's end (the others then elect, as after a
// crash).
func (m *Node) Drain(ctx context.Context) error {
	m.draining.Store(true)
	m.ms.Leaving()
	err := m.rep.HandOver(ctx)
	lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return errors.Join(err, m.ms.Leave(lctx))
}

// Close stops this node's groups, gossip and transport. Everything a
// commit returned is durable already.
func (m *Node) Close() error {
	close(m.stop)
	m.backups.close()
	err := m.rep.Close()
	m.rn.Close()
	m.ms.Shutdown()
	m.done.Wait()
	return errors.Join(err, m.pt.Close())
}

// requestIDs makes the ids of this node's requests to other members:
// random per process, then a sequence.
type requestIDs struct {
	prefix string
	seq    atomic.Uint64
}

func (r *requestIDs) next() string { return r.prefix + strconv.FormatUint(r.seq.Add(1), 36) }

func randomPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatUint(binary.BigEndian.Uint64(b[:]), 36) + "-"
}
