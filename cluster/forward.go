package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Forwarding is what a node needs to serve requests for partitions it
// does not host: where they live, and the transport to send them there
// (docs/cluster.md, "Forwarding").
type Forwarding struct {
	Router Router
	Peers  *peer.Transport
	// Self is this node's peer address as routers name it; default
	// Peers.Addr().
	Self string
	// Replies bounds the receiver's cache of answered request ids: at most
	// ReplyEntries (10,000) ids and ReplyBytes (64 MiB) of answers, each
	// for ReplyFor (2 min).
	ReplyEntries int
	ReplyBytes   int
	ReplyFor     time.Duration
}

// Unavailable answers: the request did not run, or its outcome is unknown.
// Shared values: the HTTP layer only reads them.
var (
	errNoLeader  = kiterr.New(kiterr.Unavailable, "no server leads this data right now; retry later")
	errUnreached = kiterr.New(kiterr.Unavailable, "the server that owns this data could not be reached; retry later")
	// errUnreachedInTime: the leader did not answer within the request
	// timeout; the request may have run.
	errUnreachedInTime = kiterr.New(kiterr.Unavailable, "the server that owns this data did not answer in time; retry later, writes with the same Idempotency-Key")
	errNotServing      = kiterr.New(kiterr.Unavailable, "this server does not take forwarded requests yet; retry later")
)

// forwarder is a node's forwarding, both ends: sending requests for
// partitions it does not host, and answering those sent to it.
type forwarder struct {
	Forwarding
	prefix  string // random, per start: request ids of two lives never meet
	seq     atomic.Uint64
	replies *replyCache
}

// EnableForwarding makes Request send a request whose partition this node
// does not host to the partition's leader, and ServePeer answer forwarded
// requests. Until it is called, both answer unavailable.
func (h *Host) EnableForwarding(f Forwarding) error {
	if f.Router == nil || f.Peers == nil {
		return errors.New("cluster: forwarding needs a router and a transport")
	}
	if f.Self == "" {
		f.Self = f.Peers.Addr()
	}
	if f.ReplyEntries <= 0 {
		f.ReplyEntries = 10_000
	}
	if f.ReplyBytes <= 0 {
		f.ReplyBytes = 64 << 20
	}
	if f.ReplyFor <= 0 {
		f.ReplyFor = 2 * time.Minute
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	h.fwd.Store(&forwarder{
		Forwarding: f,
		prefix:     strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 16) + "-",
		replies:    newReplyCache(f.ReplyEntries, f.ReplyBytes, f.ReplyFor, time.Now),
	})
	return nil
}

// How long a request for a partition this node leads but does not serve
// yet waits for it, and how often it looks.
const (
	selfWait = 2 * time.Second
	selfPoll = 5 * time.Millisecond
)

// How long a request that met a Moved naming no newer leader waits for
// the routing table to name another node, and how often it looks.
const (
	movedWait = 2 * time.Second
	movedPoll = 20 * time.Millisecond
)

// requestID names one forwarded request, the same on each of its retries.
func (f *forwarder) requestID() string {
	return f.prefix + strconv.FormatUint(f.seq.Add(1), 16)
}

// forward sends a request for a partition this node does not host to its
// leader: one hop, and one more when that node answers that the partition
// moved to a leader of a newer term. It never runs the request here.
func (h *Host) forward(kind, identity string, msg proto.Message, notHosted error) (proto.Message, error) {
	if h.fwd.Load() == nil {
		return nil, fmt.Errorf("%w: %w", notHosted, errNoLeader)
	}
	return h.toLeader(kind, identity, msg, false)
}

