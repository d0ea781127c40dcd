package membership

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate is the face Membership shows memberlist. memberlist calls most
// of these methods with its node lock held (calling back into it there
// deadlocks, memberlist#237), so each one copies what it was given onto
// the notices queue and returns; run does the work.
type delegate Membership

type noticeKind uint8

const (
	noteJoin noticeKind = iota + 1
	noteUpdate
	noteLeave
	noteSuspect // this node's probe of the member failed
	noteAck     // this node's probe of the member succeeded
	noteGoodbye // the member said it is leaving
)

type notice struct {
	kind     noticeKind
	name     string
	addr     string
	meta     []byte
	systemID string // of noteGoodbye
}

// notices is an unbounded queue between memberlist's callbacks and run.
// Unbounded, because a callback must never block memberlist; run drains
// it as fast as memberlist fills it, since run never waits on the
// consumer of Events.
type notices struct {
	mu     sync.Mutex
	items  []notice
	signal chan struct{} // capacity 1: "items is not empty"
}

func (q *notices) push(n notice) {
	q.mu.Lock()
	q.items = append(q.items, n)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// take swaps the queued notices for spare (emptied), so that two slices
// alternate and draining allocates nothing in the steady state.
func (q *notices) take(spare []notice) []notice {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = spare[:0]
	return items
}

func (d *delegate) note(kind noticeKind, n *memberlist.Node) {
	d.notes.push(notice{kind: kind, name: n.Name, addr: n.Address(), meta: bytes.Clone(n.Meta)})
}

// NodeMeta implements memberlist.Delegate.
func (d *delegate) NodeMeta(limit int) []byte {
	b := *d.encoded.Load()
	if len(b) > limit { // cannot happen: maxEncodedMeta < MetaMaxSize
		return nil
	}
	return b
}

// NotifyMsg implements memberlist.Delegate: the goodbye is the only user
// message kitd sends over gossip.
func (d *delegate) NotifyMsg(b []byte) {
	if len(b) == 1+systemIDLen && b[0] == goodbyeMsg && isSystemID(string(b[1:])) {
		d.notes.push(notice{kind: noteGoodbye, systemID: string(b[1:])})
		return
	}
	if len(b) == 1+systemIDLen && b[0] == goodbyeSeenMsg {
		if string(b[1:]) == d.systemID {
			select {
			case d.goodbyesSeen <- struct{}{}:
			default: // more answers than members told: enough
			}
		}
		return // an answer to an earlier life's goodbye
	}
	d.log.Warn("membership: ignoring an unknown gossip message", "bytes", len(b))
}

// GetBroadcasts implements memberlist.Delegate: kitd broadcasts nothing.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate: no state beyond Meta.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.note(noteJoin, n) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.note(noteUpdate, n) }

// NotifyLeave implements memberlist.EventDelegate; memberlist calls it for
// a death and a leave alike (see goodbyeMsg).
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.note(noteLeave, n) }

// NotifyMerge implements memberlist.MergeDelegate: peers is a seed's
// view, sent in answer to a join before the seed merged this node's
// state. This node's name there at another address means the cluster
// still holds a previous life of it, which the seed refuses to replace
// until DeadNodeReclaimTime after its death: the join loop tries again.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	self := d.addr.Load()
	for _, p := range peers {
		if p.Name == d.name && self != nil && p.Address() != *self {
			d.selfConflict.Store(true)
		}
	}
	return nil
}

// AckPayload implements memberlist.PingDelegate.
func (d *delegate) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: a direct ack
// clears this node's suspicion of the member.
func (d *delegate) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	d.notes.push(notice{kind: noteAck, name: other.Name})
}

// run applies the notices to the member table and hands events to the
// consumer, whichever is ready first: a consumer that stops reading
// delays only its own events, which coalesce in pending meanwhile.
func (m *Membership) run() {
	defer m.wg.Done()
	defer close(m.events)
	var batch []notice
	for {
		var out chan Event
		next, ok := m.pending.peek()
		if ok {
			out = m.events
		}
		select {
		case <-m.stopping:
			return
		case <-m.notes.signal:
			batch = m.drain(batch)
		case out <- next:
			m.pending.pop()
		}
	}
}

// drain applies the queued notices; spare is the slice of the previous
// drain, returned for the next.
func (m *Membership) drain(spare []notice) []notice {
	batch := m.notes.take(spare)
	for i := range batch {
		m.apply(&batch[i])
	}
	clear(batch) // let the meta copies go
	return batch
}

// apply records one notice; only run (and Start, before run) calls it.
func (m *Membership) apply(n *notice) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.nodes[n.name]
	switch n.kind {
	case noteJoin, noteUpdate:
		meta, err := decodeMeta(n.meta)
		if err != nil {
			// Never routed to: the node is not a kitd of this version,
			// or is broken. What it published before (if anything) stays.
			m.log.Warn("membership: ignoring a member's meta", "member", n.name, "addr", n.addr, "err", err)
			return
		}
		kind := EventUpdate
		if e == nil || n.kind == noteJoin || !e.State.published() || e.Meta.SystemID != meta.SystemID {
			kind = EventJoin // a new node, or a new life of a name
		}
		if e == nil {
			e = &entry{}
			m.nodes[n.name] = e
		}
		e.Node = Node{Name: n.name, Addr: n.addr, State: meta.State, Meta: meta}
		e.suspect = false
		m.pending.add(Event{Kind: kind, Node: e.Node})
		m.logChange(kind, e.Node)
	case noteLeave:
		if e == nil || !e.State.published() {
			return // a node never accepted, or already gone
		}
		e.suspect = false
		e.State, e.Addr = StateDead, n.addr
		kind := EventFail
		if n.name == m.name || e.goodbye == e.Meta.SystemID {
			e.State, kind = StateLeft, EventLeave // memberlist never finds itself dead
		}
		m.pending.add(Event{Kind: kind, Node: e.Node})
		m.logChange(kind, e.Node)
	case noteSuspect:
		if e != nil && e.State.published() {
			e.suspect = true
		}
	case noteAck:
		if e != nil {
			e.suspect = false
		}
	case noteGoodbye:
		for _, e := range m.nodes {
			if e.Meta.SystemID != n.systemID {
				continue
			}
			e.goodbye = n.systemID
			m.answerGoodbye(e.Name, n.systemID)
			if e.State == StateDead {
				// The leave overtook the goodbye (gossip and the
				// goodbye's TCP stream race): it was a leave after all.
				e.State = StateLeft
				m.pending.add(Event{Kind: EventLeave, Node: e.Node})
				m.logChange(EventLeave, e.Node)
			}
		}
	}
}

