package multiraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/multiraft/raftlog"
	"github.com/kitd/kitd/persistence"
)

// Config configures a Node. Zero tick counts take the defaults below.
type Config struct {
	NodeID       uint64 // never 0, never reused by another node
	Store        *persistence.Store
	Transport    Transport
	StateMachine StateMachine
	// Ticker drives raft's clock: one receive is one tick. Tests send on a
	// channel of their own to move time by hand.
	Ticker <-chan time.Time
	// TickInterval, when set, also bounds the leader lease in monotonic time,
	// so that a process paused past its lease (whose ticker then delivers one
	// late tick, not all the missed ones) does not believe its lease.
	TickInterval time.Duration

	// ElectionTicks (default 10) without a word from the leader start an
	// election; HeartbeatTicks (default 1) separate a leader's heartbeats.
	ElectionTicks, HeartbeatTicks int
	// LeaseTicks (default ElectionTicks-2) is how long after a heartbeat that
	// a quorum acknowledged the leader may serve reads alone. It must be
	// shorter than ElectionTicks: a follower that heard the heartbeat refuses
	// every vote for ElectionTicks, so no other leader exists before the
	// lease ends. The margin of two ticks covers the phase between the
	// nodes' tickers.
	LeaseTicks int
	// IdleTicks (default LeaseTicks/(2×HeartbeatTicks), at least 1): a
	// group this node leads with nothing to do ticks once every IdleTicks
	// ticks (idle.go), so it heartbeats every IdleTicks×HeartbeatTicks
	// ticks, which must stay below LeaseTicks. 1 ticks every group every
	// tick.
	IdleTicks int
	// CompactAfter (default 1000): a group's log keeps at least this many
	// applied entries for followers that lag; when it holds twice as many,
	// the older half is deleted. A follower behind the kept log gets a
	// snapshot. The live log is also held in memory: at most about
	// 2 × CompactAfter entries per group (64 groups of 1 KiB entries: 128 MiB
	// at the worst), so a larger value trades memory for fewer snapshots.
	CompactAfter uint64
	// MaxSizePerMsg (default 1 MiB) bounds the entries of one append message.
	MaxSizePerMsg uint64

	// LogFS and LogDir hold the raft log (package raftlog); by default the
	// store's filesystem and a directory raft inside the store's, which
	// Pebble ignores. LogSegmentSize (default raftlog.DefaultSegmentSize)
	// is for tests that roll segments.
	LogFS          vfs.FS
	LogDir         string
	LogSegmentSize int64

	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	switch {
	case c.NodeID == 0:
		return errors.New("replication: NodeID must not be 0")
	case c.Store == nil || c.Transport == nil || c.StateMachine == nil || c.Ticker == nil:
		return errors.New("replication: Store, Transport, StateMachine and Ticker are required")
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.LeaseTicks == 0 {
		c.LeaseTicks = c.ElectionTicks - 2
	}
	if c.HeartbeatTicks >= c.ElectionTicks || c.LeaseTicks <= c.HeartbeatTicks || c.LeaseTicks >= c.ElectionTicks {
		return fmt.Errorf("replication: need HeartbeatTicks (%d) < LeaseTicks (%d) < ElectionTicks (%d)",
			c.HeartbeatTicks, c.LeaseTicks, c.ElectionTicks)
	}
	if c.IdleTicks == 0 {
		c.IdleTicks = max(c.LeaseTicks/(2*c.HeartbeatTicks), 1)
	}
	if c.IdleTicks < 1 || c.IdleTicks*c.HeartbeatTicks >= c.LeaseTicks {
		return fmt.Errorf("replication: need an idle group's heartbeats, every IdleTicks (%d) × HeartbeatTicks (%d) ticks, more often than LeaseTicks (%d)",
			c.IdleTicks, c.HeartbeatTicks, c.LeaseTicks)
	}
	if c.CompactAfter == 0 {
		c.CompactAfter = 1000
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LogFS == nil {
		c.LogFS = c.Store.FS()
	}
	if c.LogDir == "" {
		c.LogDir = c.LogFS.PathJoin(c.Store.Dir(), "raft")
	}
	return nil
}

// Node runs every raft group this node holds a replica of, on one driver
// goroutine. Its methods are safe for concurrent use.
type Node struct {
	cfg    Config
	id     uint64
	store  *persistence.Store
	sm     StateMachine
	tr     Transport
	rlog   *raftlog.Log // every group's entries and hard state
	log    *slog.Logger
	start  time.Time
	groups atomic.Pointer[map[GroupID]*group] // copied on write by the driver

	mu    sync.Mutex // guards inbox
	inbox []event
	wake  chan struct{} // capacity 1: the inbox has events

	seq   atomic.Uint64 // proposal ids; random start, so no restart reuses one
	ticks atomic.Int64  // ticks since Open: the lease clock
	// leaving is set once the node is on its way out (Leaving): raft's
	// warnings about the quorums it leaves are expected then.
	leaving atomic.Bool

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	err      error // why the driver stopped; read after done is closed
	snaps    sync.WaitGroup
	// sending counts the snapshots on their way until their outcome is
	// queued for the driver (Stats): a test settles only once it is zero,
	// since they stream on goroutines of their own, which Flush does not
	// wait for.
	sending atomic.Int64

	leaders *leaderQueue

	stats struct {
		cycles, syncs, groupsWritten   atomic.Uint64
		snapshotsSent, snapshotsFailed atomic.Uint64
		sent, commitOnly, coalesced    atomic.Uint64
		forcedVotesRefused             atomic.Uint64
		idle                           atomic.Int64 // groups idle at the last tick
	}

	// The driver's own, reused from cycle to cycle.
	order    []*group // every group, by id
	readies  []groupReady
	spare    []event
	outgoing []Message // a cycle's messages, handed to Transport.Send
	valBuf   []byte
	settled  []*proposal
	restored []*group           // the groups that restored a snapshot this cycle
	restores *persistence.Batch // their state, synced before the raft log's write
	releases []released         // the compactions of this cycle, for the raft log
}

// released is a group's compaction: the raft log no longer needs its
// entries up to index.
type released struct {
	g     GroupID
	index uint64
}

// pinningSegments is how many old segments of the raft log may wait for
// their groups to compact before the groups that keep the oldest (quiet
// ones) have their live entries written again, so that it can go.
const pinningSegments = 2

// group is the driver's state of one raft group.
type group struct {
	id  GroupID
	rn  *raft.RawNode
	log *logStore

	// Key written every few cycles, built once.
	appliedKey     []byte
	appliedWritten uint64 // the applied index last written

	// From the last Ready; the driver's view.
	lead, term uint64
	state      raft.StateType

	waiters  map[uint64]*proposal // by proposal seq
	unplaced []*proposal          // proposed since the last Ready
	acks     map[uint64]stamp     // per voter: the newest heartbeat it answered
	inSnap   *inboundSnap

	// Per follower, the highest commit index an append carried (sent or
	// not); the newest configuration entry in the log, and the followers
	// sent a commit index that covers it (appends.go).
	carried   map[uint64]uint64
	confIndex uint64
	confTold  map[uint64]bool

	leaseUntil      atomic.Int64 // tick before which the lease holds; 0 when not leading
	leaseUntilNanos atomic.Int64 // the same in nanoseconds since Open

	// active is the node tick at which something last happened in the
	// group but heartbeats (idle.go).
	active int64

	// heard counts the group's messages this node stepped (Forget's
	// proof that no leader spoke to it since it asked).
	heard atomic.Uint64

	// member: this node is a voter or learner of the group, as its
	// configuration applied here says (Node.Holds). False on a replica
	// joined and not restored from a snapshot yet, and on one the group
	// removed: both may hold less than the group committed.
	member atomic.Bool

	// Transfers (transfer.go). As the leader: the target of the transfer
	// this node asked, while raft runs it; the voters that answered a
	// heartbeat naming it; raft's TimeoutNow held until they are enough.
	// As a follower: the term, node tick and named target of the last
	// heartbeat it heard.
	transferee     uint64
	transferAt     int64 // node tick at which it was asked
	told           map[uint64]bool
	heldTimeoutNow *pb.Message
	heardTerm      uint64
	heardStamp     int64 // the leader's tick in that heartbeat's stamp
	heardAt        int64
	named          uint64
}

// noteMembership sets member from the configuration applied.
func (g *group) noteMembership(self uint64) {
	cs := g.log.cs
	g.member.Store(slices.Contains(cs.Voters, self) || slices.Contains(cs.Learners, self) ||
		slices.Contains(cs.VotersOutgoing, self) || slices.Contains(cs.LearnersNext, self))
}

type groupReady struct {
	g  *group
	rd raft.Ready
}

// event is one input to the driver.
type event struct {
	g    GroupID
	msg  pb.Message
	snap []byte // the state streamed with a MsgSnap
	prop *proposal
	fn   func() // runs on the driver
}

type inboundSnap struct {
	index uint64
	data  []byte
}

// stamp is the lease clock at the time a heartbeat was sent.
type stamp struct{ tick, nanos int64 }

// Open starts a node on cfg.Store and its raft log, reloading every group
// found in the store: conf state and applied index from the store, log and
// hard state from the raft log. Entries committed but not applied before a
// crash are applied again in the first cycles.
func Open(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		id:      cfg.NodeID,
		store:   cfg.Store,
		sm:      cfg.StateMachine,
		tr:      cfg.Transport,
		log:     cfg.Logger.With("component", "replication", "nodeId", cfg.NodeID),
		start:   time.Now(),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		leaders: newLeaderQueue(),
	}
	n.seq.Store(randomSeq())
	// What a crashed process left in Pebble's WAL is in the page cache,
	// perhaps not on disk: the raft log is changed from it below.
	if err := cfg.Store.Sync(); err != nil {
		return nil, err
	}
	// Spare segments on a disk (one that reports its usage), not as 64 MiB
	// of zeros a node in a test's memory.
	_, noDisk := cfg.LogFS.GetDiskUsage(cfg.Store.Dir())
	rlog, replayed, err := raftlog.Open(cfg.LogFS, cfg.LogDir, raftlog.Options{
		SegmentSize: cfg.LogSegmentSize, BeforeDelete: cfg.Store.Sync, Preallocate: noDisk == nil,
	})
	if err != nil {
		return nil, fmt.Errorf("replication: %w", err)
	}
	n.rlog = rlog
	stores, err := loadGroups(cfg.Store, rlog, replayed)
	if err != nil {
		rlog.Close()
		return nil, err
	}
	table := make(map[GroupID]*group, len(stores))
	for id, s := range stores {
		g, err := n.newGroup(id, s)
		if err != nil {
			rlog.Close()
			return nil, err
		}
		table[id] = g
		n.order = append(n.order, g)
	}
	slices.SortFunc(n.order, func(a, b *group) int { return int(a.id) - int(b.id) })
	n.groups.Store(&table)
	go n.leaders.pump(n.stop)
	go n.run()
	return n, nil
}

func (n *Node) newGroup(id GroupID, s *logStore) (*group, error) {
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        n.id,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   s,
		Applied:                   s.applied,
		MaxSizePerMsg:             n.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlyLeaseBased,
		// A follower answers NotLeaderError itself rather than forwarding:
		// the caller learns where the leader is.
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{l: n.log.With("group", id), leaving: &n.leaving},
	})
	if err != nil {
		return nil, fmt.Errorf("replication: group %d: %w", id, err)
	}
	g := &group{
		id: id, rn: rn, log: s,
		appliedKey: appliedKey(id), appliedWritten: s.applied,
		term:      s.hs.Term,
		waiters:   make(map[uint64]*proposal),
		acks:      make(map[uint64]stamp),
		carried:   make(map[uint64]uint64),
		confIndex: s.lastConfIndex(),
		confTold:  make(map[uint64]bool),
		active:    n.ticks.Load(),
	}
	g.noteMembership(n.id)
	return g, nil
}

