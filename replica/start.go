package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
)

// Hosts is the switch of where activations run (cluster.Host).
type Hosts interface {
	Host(p partition.ID)
	Release(p partition.ID)
}

// Config is what Start needs.
type Config struct {
	Store  *persistence.Store
	Hosts  Hosts
	Logger *slog.Logger
	// CurrentKey maps a key that an older data layout wrote to the key
	// this build stores it under (actors.CurrentKey), for the entries and
	// snapshots of builds before this node's upgrade, which it may still
	// apply: a restart applies its log again, and a node not yet upgraded
	// sends what it wrote. The mapping keeps the key's partition. nil:
	// every key as it is.
	CurrentKey func(key []byte) []byte
	// TickInterval is raft's tick (default 100 ms): elections take 10 to
	// 20 ticks, heartbeats go every tick.
	TickInterval time.Duration
	// CommitTimeout bounds one commit (default 5 s, and up to a 32nd
	// more: commits that begin together share one timer, internal/deadline):
	// past it the actor's request fails, with an outcome the caller must
	// treat as unknown.
	CommitTimeout time.Duration

	// Transport carries raft messages to the other nodes; nil: the node
	// is alone, and every group has it as its only voter.
	Transport multiraft.Transport
	// Found: this node founds a cluster. On its first start (a store
	// without groups) it creates every group with itself as the only
	// voter; a node that joins a cluster creates none, and each group's
	// leader adds it (grow). A node alone (no Transport) always founds.
	Found bool
	// LiveNodes lists the nodes alive now: their raft ids and how many
	// groups each leads (from gossip). nil: the node is alone.
	LiveNodes func() []LiveNode
	// Replicas is how many voters a group should have when that many
	// nodes are alive, placed on the nodes that rank highest for it
	// (rebalance); 0: every node alive. kitd's default is 3 (--replicas):
	// a node reads the partitions it lacks through a node that holds
	// them (docs/cluster.md, "How many replicas").
	Replicas int
	// GrowInterval is how often a leader looks at its groups' replicas
	// and leaderships (default 500 ms).
	GrowInterval time.Duration
	// DownTimeout is how long a voter may be missing from the members
	// before its groups' leaders remove it (default 30 s): long enough
	// for a restart, short enough that a second loss finds a quorum.
	DownTimeout time.Duration
	// Remote asks node to (its raft id) to propose data to group g, which
	// it leads (Replica.ProposeHere there): how a batch that spans
	// partitions reaches the groups other nodes lead. A
	// *multiraft.NotLeaderError or an error wrapping
	// multiraft.ErrProposalDropped says nothing was appended, and the
	// entry may be sent again. Required with Transport.
	Remote func(ctx context.Context, to uint64, g multiraft.GroupID, data []byte) error
	// ReadIndex asks node to for the commit index of group g, which it
	// leads (Replica.CommitIndex there): how CatchUp learns how far to
	// wait. Required with Transport.
	ReadIndex func(ctx context.Context, to uint64, g multiraft.GroupID) (uint64, error)
	// LeaderOf is the raft id of p's leader as gossip last said (0: none):
	// how an entry reaches the leader of a group this node holds no
	// replica of, and so hears nothing of. nil: every group is held here.
	LeaderOf func(p partition.ID) uint64
	// Live reports whether gossip counts node id a member now (not dead,
	// not gone): a leader this node's replica names on a node that is not
	// is no route (Route). nil: every node is.
	Live func(id uint64) bool
	// AskMembers asks node to for the members of group g, which it leads
	// (Replica.GroupMembers there): how a replica its group removed learns
	// it, and is forgotten. nil: replicas are never forgotten.
	AskMembers func(ctx context.Context, to uint64, g multiraft.GroupID) ([]uint64, error)
	// ForgetAfter is how long a replica is not held (a member hearing a
	// leader) before its group's leader is asked whether it was removed;
	// 0: 30 s.
	ForgetAfter time.Duration
}

// logKept is how many applied entries a group's log keeps for followers
// that lag (multiraft.Config.CompactAfter). raft holds the live log in
// memory on every replica: 64 groups of up to twice this many entries of
// about a kilobyte. With replication's default (1,000) a follower under
// load kept about 60 MB of entries, which made the garbage collector the
// largest cost of a node of three; a follower further behind gets a
// snapshot of one partition instead.
const logKept = 256