// toLeader takes msg to the actor on its partition's leader: a request,
// answered, or a notice (tell), handed to the actor there.
func (h *Host) toLeader(kind, identity string, msg proto.Message, tell bool) (proto.Message, error) {
	f := h.fwd.Load()
	p := partition.Of(identity)
	to, ok := f.Router.Leader(p)
	if ok && to.Addr == f.Self {
		if res, served, err := h.awaitHere(f, p, kind, identity, msg, tell); served {
			return res, err
		}
		to, ok = f.Router.Leader(p)
	}
	if !ok || to.Addr == f.Self {
		// During an election, or before this node's own Host(p).
		return nil, fmt.Errorf("request %s/%s: partition %d: %w", kind, identity, p, errNoLeader)
	}
	payload, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("request %s/%s: %w", kind, identity, err)
	}
	env := &kitpb.Forward{Kind: kind, Identity: identity, Tell: tell,
		RequestType: string(msg.ProtoReflect().Descriptor().FullName()), Request: payload}
	id := f.requestID()
	ctx := h.requests.After(time.Now())
	for hop := 0; ; hop++ {
		res, err := f.call(ctx, to.Addr, env, id)
		if hop == 0 && errors.Is(err, peer.ErrUnavailable) {
			// Nothing was sent: the node the table named is down or gone.
			// Go to whoever leads now, once the table names another.
			if next, ok := f.awaitOther(p, to.Addr); ok {
				to = next
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("request %s/%s: forward to %s: %w", kind, identity, to.Addr, err)
		}
		m, ok := res.(*kitpb.Moved)
		if !ok {
			if res == nil {
				return nil, fmt.Errorf("request %s/%s: forward to %s: empty reply", kind, identity, to.Addr)
			}
			return res, nil
		}
		// to does not host p: learn what it knows (and what the raft side
		// may have set meanwhile), and go there once if it is newer.
		if partition.ID(m.Partition) == p {
			f.Router.Learn(p, Leader{Addr: m.Leader, Term: m.Term})
		}
		next, ok := f.Router.Leader(p)
		if hop == 0 && ok && next.Addr == to.Addr {
			// A Moved that names no newer leader comes from a node that
			// left p's group or has not heard of its new leader yet; the
			// table of a node that holds no replica of p learns of the new
			// leader from gossip a little later. Wait for it, as for an
			// election.
			next, ok = f.awaitOther(p, to.Addr)
		}
		if hop == 0 && ok && next.Addr == f.Self && (next.Term == 0 || next.Term > to.Term) {
			// p moved here (a leadership handed to this node, as the
			// cluster balances itself): served here once this node hosts
			// it. The Moved says the request did not run there.
			if res, served, err := h.awaitHere(f, p, kind, identity, msg, tell); served {
				return res, err
			}
		}
		// One more hop, to another node, in a newer term when terms are
		// known (gossip names a leader without its term).
		if hop > 0 || !ok || next.Addr == to.Addr || next.Addr == f.Self || next.Term != 0 && next.Term <= to.Term {
			return nil, fmt.Errorf("request %s/%s: partition %d moved from %s (which named %q in term %d; the table here names %q in term %d, hop %d): %w",
				kind, identity, p, to.Addr, m.Leader, m.Term, next.Addr, next.Term, hop, errNoLeader)
		}
		to = next
	}
}

// awaitHere runs msg on this node, which leads its partition but does
// not serve it yet: it is applying the first entry of its term before it
// hosts the partition, or its lease lapsed for a moment (a heartbeat
// answered late on a busy machine). Both pass in a few cycles; a request
// waits for them, up to selfWait and while the routing table names this
// node, rather than fail at once. served is false when it did not run.
func (h *Host) awaitHere(f *forwarder, p partition.ID, kind, identity string, msg proto.Message, tell bool) (res proto.Message, served bool, err error) {
	for deadline := time.Now().Add(selfWait); time.Now().Before(deadline); {
		time.Sleep(selfPoll)
		res, err := h.here(kind, identity, msg, tell)
		if !errors.Is(err, ErrNotHosted) {
			return res, true, err
		}
		if to, ok := f.Router.Leader(p); ok && to.Addr != f.Self {
			break
		}
	}
	return nil, false, nil
}