// Close stops the driver. Proposals still waiting fail with ErrStopped; the
// store stays open (it is the caller's). Everything Propose acknowledged is
// already durable, so Close adds no durability.
func (n *Node) Close() error {
	n.halt(nil)
	<-n.done
	n.snaps.Wait()
	err := n.rlog.Close()
	if !errors.Is(n.err, ErrStopped) {
		err = errors.Join(n.err, err)
	}
	return err
}

// halt asks the driver to stop, keeping the first reason.
func (n *Node) halt(err error) {
	n.stopOnce.Do(func() {
		n.err = err
		if n.err == nil {
			n.err = ErrStopped
		}
		close(n.stop)
	})
}

func (n *Node) stopped() error {
	select {
	case <-n.stop:
		return ErrStopped
	default:
		return nil
	}
}

// LeaderChanges delivers every change of leader of this node's groups, in
// order. The channel is fed by a goroutine of its own from an unbounded
// queue, so a slow reader never holds up the driver.
func (n *Node) LeaderChanges() <-chan LeaderChange { return n.leaders.out }

// Stats counts the driver's work since Open.
type Stats struct {
	Cycles        uint64 // cycles that wrote to the store or the raft log
	Syncs         uint64 // syncs those writes asked for: at most one per cycle but a snapshot's
	GroupsWritten uint64 // sum over cycles of the groups whose state they wrote

	SnapshotsSending int64  // snapshots on their way to a follower now
	SnapshotsSent    uint64 // snapshots a follower took
	SnapshotsFailed  uint64 // snapshots that did not reach their follower (raft sends another)

	MessagesSent uint64 // raft messages handed to the transport, snapshots aside
	// Raft's messages not sent (appends.go): appends that only told a
	// follower the commit index, and messages coalesced into another.
	UnsentCommitOnly, UnsentCoalesced uint64

	IdleGroups int64 // groups this node leads that were idle at the last tick (idle.go)

	// ForcedVotesRefused counts transfer campaigns' votes refused because
	// the leader heard last named no such transfer (transfer.go).
	ForcedVotesRefused uint64
}

