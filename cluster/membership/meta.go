package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State is where a member stands. A node publishes the first three itself
// (in its Meta); the failure detector adds the other three.
type State uint8

const (
	// StateJoining: the node gossips but does not serve yet (it is
	// catching up on its replicas).
	StateJoining State = iota + 1
	// StateAlive: the node serves.
	StateAlive
	// StateDraining: the node is handing its work over before it leaves.
	StateDraining
	// StateSuspect: this node's probes of it went unanswered; it has a
	// suspicion timeout to refute that.
	StateSuspect
	// StateDead: the failure detector gave up on it (a crash, a pause or
	// a partition: it cannot tell which).
	StateDead
	// StateLeft: it said goodbye (Leave).
	StateLeft
)

var stateNames = [...]string{
	StateJoining:  "joining",
	StateAlive:    "alive",
	StateDraining: "draining",
	StateSuspect:  "suspect",
	StateDead:     "dead",
	StateLeft:     "left",
}

// String returns the name OPERATIONS.md section 7 uses for the state.
func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// published reports whether a node may publish s in its own Meta.
func (s State) published() bool {
	return s == StateJoining || s == StateAlive || s == StateDraining
}

// Partitions is a set of partitions, bit p for partition p (P = 64, see
// docs/cluster.md).
type Partitions uint64

// Has reports whether p is in the set.
func (ps Partitions) Has(p int) bool { return p >= 0 && p < 64 && ps&(1<<uint(p)) != 0 }

// With returns the set with p added.
func (ps Partitions) With(p int) Partitions { return ps | 1<<uint(p&63) }

// Without returns the set with p removed.
func (ps Partitions) Without(p int) Partitions { return ps &^ (1 << uint(p&63)) }

// Meta is what a node tells every other node about itself. It rides in
// memberlist's node metadata (at most 512 bytes, republished whole on
// every change), so it holds only what routing needs.
type Meta struct {
	// HTTPAddr is the node's HTTP listener (--listen), PeerAddr its
	// node-to-node listener (--peer-listen), both host:port.
	HTTPAddr string
	PeerAddr string
	// SystemID is fresh on every start (Start sets it; UpdateMeta cannot
	// change it): a restarted node is told apart from its previous life,
	// which protoactor-go requires of an actor-system id.
	SystemID string
	State    State
	// Led are the partitions this node leads, Replicated the ones it holds
	// a replica of (led included).
	Led        Partitions
	Replicated Partitions
	// RaftID is the node's id in its raft groups (multiraft.NodeID):
	// kept across restarts, unlike SystemID. 0: the node runs no groups.
	RaftID uint64
}

// Limits of the encoding; with them the largest Meta takes
// maxEncodedMeta bytes, within memberlist's MetaMaxSize (512).
const (
	maxAddrLen     = 200 // a DNS name (253 at most) rarely comes close
	systemIDLen    = 32  // hex of 16 random bytes
	metaVersion    = 1
	maxEncodedMeta = 1 + 1 + 1 + systemIDLen + 8 + 8 + 2*(2+maxAddrLen) + 8
)

// Errors of the Meta encoding.
var (
	// ErrMetaInvalid: a Meta this node was asked to publish breaks a limit.
	ErrMetaInvalid = errors.New("membership: invalid meta")
	// ErrMetaMalformed: a peer's metadata does not decode.
	ErrMetaMalformed = errors.New("membership: malformed meta")
)

// problem says which rule m breaks, or "" when it keeps them all.
func (m Meta) problem() string {
	switch {
	case len(m.HTTPAddr) > maxAddrLen:
		return fmt.Sprintf("HTTPAddr is longer than %d bytes", maxAddrLen)
	case len(m.PeerAddr) > maxAddrLen:
		return fmt.Sprintf("PeerAddr is longer than %d bytes", maxAddrLen)
	case !isSystemID(m.SystemID):
		return fmt.Sprintf("SystemID is not %d lowercase hex digits", systemIDLen)
	case !m.State.published():
		return "State is not joining, alive or draining"
	case m.Led&^m.Replicated != 0:
		return "Led holds partitions Replicated does not"
	}
	return ""
}

func isSystemID(s string) bool {
	if len(s) != systemIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// encode lays m out as
//
//	version(1) state(1) len(1) systemID led(8) replicated(8) len(2) httpAddr len(2) peerAddr raftID(8)
//
// with little-endian integers. A later version may only append fields, so
// that a node reads the prefix it knows of a newer peer's meta during a
// rolling upgrade.
func (m Meta) encode() ([]byte, error) {
	if p := m.problem(); p != "" {
		return nil, fmt.Errorf("%w: %s", ErrMetaInvalid, p)
	}
	return m.appendTo(make([]byte, 0, 1+1+1+len(m.SystemID)+16+4+len(m.HTTPAddr)+len(m.PeerAddr)+8)), nil
}

// appendTo appends m's encoding, rules unchecked (tests build bad metas
// with it).
func (m Meta) appendTo(b []byte) []byte {
	b = append(b, metaVersion, byte(m.State), byte(len(m.SystemID)))
	b = append(b, m.SystemID...)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Led))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Replicated))
	for _, s := range [...]string{m.HTTPAddr, m.PeerAddr} {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return binary.LittleEndian.AppendUint64(b, m.RaftID)
}

// decodeMeta reads a peer's meta. It trusts nothing: every length is
// checked against what is left, and a result that breaks a rule of
// problem is refused, so a peer cannot make this node route by a state
// it could not publish itself.
func decodeMeta(b []byte) (Meta, error) {
	var m Meta
	r := metaReader{b: b}
	version := r.byte()
	if r.err == nil && version < metaVersion {
		return Meta{}, fmt.Errorf("%w: version %d", ErrMetaMalformed, version)
	}
	m.State = State(r.byte())
	m.SystemID = r.string(int(r.byte()))
	m.Led = Partitions(r.uint64())
	m.Replicated = Partitions(r.uint64())
	m.HTTPAddr = r.string(int(r.uint16()))
	m.PeerAddr = r.string(int(r.uint16()))
	m.RaftID = r.uint64()
	if r.err != nil {
		return Meta{}, r.err
	}
	if version == metaVersion && len(r.b) != 0 {
		return Meta{}, fmt.Errorf("%w: %d bytes after the last field", ErrMetaMalformed, len(r.b))
	}
	if p := m.problem(); p != "" {
		return Meta{}, fmt.Errorf("%w: %s", ErrMetaMalformed, p)
	}
	return m, nil
}

// metaReader reads fields off a buffer; the first short read sets err and
// makes every later read return zero, so decodeMeta checks once.
type metaReader struct {
	b   []byte
	err error
}

func (r *metaReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%w: truncated", ErrMetaMalformed)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *metaReader) byte() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *metaReader) uint16() uint16 {
	if p := r.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *metaReader) uint64() uint64 {
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *metaReader) string(n int) string { return string(r.take(n)) }
