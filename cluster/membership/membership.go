package membership

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/loglimit"
)

// Node is one node as this node sees it: a copy, never shared with
// memberlist or with other callers.
type Node struct {
	Name string
	// Addr is the gossip address, host:port.
	Addr  string
	State State
	// Meta is the node's last published meta (kept when it is suspect,
	// dead or left: it says where it was).
	Meta Meta
}

// EventKind says what changed.
type EventKind uint8

const (
	// EventJoin: a node joined, or came back with a new life.
	EventJoin EventKind = iota + 1
	// EventUpdate: a node republished its meta.
	EventUpdate
	// EventLeave: a node left gracefully (Leave).
	EventLeave
	// EventFail: a node was declared dead.
	EventFail
)

var eventNames = [...]string{EventJoin: "join", EventUpdate: "update", EventLeave: "leave", EventFail: "fail"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of one member, with the member as it is after it.
type Event struct {
	Kind EventKind
	Node Node
}

// ErrStopped: Leave or Shutdown was called already.
var ErrStopped = errors.New("membership: stopped")

// Membership is this node's place in the cluster's gossip.
type Membership struct {
	name string
	// addr is the gossip address others reach this node by, known once
	// memberlist has bound it (NotifyMerge may run before Start returns).
	addr   atomic.Pointer[string]
	seeds  []string
	timing Timing
	log    *slog.Logger
	warn   *loglimit.Limiter // memberlist's warnings and errors, bounded
	ml     *memberlist.Memberlist

	// metaMu serializes UpdateMeta; NodeMeta, called by memberlist under
	// its lock, reads encoded without it.
	metaMu  sync.Mutex
	local   Meta
	encoded atomic.Pointer[[]byte]

	notes notices // memberlist's callbacks, waiting for run

	mu    sync.RWMutex
	nodes map[string]*entry // applied by run only

	events  chan Event
	pending outbox // run's events not yet taken by the consumer

	// selfConflict is set when a seed's answer to a join holds this
	// node's name at another address (NotifyMerge): the join loop tries
	// again.
	selfConflict atomic.Bool
	joinAttempts atomic.Int64 // for tests
	answered     atomic.Int64 // answers to this node's goodbye it waited for; for tests
	joined       atomic.Bool

	// life serializes Leave and Shutdown: memberlist panics on a Leave
	// after its Shutdown.
	life     sync.Mutex
	stopped  bool          // under life
	stopping chan struct{} // closed when stopped
	wg       sync.WaitGroup
	// leaving is set once the node has begun to leave (Leaving).
	leaving atomic.Bool
	// goodbyesSeen receives a token for each member's answer to this
	// node's goodbye (Leave).
	goodbyesSeen chan struct{}
	// systemID is this life's, local.SystemID, read without metaMu.
	systemID string
}

type entry struct {
	Node
	suspect bool
	// goodbye is the SystemID of the life that said goodbye, so that its
	// leave reads as "left", not "dead".
	goodbye string
}

// Start binds the gossip address, tries each seed of cfg.Join once and
// returns: when no seed answers, the node runs alone and keeps trying in
// the background, with backoff, until a seed answers or another node
// joins it. A cluster whose nodes all restart must come up whichever
// node starts first, and a seed that is down now may be up in a second.
// For the same reason a wrong --cluster-key is no error of Start: a seed
// that cannot decrypt the join drops the connection, which looks the same
// as a seed that is down. The node stays alone and logs each failed try.
func Start(cfg Config) (*Membership, error) {
	b, err := cfg.check()
	if err != nil {
		return nil, err
	}
	timing := cfg.timing(b.host)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	m := &Membership{
		name:     cfg.NodeName,
		timing:   timing,
		log:      logger,
		warn:     loglimit.New(logger, nil),
		nodes:    make(map[string]*entry),
		events:   make(chan Event),
		stopping: make(chan struct{}),
		// Answers beyond the members told are dropped: a full buffer
		// means every member answered.
		goodbyesSeen: make(chan struct{}, maxGoodbyeAnswers),
	}
	m.notes.signal = make(chan struct{}, 1)
	m.local = cfg.Meta
	m.local.SystemID = newSystemID()
	m.systemID = m.local.SystemID
	if m.local.State == 0 {
		m.local.State = StateJoining
	}
	enc, err := m.local.encode()
	if err != nil {
		return nil, err
	}
	m.encoded.Store(&enc)

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = b.host, b.port, b.port
	if cfg.AdvertiseAddr != "" {
		mc.AdvertiseAddr, mc.AdvertisePort, _ = splitHostPort(cfg.AdvertiseAddr) // checked
	}
	mc.ProbeInterval = timing.ProbeInterval
	mc.ProbeTimeout = timing.ProbeTimeout
	mc.SuspicionMult = timing.SuspicionMult
	mc.GossipInterval = timing.GossipInterval
	mc.PushPullInterval = timing.PushPullInterval
	mc.TCPTimeout = timing.TCPTimeout
	mc.DeadNodeReclaimTime = timing.DeadNodeReclaimTime
	if cfg.ClusterKey != "" {
		if mc.SecretKey, err = gossipKey(cfg.ClusterKey); err != nil {
			return nil, fmt.Errorf("membership: derive the gossip key: %w", err)
		}
		// Defaults, said again: a plaintext packet is refused, never read.
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	d := (*delegate)(m)
	mc.Delegate, mc.Events, mc.Merge, mc.Ping = d, d, d, d
	mc.Logger = log.New(&logWriter{m: m}, "", 0)

	// memberlist starts its probe and gossip timers in Create: started on
	// a multiple of the probe interval (of which the gossip interval and
	// raft's tick are divisors), they fire with the other members' and
	// with the node's own ticks (clock.AlignedTicker), not at moments of
	// their own that wake an idle process again.
	time.Sleep(clock.UntilNextTick(time.Now(), timing.ProbeInterval))
	if m.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("membership: start gossip on %s: %w", cfg.BindAddr, err)
	}
	addr := m.ml.LocalNode().Address()
	m.addr.Store(&addr)
	if err := m.publishOnGossipHost(m.ml.LocalNode().Addr.String()); err != nil {
		m.ml.Shutdown()
		return nil, err
	}
	m.seeds = m.otherSeeds(cfg.Join)

	m.drain(nil) // this node itself, so that Members lists it on return
	m.wg.Add(1)
	go m.run()
	if len(m.seeds) == 0 || m.join() {
		m.joined.Store(true) // a node without seeds forms the cluster
	} else {
		m.wg.Add(1)
		go m.joinLoop()
	}
	return m, nil
}

// publishOnGossipHost replaces the host of a published address that
// names every interface (0.0.0.0, [::], none: a listener bound so) with
// host, where the others reach this node's gossip: they would dial the
// wildcard, which is their own machine. Before any join, so that no
// member ever holds the wildcard.
func (m *Membership) publishOnGossipHost(host string) error {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	next := m.local
	next.HTTPAddr, next.PeerAddr = onHost(next.HTTPAddr, host), onHost(next.PeerAddr, host)
	if next == m.local {
		return nil
	}
	enc, err := next.encode()
	if err != nil {
		return err
	}
	m.local = next
	m.encoded.Store(&enc)
	return m.ml.UpdateNode(m.timing.TCPTimeout) // no member to wait for yet
}

// onHost is addr with host in place of a host that names every
// interface; any other addr as it is.
func onHost(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	return net.JoinHostPort(host, port)
}

// newSystemID returns 16 random bytes in hex.
func newSystemID() string {
	var b [systemIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// otherSeeds drops the seeds that are this node: a node listed in its own
// --join (every node given the same list) would join itself and count it
// a success.
func (m *Membership) otherSeeds(seeds []string) []string {
	self, err := net.ResolveTCPAddr("tcp", m.Addr())
	var out []string
	for _, s := range seeds {
		if a, rerr := net.ResolveTCPAddr("tcp", s); err == nil && rerr == nil && a.IP.Equal(self.IP) && a.Port == self.Port {
			continue
		}
		out = append(out, s)
	}
	return out
}

// Joined reports whether the node is in a cluster: it had no seeds (it
// forms the cluster), a seed accepted it, or another node joined it.
// False while it keeps retrying seeds that are down or refuse it.
func (m *Membership) Joined() bool { return m.joined.Load() }

// Addr is the gossip address others reach this node by, host:port (with
// the port picked when BindAddr asked for port 0).
func (m *Membership) Addr() string { return *m.addr.Load() }

// Local returns this node's published meta (SystemID included).
func (m *Membership) Local() Meta {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.local
}

// join tries every seed once. It reports whether the node is in the
// cluster: a seed answered, and no answer held this node's name at
// another address. A seed answers with its view from before this join,
// so after a restart on a new address it takes one more join, once the
// seed has accepted the new address, to see it.
func (m *Membership) join() bool {
	m.joinAttempts.Add(1)
	m.selfConflict.Store(false)
	n, err := m.ml.Join(m.joinTargets())
	switch {
	case n == 0:
		m.log.Warn("membership: no seed answered; running alone, will retry", "seeds", m.seeds, "err", err)
		return false
	case m.selfConflict.Load():
		// Either this node's previous life, which the members release
		// once it is declared dead, or another node under the same name,
		// which never goes: say both, so an operator can tell.
		m.log.Info("membership: the cluster holds this node's name at another address: a previous life of this node (released once the cluster declares it dead), or another node started with the same --node-name (give each its own); will retry", "name", m.name)
		return false
	}
	if err != nil {
		m.log.Info("membership: joined, though some seeds did not answer", "joined", n, "err", err)
	}
	return true
}

// joinTargets are the seeds and every other member this node knows: after
// a restart on a new address each member must accept the new address
// (after its own DeadNodeReclaimTime), and a join asks each one directly
// instead of waiting for gossip that one of them may have refused.
func (m *Membership) joinTargets() []string {
	targets := slices.Clone(m.seeds)
	for _, n := range m.ml.Members() {
		if a := n.Address(); n.Name != m.name && !slices.Contains(targets, a) {
			targets = append(targets, a)
		}
	}
	return targets
}

// joinLoop retries join with exponential backoff from one probe interval
// up to ten, until it succeeds, another node joins this one, or the node
// stops.
func (m *Membership) joinLoop() {
	defer m.wg.Done()
	wait := m.timing.ProbeInterval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-m.stopping:
			return
		case <-t.C:
		}
		// Either another node joined this one, or this one joined.
		if (m.ml.NumMembers() > 1 && !m.selfConflict.Load()) || m.join() {
			m.joined.Store(true)
			return
		}
		wait = min(2*wait, 10*m.timing.ProbeInterval)
		t.Reset(wait)
	}
}

// Nodes returns every node this node knows of, itself included, sorted
// by name. Dead and left nodes stay listed under their last address until
// their name comes back.
func (m *Membership) Nodes() []Node {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Node, 0, len(m.nodes))
	for _, e := range m.nodes {
		mb := e.Node
		if e.suspect && mb.State.published() {
			mb.State = StateSuspect
		}
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Events returns the changes of membership, in the order this node
// learned them, from a goroutine of this package: memberlist's callbacks
// only queue them, so a consumer that is slow, or stops reading, never
// holds up gossip. While the consumer lags, the changes of one node
// coalesce into one event carrying its latest state (a join followed by
// an update stays a join), so the queue is bounded by the number of
// nodes. The channel is closed after Leave or Shutdown.
func (m *Membership) Events() <-chan Event { return m.events }

// UpdateMeta applies f to a copy of this node's meta and publishes the
// result to the cluster (memberlist's UpdateNode: it returns once the
// change is sent, not once everyone has it). SystemID cannot change. An
// invalid result publishes nothing.
func (m *Membership) UpdateMeta(f func(*Meta)) error {
	select {
	case <-m.stopping:
		return ErrStopped
	default:
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	next := m.local
	f(&next)
	next.SystemID = m.local.SystemID
	enc, err := next.encode()
	if err != nil {
		return err
	}
	m.local = next
	m.encoded.Store(&enc)
	if err := m.ml.UpdateNode(m.timing.TCPTimeout); err != nil {
		return fmt.Errorf("membership: publish meta: %w", err)
	}
	return nil
}

// goodbyeMsg prefixes the message a leaving node sends each member before
// it leaves; memberlist's own leave message looks like a death to the
// event delegate, and this tells the two apart. (memberlist marks the
// node it reports left in a state of its own, not in the Node it hands
// the delegate, whose State it never sets: the goodbye is the only way.)
const goodbyeMsg = 'G'

// goodbyeSeenMsg prefixes a member's answer to a goodbye, sent once it
// has recorded it; it names the leaver's life (SystemID). The leaver
// broadcasts its leave only after the answers: the goodbye (a TCP
// stream) and the broadcast (UDP) travel apart, and a member that took
// the broadcast first reported a failure to its consumer, then the leave.
const goodbyeSeenMsg = 'S'

// maxGoodbyeAnswers bounds the answers a leaver counts; past it, every
// member is taken to have answered.
const maxGoodbyeAnswers = 1024

// leaveRounds bounds, in gossip intervals, the wait for the leave's
// broadcast once every member has the goodbye.
const leaveRounds = 10

// Leaving tells the membership that the node has begun to leave (it
// hands its work over before Leave): memberlist's warnings about the
// others are then about a cluster it is leaving, and logged at debug;
// errors stay errors.
func (m *Membership) Leaving() { m.leaving.Store(true) }

// Leave says goodbye: every member is told (so it records "left", not
// "dead"), memberlist broadcasts the leave, then the node stops as
// Shutdown does. ctx bounds the wait for the broadcast; a broadcast
// unfinished by then fails the leave only when a member missed the
// goodbye.
func (m *Membership) Leave(ctx context.Context) error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.stopped {
		return ErrStopped
	}
	defer m.stop()
	bye := append([]byte{goodbyeMsg}, m.Local().SystemID...)
	told := true // every other member has the goodbye
	sent := 0
	for _, n := range m.ml.Members() {
		if n.Name == m.name {
			continue
		}
		if ctx.Err() != nil {
			told = false
			continue
		}
		if err := m.ml.SendReliable(n, bye); err != nil {
			told = false
			m.log.Info("membership: goodbye not delivered; the member will see a failure", "member", n.Name, "err", err)
			continue
		}
		sent++
	}
	timeout := m.timing.TCPTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	if told {
		// The broadcast only repeats the goodbye: a few gossip rounds, not
		// the whole deadline, which members leaving together would wait
		// out (see below).
		timeout = min(timeout, leaveRounds*m.timing.GossipInterval)
	}
	// One budget for both waits: the answers may take half of it (a member
	// of an older build never answers), the broadcast the rest.
	end := time.Now().Add(timeout)
	m.awaitGoodbyesSeen(sent, timeout/2)
	if err := m.ml.Leave(max(time.Until(end), time.Millisecond)); err != nil {
		if told {
			// The broadcast only repeats what every member was told.
			// Members leaving together stop gossiping to each other as
			// they hear of it, so none finishes its broadcast.
			m.log.Debug("membership: leave broadcast unfinished; every member was told goodbye", "err", err)
			return nil
		}
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// awaitGoodbyesSeen waits up to timeout for n members' answers to the
// goodbye. A member that does not answer (stopping too, or slow) may take
// the broadcast for a death, as before the answers: the wait is bounded.
func (m *Membership) awaitGoodbyesSeen(n int, timeout time.Duration) {
	n = min(n, maxGoodbyeAnswers)
	if n == 0 {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for ; n > 0; n-- {
		select {
		case <-m.goodbyesSeen:
			m.answered.Add(1)
		case <-t.C:
			m.log.Debug("membership: leaving before every member answered the goodbye", "unanswered", n)
			return
		}
	}
}

// answerGoodbye tells the member named name, whose goodbye of life
// systemID was just recorded, that it was: it broadcasts its leave once
// every member answered (Leave). run calls it; the answer goes on a
// goroutine of its own, as a stream may take a while.
func (m *Membership) answerGoodbye(name, systemID string) {
	if m.ml == nil {
		return // a Membership of the unit tests, without gossip
	}
	for _, n := range m.ml.Members() {
		if n.Name != name {
			continue
		}
		m.wg.Add(1) // run, which calls this, is counted: Wait cannot have passed
		go func() {
			defer m.wg.Done()
			if err := m.ml.SendReliable(n, append([]byte{goodbyeSeenMsg}, systemID...)); err != nil {
				m.log.Debug("membership: goodbye not answered", "member", name, "err", err)
			}
		}()
	}
}

// Shutdown stops gossip at once, without a word to anyone: the others
// will find the node dead. For crash tests; a no-op after Leave.
func (m *Membership) Shutdown() {
	m.life.Lock()
	defer m.life.Unlock()
	if !m.stopped {
		m.stop()
	}
}

// stop ends gossip and this package's goroutines; life is held.
func (m *Membership) stop() {
	m.stopped = true
	close(m.stopping)
	if err := m.ml.Shutdown(); err != nil {
		m.log.Warn("membership: shutdown", "err", err)
	}
	m.wg.Wait()
}