// Stats returns the counters.
func (n *Node) Stats() Stats {
	return Stats{
		Cycles:        n.stats.cycles.Load(),
		Syncs:         n.stats.syncs.Load(),
		GroupsWritten: n.stats.groupsWritten.Load(),

		SnapshotsSending: n.sending.Load(),
		SnapshotsSent:    n.stats.snapshotsSent.Load(),
		SnapshotsFailed:  n.stats.snapshotsFailed.Load(),

		MessagesSent:     n.stats.sent.Load(),
		UnsentCommitOnly: n.stats.commitOnly.Load(),
		UnsentCoalesced:  n.stats.coalesced.Load(),

		IdleGroups: n.stats.idle.Load(),

		ForcedVotesRefused: n.stats.forcedVotesRefused.Load(),
	}
}

func (n *Node) lookup(g GroupID) *group { return (*n.groups.Load())[g] }

// enqueue hands events to the driver, which takes them in one cycle.
func (n *Node) enqueue(es ...event) error {
	if err := n.stopped(); err != nil {
		return err
	}
	n.mu.Lock()
	n.inbox = append(n.inbox, es...)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return nil
}

// do runs fn on the driver and waits for it.
func (n *Node) do(fn func()) error {
	ran := make(chan struct{})
	if err := n.enqueue(event{fn: func() { fn(); close(ran) }}); err != nil {
		return err
	}
	select {
	case <-ran:
		return nil
	case <-n.done:
		return ErrStopped
	}
}