// LiveNode is a node alive in the cluster, as gossip last said.
type LiveNode struct {
	RaftID uint64
	Led    int // how many groups it leads
}

// Replica is this node's replicas of every partition.
type Replica struct {
	// Log is the actors' Committer.
	Log *Log

	cfg    Config
	node   *multiraft.Node
	id     uint64
	ticker *time.Ticker
	hosts  Hosts
	logger *slog.Logger

	mu      sync.Mutex
	leading [partition.Count]uint64 // the term this node leads each group in; 0: it does not
	hosted  [partition.Count]bool   // whether each partition's activations run here
	// applied is, for each group, the term whose barrier entry this node
	// applied as its leader (host): from then on everything committed
	// before it led is in its store, which a read may then serve.
	applied [partition.Count]uint64
	leaders [partition.Count]leader // who leads each group, as this node last heard
	stop    chan struct{}
	// releasing counts, for each partition, the releases under way: its
	// activations may still run (and commit) until the last returns.
	releasing [partition.Count]atomic.Int32

	draining  atomic.Bool   // HandOver was called
	changes   atomic.Uint64 // leaderships come or gone (metrics)
	forgotten atomic.Uint64 // replicas forgotten (metrics)
	unheld    unheldReads   // CheckRead's findings
	// heard says, for each group, whether this node's replica knows a
	// leader (Holds): one removed from its group hears none.
	heard [partition.Count]atomic.Bool

	missing map[uint64]time.Time // voters not alive, since when (grow's own)
	// refusals are the leaders that refusing nodes named, for the next
	// entry sent to each group (propose).
	refusals [partition.Count]atomic.Pointer[refusal]
}

type leader struct {
	id, term uint64
	at       time.Time // when this node heard of it (or of no leader)
}

// refusal is the leader a node that refused an entry named, and when.
type refusal struct {
	leader
	at time.Time
}

// refusalFor is how long the leader a refusal named is preferred to an
// older term this node knows: until its own replica, or gossip, hears.
const refusalFor = 2 * time.Second

// Start opens this node's groups, creating the missing ones with this
// node as their only voter (a node alone, or the first of a cluster: a
// directory written without replication keeps its records, which become
// the groups' initial state), and returns once it leads and hosts every
// partition. It releases every partition first: nothing is hosted before
// this node leads it.
func Start(ctx context.Context, cfg Config) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = 5 * time.Second
	}
	if cfg.GrowInterval == 0 {
		cfg.GrowInterval = 500 * time.Millisecond
	}
	if cfg.DownTimeout == 0 {
		cfg.DownTimeout = 30 * time.Second
	}
	if cfg.ForgetAfter == 0 {
		cfg.ForgetAfter = defaultForgetAfter
	}
	tr := cfg.Transport
	if tr == nil {
		tr = alone{}
	}
	for p := range partition.ID(partition.Count) {
		cfg.Hosts.Release(p)
	}
	id, err := multiraft.NodeID(cfg.Store)
	if err != nil {
		return nil, err
	}
	r := &Replica{
		cfg: cfg, id: id, ticker: clock.AlignedTicker(cfg.TickInterval), hosts: cfg.Hosts,
		logger: cfg.Logger.With("component", "replica"), stop: make(chan struct{}),
		missing: map[uint64]time.Time{},
	}
	started := time.Now()
	for p := range r.leaders {
		r.leaders[p].at = started // no leader heard of since the start
	}
	r.node, err = multiraft.Open(multiraft.Config{
		NodeID: id, Store: cfg.Store, Transport: tr, StateMachine: Records{Store: cfg.Store, CurrentKey: cfg.CurrentKey},
		Ticker: r.ticker.C, TickInterval: cfg.TickInterval, Logger: cfg.Logger,
		CompactAfter: logKept,
	})
	if err != nil {
		r.ticker.Stop()
		return nil, err
	}
	r.Log = newLog(r.node, cfg.Store, cfg.CommitTimeout)
	if cfg.Transport != nil {
		r.Log.leads = r.leads
		r.Log.remote = r.propose
		cfg.Store.SetReadCheck(r.CheckRead)
	}
	go r.follow()
	// A node alone leads every group, whether it creates them now or
	// restarts; the first node of a cluster creates and leads them only
	// on its first start: restarted, it is one replica among others.
	forgot, err := multiraft.Forgotten(cfg.Store)
	if err != nil {
		r.Close()
		return nil, err
	}
	if founds(tr == (alone{}), cfg.Found, forgot, len(r.node.Groups())) {
		if err := r.lead(ctx); err != nil {
			r.Close()
			return nil, err
		}
	}
	if cfg.LiveNodes != nil {
		go r.everyGrowInterval(r.grow)
	}
	if cfg.AskMembers != nil && cfg.LeaderOf != nil {
		f := &forgetter{r: r, next: map[multiraft.GroupID]time.Time{}}
		go r.everyGrowInterval(f.forgetRemoved)
	}
	return r, nil
}