// awaitOther waits up to movedWait for the routing table to name another
// leader of p than the node at addr, and returns what it names last.
func (f *forwarder) awaitOther(p partition.ID, addr string) (Leader, bool) {
	next, ok := f.Router.Leader(p)
	for deadline := time.Now().Add(movedWait); (!ok || next.Addr == addr) && time.Now().Before(deadline); {
		time.Sleep(movedPoll)
		next, ok = f.Router.Leader(p)
	}
	return next, ok && next.Addr != addr && next.Addr != f.Self
}

// here runs msg on this node's activation: a request is asked and
// answered, a notice handed over (ok).
func (h *Host) here(kind, identity string, msg proto.Message, tell bool) (proto.Message, error) {
	if !tell {
		return h.local(kind, identity, msg)
	}
	pid, err := h.pid(kind, identity)
	if err != nil {
		return nil, err
	}
	if pid == nil {
		return nil, errUnavailable
	}
	h.system.Root.Send(pid, msg)
	return handedOver, nil
}

// handedOver answers a notice handed to its actor. Shared: only read.
var handedOver = &kitpb.Ok{}

// tell hands a notice to the actor on its partition's leader, without
// waiting for the actor. It follows the partition through an election or
// a move as a request does, again and again until the request timeout:
// a notice sent as its partition changes leader (a member draining, a
// node that died) is the one most likely to be lost, and its receiver
// learns of a lost notice only from the next one. The waits between tries
// double, so that the notices of a long election do not keep the node busy.
func (h *Host) tell(kind, identity string, msg proto.Message) {
	wait := movedPoll
	for until := time.Now().Add(h.requests.Timeout()); ; wait = min(2*wait, tellBackoffMax) {
		_, err := h.toLeader(kind, identity, msg, true)
		if err == nil || h.stopped.Load() || !time.Now().Add(wait).Before(until) {
			return
		}
		time.Sleep(wait)
	}
}

// tellBackoffMax bounds the wait between two tries of a notice.
const tellBackoffMax = time.Second

// call makes one forwarded call, again with the same request id when the
// connection broke while it was in flight: the receiver answers a request
// id it ran from its cache, so the retry cannot run it twice.
func (f *forwarder) call(ctx context.Context, addr string, env *kitpb.Forward, id string) (proto.Message, error) {
	res, err := f.Peers.Call(ctx, addr, env, id)
	if errors.Is(err, peer.ErrConnLost) {
		res, err = f.Peers.Call(ctx, addr, env, id)
		if errors.Is(err, peer.ErrUnavailable) {
			// The retry sent nothing, but the first attempt may have
			// run: never "nothing was sent" (ErrUnavailable, not
			// wrapped), which toLeader takes to the next leader, where it
			// would run again.
			err = fmt.Errorf("%w (the retry: %v)", peer.ErrConnLost, err)
		}
	}
	if err == nil {
		return res, nil
	}
	var e *kiterr.Error
	switch {
	case errors.As(err, &e):
		if e.Code == kiterr.Internal {
			// As a local request's Go error: logged, never shown.
			return nil, fmt.Errorf("on the leader: %s", e.Message)
		}
		return nil, err // the actor's answer, as a local one's
	case errors.Is(err, peer.ErrUnavailable), errors.Is(err, peer.ErrConnLost), errors.Is(err, peer.ErrClosed):
		return nil, fmt.Errorf("%w: %w", err, errUnreached)
	case errors.Is(err, context.DeadlineExceeded):
		// A leader cut off from this node looks the same as one that is
		// slow: either way it is not reachable now, and the request may
		// have run, as after a lost connection. Not a 500: the client
		// retries (a write with its key).
		return nil, fmt.Errorf("%w: %w", err, errUnreachedInTime)
	}
	return nil, err // refused, too large: a bug or a rolling upgrade
}