// Step hands an inbound raft message to the driver. It does not block on
// the driver.
func (n *Node) Step(m Message) error {
	if n.lookup(m.Group) == nil {
		return ErrUnknownGroup
	}
	if m.Msg.Type == pb.MsgSnap {
		return errors.New("replication: a snapshot comes through ReceiveSnapshot")
	}
	return n.enqueue(event{g: m.Group, msg: m.Msg})
}

// ReceiveSnapshot reads the state a sender's Transport.SendSnapshot streams
// and hands it to the driver with its MsgSnap. The state is held in memory
// until the driver restores it.
func (n *Node) ReceiveSnapshot(m Message, state io.Reader) error {
	if n.lookup(m.Group) == nil {
		return ErrUnknownGroup
	}
	data, err := io.ReadAll(state)
	if err != nil {
		return fmt.Errorf("replication: receive snapshot of group %d: %w", m.Group, err)
	}
	return n.enqueue(event{g: m.Group, msg: m.Msg, snap: data})
}

// run is the driver: it takes events and ticks, and runs cycles while any
// group has work.
func (n *Node) run() {
	defer close(n.done)
	err := n.loop()
	n.halt(err)
	if err != nil && !errors.Is(err, ErrStopped) {
		n.log.Error("driver stopped", "err", err)
	}
	n.mu.Lock()
	pending := n.inbox
	n.inbox = nil
	n.mu.Unlock()
	for _, e := range pending {
		if e.prop != nil {
			e.prop.finish(0, ErrStopped)
		}
	}
	for _, g := range n.order {
		for _, p := range g.waiters {
			p.finish(0, ErrStopped)
		}
		g.leaseUntil.Store(0)
	}
}

func (n *Node) loop() error {
	for {
		n.drain()
		worked, err := n.cycle()
		if err != nil {
			return err
		}
		if worked {
			select {
			case <-n.stop:
				return nil
			case <-n.cfg.Ticker:
				n.tick()
			default:
			}
			continue
		}
		select {
		case <-n.stop:
			return nil
		case <-n.cfg.Ticker:
			n.tick()
		case <-n.wake:
		}
	}
}

func (n *Node) tick() {
	now := n.ticks.Add(1)
	var idle int64
	for _, g := range n.order {
		leads := g.state == raft.StateLeader
		if leads && n.idle(g, now) {
			idle++
			if now%int64(n.cfg.IdleTicks) != 0 {
				n.renewLease(g, now)
				continue
			}
		}
		g.rn.Tick()
		if leads {
			n.renewLease(g, now)
		}
		g.endTransferIfDone()
		if g.heldTimeoutNow != nil {
			n.sendTimeoutNowIfTold(g) // voters that never answer hold it transferTellTicks at most
		}
	}
	n.stats.idle.Store(idle)
}

// drain takes every queued event.
func (n *Node) drain() {
	n.mu.Lock()
	events := n.inbox
	n.inbox = n.spare[:0]
	n.mu.Unlock()
	for i := range events {
		e := &events[i]
		switch {
		case e.fn != nil:
			e.fn()
		case e.prop != nil:
			n.propose(e.prop)
		default:
			n.step(e)
		}
		*e = event{}
	}
	n.spare = events
}