// founds reports whether a starting node creates and leads every group:
// a node alone always; the founder of a cluster only on its first start,
// with no group yet. A node that forgot groups belonged to a cluster:
// having none left, it waits to be added again rather than found another.
func founds(alone, found, forgot bool, groups int) bool {
	return alone || (found && !forgot && groups == 0)
}

// leads reports whether this node leads g and may host it.
func (r *Replica) leads(g multiraft.GroupID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading[g] != 0
}

// readsHere reports whether a read of p may be served from this node's
// store without asking anyone: it leads p, has applied its term's barrier
// entry, and holds the lease. Leading alone is not enough: a new leader
// has every committed entry in its log but may not have applied those the
// previous leader committed last until its own first entry commits, and a
// read then would miss a write that leader acknowledged.
func (r *Replica) readsHere(p partition.ID) bool {
	r.mu.Lock()
	ready := r.leading[p] != 0 && r.applied[p] == r.leading[p]
	r.mu.Unlock()
	return ready && r.LeaseValid(p)
}

// errActivationsHere refuses to send elsewhere an entry for a partition
// whose activations may still run here: this node led it a moment ago, so
// the entry may be an activation's own write, which must not reach a new
// leader that may have loaded the activation's state already (its next
// write would undo this one). The entry entered no log, but it is not
// sent again: the client's retry finds the new leader.
var errActivationsHere = errors.New("replica: the partition's activations may still run here; its writes go to no other leader")

// propose sends an entry to g's leader elsewhere.
func (r *Replica) propose(ctx context.Context, g multiraft.GroupID, data []byte) error {
	if r.activationsMayRun(partition.ID(g)) {
		return errActivationsHere
	}
	to, term := r.Route(partition.ID(g), time.Now())
	if rf := r.refusals[g].Load(); rf != nil && rf.term > term && time.Since(rf.at) < refusalFor {
		to = rf.id
	}
	if to == 0 || to == r.id {
		return &multiraft.NotLeaderError{Group: g, Leader: to, Term: term}
	}
	err := r.cfg.Remote(ctx, to, g, data)
	var nl *multiraft.NotLeaderError
	if errors.As(err, &nl) && nl.Leader != 0 && nl.Leader != to {
		r.refusals[g].Store(&refusal{leader: leader{id: nl.Leader, term: nl.Term}, at: time.Now()})
	}
	return err
}

// ProposeHere proposes data to g, which this node must lead, and returns
// once it is applied: the other end of Config.Remote.
func (r *Replica) ProposeHere(ctx context.Context, g multiraft.GroupID, data []byte) error {
	if int(g) >= partition.Count {
		return fmt.Errorf("replica: no group %d", g)
	}
	if err := persistence.Ops(data, func(op persistence.Op) error {
		if p, ok := partition.OfKey(op.Key); !ok || p != partition.ID(g) {
			return errOutsidePartition
		}
		return nil
	}); err != nil {
		return fmt.Errorf("replica: entry for group %d: %w", g, err)
	}
	_, err := r.node.Propose(ctx, g, data)
	return err
}

// ID is this node's raft id.
func (r *Replica) ID() uint64 { return r.id }

// Node is this node's raft groups, for the transport to deliver to.
func (r *Replica) Node() *multiraft.Node { return r.node }

// Leader is the node that leads partition p as this node last heard
// (0: none known), with its term.
func (r *Replica) Leader(p partition.ID) (raftID, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.leaders[p]
	return l.id, l.term
}