// ServePeer is the peer.Handler of forwarded requests. It runs a Forward
// on this node's activations, never forwarding it again: when the
// partition is not hosted here it answers Moved, with the leader this
// node knows. A request id it answered before gets the same answer, from
// its cache, without running again. A Forward it cannot run (an unknown
// kind or message type, a request that does not decode) is refused
// (peer.RefusedError).
func (h *Host) ServePeer(ctx context.Context, from string, msg proto.Message, requestID string) (proto.Message, error) {
	fw, ok := msg.(*kitpb.Forward)
	if !ok {
		return nil, &peer.RefusedError{Reason: "not a forwarded request: " + string(msg.ProtoReflect().Descriptor().FullName())}
	}
	f := h.fwd.Load()
	if f == nil {
		return nil, errNotServing
	}
	req, err := h.decodeForward(fw)
	if err != nil {
		return nil, err
	}
	run := func() (proto.Message, error) {
		p := partition.Of(fw.Identity)
		res, err := h.here(fw.Kind, fw.Identity, req, fw.Tell)
		// This node leads p but does not serve it for a moment (it is
		// applying the first entry of its term, its lease lapsed on a busy
		// machine, it hands p over), or p's group is electing a leader.
		// The request waits here, as one of this node's own would
		// (forward), rather than go back as a Moved that names nobody
		// newer, which its sender could only wait on and then refuse; a
		// Moved after the wait names the new leader.
		for deadline := time.Now().Add(selfWait); errors.Is(err, ErrNotHosted) && f.awaitsLeader(p) && time.Now().Before(deadline); {
			time.Sleep(selfPoll)
			res, err = h.here(fw.Kind, fw.Identity, req, fw.Tell)
		}
		if errors.Is(err, ErrNotHosted) {
			return f.moved(p), nil
		}
		if kiterr.Unexplained(err) {
			// Only e crosses to the sender, whose log names the request.
			h.log.Warn("forwarded request unavailable", "from", from, "kind", fw.Kind, "err", err)
		}
		return res, err
	}
	if fw.Tell {
		// A notice carries no request id: a copy of it changes nothing.
		return run()
	}
	return f.replies.do(ctx, requestID, run)
}

// awaitsLeader reports whether this node's table names it p's leader, or
// no leader (an election).
func (f *forwarder) awaitsLeader(p partition.ID) bool {
	l, ok := f.Router.Leader(p)
	return !ok || l.Addr == f.Self
}

// moved is the Moved answer for p: its leader as this node knows it.
func (f *forwarder) moved(p partition.ID) *kitpb.Moved {
	m := &kitpb.Moved{Partition: uint32(p)}
	if l, ok := f.Router.Leader(p); ok && l.Addr != f.Self {
		m.Leader, m.Term = l.Addr, l.Term
	}
	return m
}

// decodeForward returns the request a Forward carries, checked against the
// kinds this node runs and kitd's own message types, or the refusal the
// transport counts, logs and answers (a member sends one only by a bug or
// in a rolling upgrade: a kind or message this version does not know).
func (h *Host) decodeForward(fw *kitpb.Forward) (proto.Message, error) {
	if _, ok := h.kinds[fw.Kind]; !ok {
		return nil, &peer.RefusedError{Reason: "forward: unknown kind"}
	}
	mt, ok := requestTypes()[fw.RequestType]
	if !ok {
		return nil, &peer.RefusedError{Reason: "forward: unknown request type"}
	}
	req := mt.New().Interface()
	if err := proto.Unmarshal(fw.Request, req); err != nil {
		return nil, &peer.RefusedError{Reason: "forward: malformed request"}
	}
	return req, nil
}

// kitPackage is the protobuf package of kitd's own messages: the only
// ones a peer may make this node build.
const kitPackage = "kit.v1"