func (n *Node) step(e *event) {
	g := n.lookup(e.g)
	if g == nil {
		return
	}
	g.heard.Add(1)
	m := &e.msg
	if busyStep(m.Type) {
		g.active = n.ticks.Load()
	}
	if e.snap != nil {
		g.inSnap = &inboundSnap{index: m.Snapshot.Metadata.Index, data: e.snap}
	}
	switch {
	case m.Type == pb.MsgHeartbeatResp && g.state == raft.StateLeader && m.Term == g.term:
		n.acknowledged(g, m)
	case m.Type == pb.MsgHeartbeat && m.Term >= g.heardTerm:
		n.noteLeaderWord(g, m)
	case n.refusesForcedVote(g, m):
		n.stats.forcedVotesRefused.Add(1)
		n.log.Debug("forced vote refused: the leader named no such transfer", "group", g.id, "from", m.From, "term", m.Term)
		return
	}
	if err := g.rn.Step(*m); err != nil {
		n.log.Debug("step", "group", g.id, "type", m.Type, "from", m.From, "err", err)
	}
}

// cycle handles the Ready of every group that has one: one write of the
// raft log (one sync) and one batch (write says in which order, and when
// the replies go), then the messages. It reports whether there was
// anything to do.
func (n *Node) cycle() (bool, error) {
	rs := n.readies[:0]
	for _, g := range n.order {
		if g.rn.HasReady() {
			rs = append(rs, groupReady{g: g, rd: g.rn.Ready()})
			rd := &rs[len(rs)-1].rd
			if busyReady(rd) {
				g.active = n.ticks.Load()
			}
			if made := len(rd.Messages); made > 1 {
				rd.Messages = coalesce(rd.Messages, n.cfg.MaxSizePerMsg)
				n.stats.coalesced.Add(uint64(made - len(rd.Messages)))
			}
		}
	}
	n.readies = rs
	if len(rs) == 0 {
		return false, nil
	}
	n.sendAhead(rs)

	b := n.store.NewBatch()
	mustSync, written, appliesSynced := false, uint64(0), true
	for i := range rs {
		wrote, err := n.persist(b, &rs[i])
		if err != nil {
			return true, err
		}
		if wrote {
			written++
		}
		mustSync = mustSync || rs[i].rd.MustSync || !raft.IsEmptySnap(rs[i].rd.Snapshot)
		appliesSynced = appliesSynced && rs[i].appliesSynced()
	}
	for i := range rs {
		if err := n.apply(b, &rs[i]); err != nil {
			return true, err
		}
	}
	if err := n.write(b, mustSync, written, appliesSynced && n.restores == nil); err != nil {
		return true, err
	}
	if err := n.release(); err != nil {
		return true, err
	}

	n.send(rs)
	n.answer()
	for i := range rs {
		n.observe(&rs[i])
		rs[i].g.rn.Advance(rs[i].rd)
		rs[i] = groupReady{}
	}
	return true, nil
}

// appliesSynced reports whether every entry the Ready applies was in the
// raft log on disk before this cycle: none is among the entries it
// appends. A leader's always are (it counts its own acknowledgement only
// after its sync); a follower's may not be, when one message brought
// entries and a commit index that covers them.
func (r *groupReady) appliesSynced() bool {
	applied, appended := r.rd.CommittedEntries, r.rd.Entries
	return len(applied) == 0 || len(appended) == 0 ||
		applied[len(applied)-1].Index < appended[0].Index
}

// answer returns the proposals the cycle applied to their callers.
func (n *Node) answer() {
	for _, p := range n.settled {
		p.finish(p.index, nil)
	}
	clear(n.settled)
	n.settled = n.settled[:0]
}

