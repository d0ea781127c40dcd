package multiraft

import (
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kitd/kitd/persistence"
)

// GroupID names a raft group: one partition of kitd's key space.
type GroupID uint16

// StateMachine is the replicated state of every group of a node. The
// driver calls Apply and Restore on its own goroutine, one at a time; it
// calls Snapshot on another goroutine, concurrently with Apply.
type StateMachine interface {
	// Apply writes the records of one committed entry of group g into b.
	// data is the proposal's bytes as given to Propose; index is its
	// position in g's log. b is committed with the applied index after the
	// cycle's other applies, and is not synced on its own: after a crash,
	// the entries after the last durable applied index are applied again,
	// over state that may already hold them. Apply must therefore be
	// idempotent (write the same records for the same entry, e.g. keys
	// derived from the entry). An error stops the node: it must mean that
	// the node cannot go on (every replica applies the same entries, so a
	// rejection by the rules belongs in the records, not in an error).
	Apply(g GroupID, index uint64, data []byte, b *persistence.Batch) error

	// Snapshot writes a consistent view of group g's state to w (one
	// persistence.Store.Scan of its range is one: a Pebble iterator reads
	// one point in time). It runs outside the driver, so the state may be
	// newer than the snapshot's index; the receiver applies the entries
	// after that index again, which Apply's idempotence allows.
	Snapshot(g GroupID, w io.Writer) error

	// Restore replaces group g's state with the one Snapshot wrote,
	// writing into b (delete g's range, then set the records). b also
	// holds the group's new raft state and is committed synced. An empty
	// r is the empty state: Node.Forget clears a group's state with it.
	Restore(g GroupID, r io.Reader, b *persistence.Batch) error
}

// Message is one raft message of one group, as the Transport carries it.
type Message struct {
	Group GroupID
	Msg   pb.Message
}

// Transport moves messages between nodes. Raft tolerates loss,
// duplication and reordering: a message that cannot be sent is dropped and
// raft sends again.
type Transport interface {
	// Send hands the messages of one cycle to the network. It must not
	// block on the network (the driver of every group waits for it); it may
	// drop. The messages are the transport's to keep, but not the slice:
	// the driver reuses it once Send returns.
	Send(msgs []Message)

	// SendSnapshot streams m (a MsgSnap) and the group's state read from
	// state to m.Msg.To, in bounded chunks, and returns once the receiver
	// has it (nil) or when it failed. The receiving node is given the
	// stream through Node.ReceiveSnapshot. It runs on its own goroutine.
	SendSnapshot(m Message, state io.Reader) error
}

// LeaderChange says who leads a group of this node now (Leader 0: nobody
// known, e.g. during an election).
type LeaderChange struct {
	Group  GroupID
	Leader uint64
	Term   uint64
}

// Status is a group's raft state as this node sees it.
type Status struct {
	Group      GroupID
	ID         uint64 // this node
	Leader     uint64 // 0 when unknown
	Term       uint64
	Commit     uint64
	Applied    uint64
	Voters     []uint64
	Learners   []uint64
	LeaseValid bool
	// Match is, on the leader, the last log index known to be on each
	// replica (itself included): a learner whose Match reached Commit has
	// caught up. Empty on a follower.
	Match map[uint64]uint64
	// Active is, on the leader, each replica that answered it within the
	// last election timeout (raft's RecentActive under CheckQuorum): a
	// replica cut off from it is not, whatever its Match says.
	Active map[uint64]bool
}

// NotLeaderError is returned by a call that needs the group's leader when
// this node is not it. Leader names the node this node follows (0 when it
// knows none): the caller sends its request there.
type NotLeaderError struct {
	Group  GroupID
	Leader uint64
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("replication: group %d: not the leader (leader %d, term %d)", e.Group, e.Leader, e.Term)
}

// ProposalsError is ProposeAll's error: Errs[i] is the outcome of its
// props[i] (nil: applied), each with Propose's meaning, so that a caller
// can tell the entries that entered no log from those whose outcome is
// unknown.
type ProposalsError struct {
	Errs []error
}

func (e *ProposalsError) Error() string {
	var failed int
	var first error
	for _, err := range e.Errs {
		if err != nil {
			if failed == 0 {
				first = err
			}
			failed++
		}
	}
	return fmt.Sprintf("replication: %d of %d entries not applied; first: %v", failed, len(e.Errs), first)
}

// Unwrap gives the entries' errors to errors.Is and errors.As.
func (e *ProposalsError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

var (
	// ErrLeadershipLost: this node stopped leading the group after the
	// proposal entered its log and before it was applied here. The outcome is
	// unknown: the entry may still be committed by the next leader. A caller
	// that retries must carry an id that makes the retry a no-op if the first
	// attempt did commit.
	ErrLeadershipLost = errors.New("replication: leadership lost before the proposal was applied")

	// ErrProposalDropped: raft refused the proposal (a leadership transfer is
	// under way, or too many uncommitted entries). Nothing was appended: the
	// caller may retry.
	ErrProposalDropped = errors.New("replication: proposal dropped")

	// ErrStopped: the node is closed or its driver stopped on an error. A
	// proposal waiting when it stopped has an unknown outcome.
	ErrStopped = errors.New("replication: node stopped")

	// ErrUnknownGroup: this node holds no replica of the group.
	ErrUnknownGroup = errors.New("replication: unknown group")

	// ErrGroupExists: Bootstrap or Join of a group this node already holds.
	ErrGroupExists = errors.New("replication: group exists")

	// ErrGroupSpoke: Forget of a group that stepped a message since the
	// caller read Heard, or that this node leads: it may be a member.
	ErrGroupSpoke = errors.New("replication: the group spoke to this node since")
)