// logChange logs a change of another member the way an operator reads a
// cluster's log: a join (or a new life of a name) and a leave at info, a
// member declared dead at warn, unless this node is leaving (Leaving) and
// its peers may be stopping with it. A republished meta is no line. The
// consumer of Events may miss a join that an update overtook (the outbox
// keeps a node's latest); the log does not.
func (m *Membership) logChange(kind EventKind, n Node) {
	if n.Name == m.name {
		return
	}
	switch kind {
	case EventJoin:
		m.log.Info("member joined", "member", n.Name, "gossipAddr", n.Addr)
	case EventLeave:
		m.log.Info("member left", "member", n.Name)
	case EventFail:
		level := slog.LevelWarn
		if m.leaving.Load() {
			level = slog.LevelInfo
		}
		m.log.Log(context.Background(), level, "member failed", "member", n.Name, "gossipAddr", n.Addr)
	}
}

// outbox holds the events the consumer has not taken yet, at most one per
// node: a newer event of a node replaces the older in its place in line.
type outbox struct {
	order  []string
	latest map[string]Event
}

func (o *outbox) add(ev Event) {
	name := ev.Node.Name
	if prev, ok := o.latest[name]; ok {
		if prev.Kind == EventJoin && ev.Kind == EventUpdate {
			ev.Kind = EventJoin // the consumer has not seen the join yet
		}
		o.latest[name] = ev
		return
	}
	if o.latest == nil {
		o.latest = make(map[string]Event)
	}
	o.order = append(o.order, name)
	o.latest[name] = ev
}

func (o *outbox) peek() (Event, bool) {
	if len(o.order) == 0 {
		return Event{}, false
	}
	return o.latest[o.order[0]], true
}

func (o *outbox) pop() {
	delete(o.latest, o.order[0])
	o.order = o.order[1:]
}

// logWriter carries memberlist's log lines ("[LEVEL] memberlist: text")
// into the node's slog logger at their level. memberlist tells no
// delegate when it suspects a node, only its log does: the line of a
// failed probe is turned into a noteSuspect (pinned to memberlist v0.7.0's
// wording; TestCrashIsSuspectedThenDead fails if it changes).
type logWriter struct{ m *Membership }

const suspectLine = "memberlist: Suspect "

var logLevels = [...]struct {
	prefix string
	level  slog.Level
}{{"[DEBUG] ", slog.LevelDebug}, {"[INFO] ", slog.LevelInfo}, {"[WARN] ", slog.LevelWarn}, {"[ERR] ", slog.LevelError}}

func (w *logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, l := range logLevels {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			line, level = rest, l.level
			break
		}
	}
	if rest, ok := strings.CutPrefix(line, suspectLine); ok {
		if name, ok := strings.CutSuffix(rest, " has failed, no acks received"); ok {
			w.m.notes.push(notice{kind: noteSuspect, name: name})
		}
	}
	switch {
	case level > slog.LevelDebug && w.stopping() && strings.Contains(line, closedConnection):
		// memberlist's gossip and probes race its own shutdown: a send on
		// the socket it just closed is part of a clean stop, not an error
		// an operator should be shown. (Contains: a line about a packet
		// ends with its sender, "from=host:port".)
		level = slog.LevelDebug
	case level == slog.LevelWarn && w.m.leaving.Load():
		// A probe that failed or a member that seemed slow, while the
		// others may be stopping too: nothing to act on for a node that
		// is leaving.
		level = slog.LevelDebug
	case level == slog.LevelWarn && line == ownLeaveRefuted+w.m.name+")":
		// A node restarted after a leave hears its own last life's
		// goodbye gossiped back, and says it is alive again: a restart
		// going as planned.
		level = slog.LevelInfo
	}
	if level >= slog.LevelWarn && w.m.warn != nil && strings.Contains(line, fromPeer) {
		// A complaint about a packet or a stream, which anyone who
		// reaches the gossip port can send: bounded, as the peer
		// transport's are (internal/loglimit). memberlist's lines about
		// the cluster's state (a name's conflicting address, a refuted
		// death) name no sender and always go through.
		w.m.warn.Log(level, line)
		return len(p), nil
	}
	w.m.log.Log(context.Background(), level, line)
	return len(p), nil
}

// fromPeer marks memberlist's lines about what a sender sent (its
// LogAddress and LogConn: "from=host:port").
const fromPeer = "from="

// ownLeaveRefuted, then the node's own name and ")", is memberlist's line
// of a node that refutes a death it announced itself (its leave).
const ownLeaveRefuted = "memberlist: Refuting a dead message (from: "

// closedConnection is in memberlist's lines about a send on a socket that
// is closed (net.ErrClosed's text).
const closedConnection = "use of closed network connection"

func (w *logWriter) stopping() bool {
	select {
	case <-w.m.stopping:
		return true
	default:
		return false
	}
}