// write writes the cycle's raft log records, synced when raft needs them
// on disk before the messages leave (new entries, term or vote), and the
// batch, unsynced: what it holds (applied records, applied index,
// compaction marks) a crash may lose, and a restart applies the log again
// past the durable applied index (StateMachine.Apply is idempotent), while
// the raft log keeps every entry past the durable compaction mark
// (raftlog's BeforeDelete syncs the store first).
//
// When every entry the batch applies was synced in an earlier cycle
// (appliesSynced), the batch goes first and the proposals it applied are
// answered before the raft log's sync: they wait for their own entry's
// sync, not for the next one's as well. Otherwise the batch waits for the
// sync, so that the store never holds an applied index past the durable
// log. A cycle that restored snapshots first commits their state
// (n.restores, synced) and only then rewrites the restored groups' raft
// log: it never drops a group's entries while the store may still lose the
// snapshot that replaced them. A crash between the two leaves a log that
// does not continue the snapshot, which loadGroups drops.
func (n *Node) write(b *persistence.Batch, mustSync bool, groups uint64, appliesSynced bool) error {
	if b.Empty() && !mustSync && n.restores == nil {
		b.Close()
		return n.rlog.Write(false)
	}
	n.stats.cycles.Add(1)
	n.stats.groupsWritten.Add(groups)
	if n.restores != nil {
		rb := n.restores
		n.restores = nil
		n.stats.syncs.Add(1)
		if err := rb.Commit(); err != nil {
			return err
		}
		for _, g := range n.restored {
			n.rlog.Rewrite(uint16(g.id), g.log.ents)
			n.rlog.SetHardState(uint16(g.id), g.log.hs)
		}
		clear(n.restored)
		n.restored = n.restored[:0]
		mustSync = true
	}
	if mustSync {
		n.stats.syncs.Add(1)
	}
	if appliesSynced {
		if err := b.Write(); err != nil {
			return err
		}
		n.answer()
	}
	if err := n.rlog.Write(mustSync); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	if appliesSynced {
		return nil
	}
	return b.Write()
}

// release tells the raft log of the cycle's compactions, written to the
// store now, and has the quiet groups that keep its oldest segment write
// their live entries again (in the next cycle's write).
func (n *Node) release() error {
	for _, r := range n.releases {
		if err := n.rlog.Release(uint16(r.g), r.index); err != nil {
			return fmt.Errorf("replication: %w", err)
		}
	}
	n.releases = n.releases[:0]
	for _, id := range n.rlog.Pinning(pinningSegments) {
		if g := n.lookup(GroupID(id)); g != nil {
			n.rlog.Rewrite(id, g.log.ents)
		} else {
			n.rlog.Reset(id, true)
		}
	}
	return nil
}

// persist writes a group's snapshot into b, its new entries and hard state
// into the raft log's buffer (for a group that restored a snapshot: into
// n.restored, for write), and all into its log store. It reports whether
// it wrote anything.
func (n *Node) persist(b *persistence.Batch, r *groupReady) (bool, error) {
	g, rd := r.g, &r.rd
	wrote, restored := false, false
	if !raft.IsEmptySnap(rd.Snapshot) {
		if n.restores == nil {
			n.restores = n.store.NewBatch()
		}
		if err := n.restore(n.restores, g, &rd.Snapshot); err != nil {
			return false, err
		}
		n.restored = append(n.restored, g)
		g.confIndex = g.log.lastConfIndex()
		clear(g.confTold)
		wrote, restored = true, true
	}
	g.inSnap = nil // raft took the snapshot it was given, or refused it
	if len(rd.Entries) > 0 {
		g.log.append(rd.Entries)
		if !restored {
			n.rlog.Append(uint16(g.id), rd.Entries)
		}
		n.place(g, rd.Entries)
		g.noteConfEntries(rd.Entries)
		wrote = true
	}
	if hs := rd.HardState; !raft.IsEmptyHardState(hs) {
		votedAgain := hs.Term != g.log.hs.Term || hs.Vote != g.log.hs.Vote
		*g.log.hs = hs // in place: a new one would be an allocation a cycle in every group
		// A commit index raft can learn again from its leader, and applied
		// entries were committed (loadGroups takes the applied index as
		// commit when it is further), so a hard state that moved only its
		// commit is not written: it would be a key a cycle in every group.
		if votedAgain && !restored {
			n.rlog.SetHardState(uint16(g.id), g.log.hs)
			wrote = true
		}
	}
	return wrote, nil
}

// restore installs a snapshot the group accepted: the state machine's
// records, then the raft state at its index.
func (n *Node) restore(b *persistence.Batch, g *group, snap *pb.Snapshot) error {
	meta := snap.Metadata
	in := g.inSnap
	g.inSnap = nil
	if in == nil || in.index != meta.Index {
		return fmt.Errorf("replication: group %d: snapshot at %d accepted without its state", g.id, meta.Index)
	}
	if err := n.sm.Restore(g.id, bytes.NewReader(in.data), b); err != nil {
		return fmt.Errorf("replication: group %d: restore snapshot at %d: %w", g.id, meta.Index, err)
	}
	g.log.restore(&meta)
	g.noteMembership(n.id)
	n.writeSnapshotMark(b, g)
	n.writeApplied(b, g, true)
	return nil
}

func (n *Node) writeSnapshotMark(b *persistence.Batch, g *group) {
	v := binary.BigEndian.AppendUint64(n.valBuf[:0], g.log.snapIndex)
	n.valBuf = binary.BigEndian.AppendUint64(v, g.log.snapTerm)
	b.Set(snapshotKey(g.id), n.valBuf)
}