// Route is the node a request or an entry for p goes to at now, with the
// term this node's replica knows (0: gossip's word, which has none), or 0
// when none is known. The replica's leader first, while its node is a
// member: it hears of each election itself. Else what gossip publishes,
// as a node that holds no replica of p does: the replica's leader left or
// died, or the replica hears none for longer than an election takes (its
// group removed it without its knowing, and it campaigns in vain), or
// this node is in no group of p. Within an election, 0: the replica
// learns the next leader itself.
func (r *Replica) Route(p partition.ID, now time.Time) (id, term uint64) {
	r.mu.Lock()
	l := r.leaders[p]
	r.mu.Unlock()
	leaderless := time.Duration(0)
	if l.id == 0 {
		leaderless = now.Sub(l.at)
	}
	return routes{self: r.id, live: r.cfg.Live, gossip: r.cfg.LeaderOf, grace: r.leaderlessGrace()}.
		route(p, l, leaderless, l.id == 0 && r.InGroup(p))
}

// routes is Route's rule, apart from the replica's state.
type routes struct {
	self   uint64
	live   func(id uint64) bool        // nil: every node is a member
	gossip func(p partition.ID) uint64 // nil: no gossip
	grace  time.Duration
}

// route is where p's requests go, given the leader its replica names (l,
// leaderless for how long when it names none) and whether this node's
// replica is a member of p's group.
func (rs routes) route(p partition.ID, l leader, leaderless time.Duration, inGroup bool) (id, term uint64) {
	switch {
	case l.id != 0 && (l.id == rs.self || rs.live == nil || rs.live(l.id)):
		return l.id, l.term
	case l.id == 0 && inGroup && leaderless < rs.grace:
		return 0, l.term // an election: the replica hears of its winner
	case rs.gossip != nil:
		if g := rs.gossip(p); g != 0 {
			return g, 0
		}
	}
	return 0, l.term
}

// leaderlessGrace is how long a replica may hear of no leader before its
// routes follow gossip: the longest election timeout (raft randomizes it
// between one and two of replication's default 10 ticks).
func (r *Replica) leaderlessGrace() time.Duration { return 20 * r.cfg.TickInterval }

// LeaseValid reports whether this node leads p under a lease: no other
// leader can exist, so its activations may answer from memory.
func (r *Replica) LeaseValid(p partition.ID) bool {
	if r.cfg.Transport == nil {
		return true // alone: no other node can lead
	}
	return r.node.LeaseValid(multiraft.GroupID(p))
}

// Partitions returns the sets of partitions this node leads and holds a
// replica of, bit p for partition p.
func (r *Replica) Partitions() (led, replicated uint64) {
	for _, g := range r.node.Groups() {
		if r.Holds(partition.ID(g)) {
			replicated |= 1 << uint(g)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, l := range r.leading {
		if l != 0 {
			led |= 1 << uint(p)
		}
	}
	return led, replicated
}

// JoinGroup creates an empty replica of g for its leader to fill: the
// transport calls it for a message of a group this node lacks, which
// means a leader added this node to the group.
func (r *Replica) JoinGroup(g multiraft.GroupID) {
	if int(g) >= partition.Count {
		return
	}
	// A node that is stopping joins nothing, and says nothing of it: the
	// leader's message came as it went down.
	if err := r.node.Join(g); err != nil && !errors.Is(err, multiraft.ErrGroupExists) && !errors.Is(err, multiraft.ErrStopped) {
		r.logger.Warn("join group", "group", g, "err", err)
	}
}

// lead creates the missing groups, stands for leader of every group, and
// waits until every partition is hosted here.
func (r *Replica) lead(ctx context.Context) error {
	have := make(map[multiraft.GroupID]bool, partition.Count)
	for _, g := range r.node.Groups() {
		have[g] = true
	}
	for p := range partition.ID(partition.Count) {
		g := multiraft.GroupID(p)
		if !have[g] {
			if err := r.node.Bootstrap(g, []uint64{r.id}); err != nil {
				return fmt.Errorf("replica: create group %d: %w", g, err)
			}
		}
		if err := r.node.Campaign(g); err != nil {
			return fmt.Errorf("replica: lead group %d: %w", g, err)
		}
	}
	for {
		n := r.hostedCount()
		if n == partition.Count {
			return nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("replica: %d of %d partitions hosted: %w", n, partition.Count, ctx.Err())
		}
	}
}

func (r *Replica) hostedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hosted {
		if h {
			n++
		}
	}
	return n
}

// follow hosts a partition's activations while this node leads its group.
func (r *Replica) follow() {
	changes := r.node.LeaderChanges()
	for {
		var lc multiraft.LeaderChange
		select {
		case lc = <-changes:
		case <-r.stop:
			return
		}
		p := partition.ID(lc.Group)
		r.mu.Lock()
		r.leaders[p] = leader{lc.Leader, lc.Term, time.Now()}
		r.heard[p].Store(lc.Leader != 0)
		if (lc.Leader == r.id) != (r.leading[p] != 0) {
			r.changes.Add(1) // leadership came here or left
		}
		if lc.Leader != r.id {
			r.leading[p] = 0
			release := r.unhost(p)
			r.mu.Unlock()
			// Release waits for p's activations to stop, and one of them
			// may be committing, which asks r.mu (leads): so not under it.
			// This goroutine alone starts hosting (go r.host, below), and
			// only after this returns.
			if release {
				r.release(p)
			}
			continue
		}
		r.leading[p] = lc.Term
		r.mu.Unlock()
		go r.host(p, lc.Term)
	}
}

// host hosts p once everything committed before this node led it is
// applied: the activations load their state from the store. An empty
// entry proposed in the new term is that point: raft applies in order.
func (r *Replica) host(p partition.ID, term uint64) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := r.node.Propose(ctx, multiraft.GroupID(p), nil)
		cancel()
		r.mu.Lock()
		current := r.leading[p] == term
		if err == nil && current {
			r.applied[p] = term
		}
		if err == nil && current && !r.hosted[p] {
			r.hosted[p] = true
			r.hosts.Host(p)
		}
		r.mu.Unlock()
		switch {
		case err == nil && current:
			return
		case !current || errors.Is(err, multiraft.ErrStopped):
			return
		}
		r.logger.Warn("no barrier entry in a new term yet", "partition", p, "term", term, "err", err)
	}
}