// requestTypes are the messages a Forward may carry: kitd's own, except
// the envelopes and Failure, which are never requests. Never the global
// registry as a whole: a peer must not make this node build raft's or
// anyone else's messages.
var requestTypes = sync.OnceValue(func() map[string]protoreflect.MessageType {
	types := make(map[string]protoreflect.MessageType)
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		name := mt.Descriptor().FullName()
		if name.Parent() == kitPackage {
			types[string(name)] = mt
		}
		return true
	})
	for _, envelope := range []proto.Message{&kitpb.Forward{}, &kitpb.Moved{}, &kitpb.Failure{}} {
		delete(types, string(envelope.ProtoReflect().Descriptor().FullName()))
	}
	return types
})

// PeerRegistry is the registry a node's transport needs for forwarding:
// Forward and Moved, and every request and reply of kitd's actors.
func PeerRegistry() *peer.Registry {
	msgs := []proto.Message{&kitpb.Forward{}, &kitpb.Moved{}}
	for _, mt := range requestTypes() {
		msgs = append(msgs, mt.Zero().Interface())
	}
	return peer.NewRegistry(msgs...)
}

// replyCache remembers the answers to forwarded request ids, so that a
// sender's retry after a lost reply gets the first answer instead of
// running the request twice. It is bounded in entries, bytes and age (a
// page of history can be large), and lives
// in memory only: it covers a lost reply, not a crash of this node (the
// replicated request ids of docs/cluster.md do). One lock per forwarded
// request, never on the local path.
type replyCache struct {
	max, maxBytes int
	ttl           time.Duration
	now           func() time.Time

	mu      sync.Mutex
	entries map[string]*answer
	order   []cached // a ring, oldest at head
	head    int
	n       int
	bytes   int // the sizes of the answers in order
}

// answer is one request id's answer; done closes once it is set.
type answer struct {
	done chan struct{}
	res  proto.Message
	err  error
	size int // res's, counted in bytes once it is set (under mu)
}

type cached struct {
	id string
	at time.Time
	a  *answer
}

func newReplyCache(max, maxBytes int, ttl time.Duration, now func() time.Time) *replyCache {
	return &replyCache{max: max, maxBytes: maxBytes, ttl: ttl, now: now,
		entries: make(map[string]*answer), order: make([]cached, max)}
}

// do answers request id: with run's answer, or with the answer of the
// first request of the id, waiting for it if it is still running. A Moved
// answer is not kept: nothing ran, and a retry of the id may find the
// partition back. An empty id is never kept.
func (c *replyCache) do(ctx context.Context, id string, run func() (proto.Message, error)) (proto.Message, error) {
	if id == "" {
		return run()
	}
	now := c.now()
	c.mu.Lock()
	c.expire(now)
	if a, ok := c.entries[id]; ok {
		c.mu.Unlock()
		select {
		case <-a.done:
			return a.res, a.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a := &answer{done: make(chan struct{})}
	c.entries[id] = a
	c.push(cached{id, now, a})
	c.mu.Unlock()

	res, err := run()
	a.res, a.err = res, err
	close(a.done)
	_, moved := res.(*kitpb.Moved)
	size := 0
	if res != nil && !moved {
		size = proto.Size(res)
	}
	c.mu.Lock()
	if c.entries[id] == a {
		if moved {
			delete(c.entries, id)
		} else {
			a.size = size
			c.bytes += size
			for c.bytes > c.maxBytes && c.n > 0 {
				c.pop()
			}
		}
	}
	c.mu.Unlock()
	return res, err
}

// push appends e, dropping the oldest entry when the ring is full.
func (c *replyCache) push(e cached) {
	if c.n == c.max {
		c.pop()
	}
	c.order[(c.head+c.n)%c.max] = e
	c.n++
}

// expire drops the entries older than ttl.
func (c *replyCache) expire(now time.Time) {
	for c.n > 0 && now.Sub(c.order[c.head].at) > c.ttl {
		c.pop()
	}
}

func (c *replyCache) pop() {
	e := &c.order[c.head]
	if c.entries[e.id] == e.a {
		delete(c.entries, e.id)
	}
	c.bytes -= e.a.size
	*e = cached{}
	c.head = (c.head + 1) % c.max
	c.n--
}

// len counts the ids the cache answers.
func (c *replyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