func (n *Node) writeApplied(b *persistence.Batch, g *group, confChanged bool) {
	n.valBuf = binary.BigEndian.AppendUint64(n.valBuf[:0], g.log.applied)
	b.Set(g.appliedKey, n.valBuf)
	g.appliedWritten = g.log.applied
	if confChanged {
		v, err := g.log.cs.Marshal()
		if err != nil {
			panic(fmt.Sprintf("replication: marshal conf state: %v", err)) // a valid message always marshals
		}
		b.Set(confStateKey(g.id), v)
	}
}

// appliedEvery is how many entries may be applied past the applied index
// on disk: a restart applies at most that many again per group. It is
// below CompactAfter, so the log always holds them.
func (n *Node) appliedEvery() uint64 { return max(n.cfg.CompactAfter/4, 1) }

// apply runs a group's committed entries through the state machine into b,
// with the applied index, and compacts the log when it is long enough.
func (n *Node) apply(b *persistence.Batch, r *groupReady) error {
	g, ents := r.g, r.rd.CommittedEntries
	if len(ents) == 0 {
		return nil
	}
	confChanged := false
	for _, e := range ents {
		idx := e.Index
		switch e.Type {
		case pb.EntryNormal:
			if len(e.Data) == 0 {
				break // a new leader's empty entry
			}
			h, payload, ok := splitHeader(e.Data)
			if !ok {
				return fmt.Errorf("replication: group %d: entry %d has no header", g.id, idx)
			}
			if err := n.sm.Apply(g.id, idx, payload, b); err != nil {
				return fmt.Errorf("replication: group %d: apply entry %d: %w", g.id, idx, err)
			}
			n.settle(g, h, idx)
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			cc, err := decodeConfChange(&e)
			if err != nil {
				return fmt.Errorf("replication: group %d: entry %d: %w", g.id, idx, err)
			}
			g.log.cs = g.rn.ApplyConfChange(cc)
			g.noteMembership(n.id)
			confChanged = true
			if h, _, ok := splitHeader(cc.AsV2().Context); ok {
				n.settle(g, h, idx)
			}
		}
		g.log.applied = idx
	}
	keep := n.cfg.CompactAfter
	compact := g.log.applied-g.log.snapIndex >= 2*keep
	// The applied index is written with the configuration, with a
	// compaction (the log must keep every entry past the durable applied
	// index) and every appliedEvery entries, not each cycle: applying again
	// the entries after a stale one gives the same records (StateMachine's
	// contract), and a key a cycle in every group was a quarter of the
	// memtable's inserts.
	if confChanged || compact || g.log.applied-g.appliedWritten >= n.appliedEvery() {
		n.writeApplied(b, g, confChanged)
	}
	if compact {
		to := g.log.applied - keep
		g.log.compact(to)
		n.writeSnapshotMark(b, g)
		n.releases = append(n.releases, released{g.id, to})
	}
	return nil
}

func decodeConfChange(e *pb.Entry) (pb.ConfChangeI, error) {
	if e.Type == pb.EntryConfChange {
		var cc pb.ConfChange
		if err := cc.Unmarshal(e.Data); err != nil {
			return nil, err
		}
		return &cc, nil
	}
	var cc pb.ConfChangeV2
	if err := cc.Unmarshal(e.Data); err != nil {
		return nil, err
	}
	return &cc, nil
}

// send hands the cycle's messages to the transport in one call, stamping
// heartbeats with the lease clock, and streams snapshots on goroutines of
// their own.
func (n *Node) send(rs []groupReady) {
	msgs := n.outgoing[:0]
	var hb []byte
	for i := range rs {
		g := rs[i].g
		for _, m := range rs[i].rd.Messages {
			switch m.Type {
			case pb.MsgSnap:
				n.sendSnapshot(g, m)
				continue
			case pb.MsgHeartbeat:
				if hb == nil {
					hb = n.stampNow()
				}
				m.Context = g.heartbeatContext(hb)
			case pb.MsgApp:
				if g.onlyCommit(&m) {
					n.stats.commitOnly.Add(1)
					continue
				}
			case pb.MsgTimeoutNow:
				if n.holdsTimeoutNow(g, &m) {
					continue
				}
			}
			msgs = append(msgs, Message{Group: g.id, Msg: m})
		}
	}
	n.transmit(msgs)
}

// transmit hands msgs to the transport and keeps the slice for the next
// cycle, holding nothing of them.
func (n *Node) transmit(msgs []Message) {
	if len(msgs) > 0 {
		n.stats.sent.Add(uint64(len(msgs)))
		n.tr.Send(msgs)
	}
	clear(msgs)
	n.outgoing = msgs[:0]
}