// handOver gives group g's leadership to voter to without refusing
// writes on the way: raft drops every proposal while a transfer is under
// way, which an actor's commit would answer with 503. So the partition is
// released first (its activations finish what they are committing, and new
// requests wait for the next leader as during an election), then the
// transfer asked. When this node still leads in the same term a little
// more than an election timeout later (raft gives a transfer up after
// one), the transfer failed, and it hosts the partition again: it led
// throughout, so its store is current.
func (r *Replica) handOver(g multiraft.GroupID, to uint64) error {
	p := partition.ID(g)
	r.mu.Lock()
	term, release := r.leading[p], r.unhost(p)
	r.mu.Unlock()
	if release {
		r.release(p)
	}
	err := r.node.TransferLeadership(g, to)
	rehost := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if term != 0 && r.leading[p] == term && !r.hosted[p] {
			r.hosted[p] = true
			r.hosts.Host(p)
		}
	}
	if err != nil {
		rehost()
		return err
	}
	time.AfterFunc(12*r.cfg.TickInterval, rehost)
	return nil
}

// unhost marks p no longer hosted (under r.mu) and reports whether it
// was, in which case the caller must call release: until then p counts as
// releasing, so that activationsMayRun never misses its activations.
func (r *Replica) unhost(p partition.ID) bool {
	if !r.hosted[p] {
		return false
	}
	r.hosted[p] = false
	r.releasing[p].Add(1)
	return true
}

// release stops p's activations (not under r.mu: one of them may be
// committing, which asks it) after unhost said so.
func (r *Replica) release(p partition.ID) {
	defer r.releasing[p].Add(-1)
	r.hosts.Release(p)
}

// activationsMayRun reports whether an activation of p may run here: p is
// hosted, or being released.
func (r *Replica) activationsMayRun(p partition.ID) bool {
	r.mu.Lock()
	hosted := r.hosted[p]
	r.mu.Unlock()
	return hosted || r.releasing[p].Load() > 0
}

// Close stops the groups. Every commit that returned is durable already.
func (r *Replica) Close() error {
	r.ticker.Stop()
	close(r.stop)
	return r.node.Close()
}

// alone is the transport of a node that has no peers: every group has
// this node as its only voter, so raft has nobody to send to.
type alone struct{}

func (alone) Send([]multiraft.Message) {}
func (alone) SendSnapshot(multiraft.Message, io.Reader) error {
	return errors.New("replica: no peers")
}