// sendAhead sends, before the cycle's write, the appends and heartbeats of
// the groups this node leads whose term and vote the cycle leaves as they
// are, and takes them out of the Ready. A leader may replicate entries
// while it writes them itself (raft thesis 10.2.1; etcd's server does the
// same): its own acknowledgement still waits for its sync, so a commit
// still needs a quorum's disks, but the leader's fsync and its followers'
// overlap instead of following each other. Everything else a follower or
// candidate sends (acknowledgements, votes) waits for the write.
func (n *Node) sendAhead(rs []groupReady) {
	msgs := n.outgoing[:0]
	var hb []byte
	for i := range rs {
		g, rd := rs[i].g, &rs[i].rd
		if hs := rd.HardState; hs.Term != g.log.hs.Term && !raft.IsEmptyHardState(hs) ||
			hs.Vote != g.log.hs.Vote && !raft.IsEmptyHardState(hs) {
			continue
		}
		later := rd.Messages[:0] // raft keeps no reference to an accepted Ready's messages
		for _, m := range rd.Messages {
			switch m.Type {
			case pb.MsgApp:
				if g.onlyCommit(&m) {
					n.stats.commitOnly.Add(1)
					continue
				}
			case pb.MsgHeartbeat:
				if hb == nil {
					hb = n.stampNow()
				}
				m.Context = g.heartbeatContext(hb)
			default:
				later = append(later, m)
				continue
			}
			msgs = append(msgs, Message{Group: g.id, Msg: m})
		}
		clear(rd.Messages[len(later):])
		rd.Messages = later
	}
	n.transmit(msgs)
}

func (n *Node) sendSnapshot(g *group, m pb.Message) {
	n.snaps.Add(1)
	n.sending.Add(1)
	go func() {
		defer n.snaps.Done()
		defer n.sending.Add(-1) // after the outcome is queued
		pr, pw := io.Pipe()
		read := make(chan struct{})
		go func() {
			defer close(read)
			pw.CloseWithError(n.sm.Snapshot(g.id, pw))
		}()
		err := n.tr.SendSnapshot(Message{Group: g.id, Msg: m}, pr)
		pr.CloseWithError(io.ErrClosedPipe) // unblocks Snapshot if the transport stopped reading
		<-read                              // Close waits for the scan of the store too
		status := raft.SnapshotFinish
		if err != nil {
			n.log.Info("snapshot not sent", "group", g.id, "to", m.To, "err", err)
			status = raft.SnapshotFailure
			n.stats.snapshotsFailed.Add(1)
		} else {
			n.stats.snapshotsSent.Add(1)
		}
		_ = n.enqueue(event{fn: func() { g.rn.ReportSnapshot(m.To, status) }})
	}()
}

// observe follows a group's leadership: waiters fail when this node stops
// leading, the lease ends, and the consumer hears of every new leader.
func (n *Node) observe(r *groupReady) {
	g, rd := r.g, &r.rd
	term := g.term
	if rd.HardState.Term != 0 {
		term = rd.HardState.Term
	}
	lead, state := g.lead, g.state
	if rd.SoftState != nil {
		lead, state = rd.SoftState.Lead, rd.SoftState.RaftState
	}
	wasLeader := g.state == raft.StateLeader
	if wasLeader && (state != raft.StateLeader || term != g.term) {
		g.leaseUntil.Store(0)
		g.leaseUntilNanos.Store(0)
		clear(g.acks)
		for seq, p := range g.waiters {
			if p.term < term || state != raft.StateLeader {
				delete(g.waiters, seq)
				p.finish(0, ErrLeadershipLost)
			}
		}
	}
	changed := lead != g.lead || (lead != 0 && term != g.term)
	g.lead, g.state, g.term = lead, state, term
	if changed {
		n.leaders.push(LeaderChange{Group: g.id, Leader: lead, Term: term})
	}
}

// Leaving tells the node it is on its way out (a drain): from now on
// raft's warnings (a leader stepping down for want of a quorum, as the
// other nodes stop too; a transfer to a node that is gone) are part of
// the stop, and logged at debug.
func (n *Node) Leaving() { n.leaving.Store(true) }

// raftLogger sends raft's messages to slog: its chatter at debug, its
// warnings and errors as such, but its warnings at debug once the node
// is leaving.
type raftLogger struct {
	l       *slog.Logger
	leaving *atomic.Bool
}

func (r raftLogger) Debug(v ...any)              { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Warning(v ...any)            { r.warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any)              { s := fmt.Sprint(v...); r.l.Error(s); panic(s) }
func (r raftLogger) Panicf(f string, v ...any)   { r.Panic(fmt.Sprintf(f, v...)) }

func (r raftLogger) warn(msg string) {
	if r.leaving.Load() {
		r.l.Debug(msg)
		return
	}
	r.l.Warn(msg)
}
