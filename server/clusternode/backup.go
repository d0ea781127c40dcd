package clusternode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster/peer"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/persistence/backup"
	"github.com/kitd/kitd/proto/kitpb"
)

// A backup of a cluster (GET /ops/v1/backup through any member) holds
// every partition as one replica of it had applied at least everything
// its group committed before the call: the partitions this node holds,
// each caught up with its leader (replica.CatchUp: nothing to wait for
// where this node leads under its lease), from one snapshot of this
// node's store taken after the last catch-up; every other partition from
// a node that holds it, its leader first, which catches up the same way
// and answers pages of one snapshot of its own (BackupRead). No raft
// state travels: a restored directory starts as a node alone, or as the
// founder of a new cluster, with the records as its groups' state.
// Partitions are not cut at one instant together (a cluster has no such
// instant): a write the call overlaps may be in some partitions and not
// others, as after a crash of the writer between its groups' commits.

// backupReadIdle is how long a snapshot a BackupRead took waits for the
// next page before it is released.
const backupReadIdle = time.Minute

// Backup writes a backup of the whole cluster to out.
func (m *Node) Backup(ctx context.Context, out io.Writer, h backup.Header, files []backup.File) error {
	r := m.rep
	var caught [partition.Count]bool
	for p := range partition.ID(partition.Count) {
		if !r.Holds(p) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
		caught[p] = r.CatchUp(cctx, p) == nil
		cancel()
	}
	snap := m.cfg.Store.NewSnapshot()
	defer snap.Close()

	h.Source = backup.SourceCluster
	w, err := backup.NewWriter(out, h)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := w.File(f.Name, f.Data); err != nil {
			return err
		}
	}
	// This node's own records that travel (the data layout), then the
	// partitions, in key order.
	first, _ := partition.KeyRange(0)
	_, last := partition.KeyRange(partition.Count - 1)
	if err := copyRecords(w, snap, nil, first); err != nil {
		return err
	}
	id := m.reqs.next()
	for p := range partition.ID(partition.Count) {
		// A replica removed since its catch-up may be forgotten, its
		// records deleted: the snapshot holds them only if it is held
		// still.
		if caught[p] && r.Holds(p) {
			lower, upper := partition.KeyRange(p)
			err = copyRecords(w, snap, lower, upper)
		} else {
			err = m.backupRemote(ctx, w, id, p)
		}
		if err != nil {
			return fmt.Errorf("backup of partition %d: %w", p, err)
		}
	}
	if err := copyRecords(w, snap, last, nil); err != nil {
		return err
	}
	return w.Close()
}

// copyRecords writes the records of [lower, upper) that are not this
// node's alone.
func copyRecords(w *backup.Writer, snap *persistence.Snapshot, lower, upper []byte) error {
	var werr error
	err := snap.Scan(lower, upper, false, func(k, v []byte) bool {
		if multiraft.NodeLocal(k) {
			return true
		}
		werr = w.Record(k, v)
		return werr == nil
	})
	return errors.Join(err, werr)
}

// backupRemote writes partition p's records, read a page at a time from
// one node that holds it. The first page is asked again, of every holder
// in turn, until one answers or catchUpTimeout passed: a leader elected or
// handed a partition a moment ago holds no lease yet, and its followers
// cannot catch up. The later pages must come from the same snapshot, so
// a failure there fails the backup.
func (m *Node) backupRemote(ctx context.Context, w *backup.Writer, id string, p partition.ID) error {
	q := &kitpb.BackupRead{Backup: id, Partition: uint32(p)}
	addr, recs, err := m.firstBackupPage(ctx, q)
	if err != nil {
		return err
	}
	for {
		for j, k := range recs.Keys {
			if kp, ok := partition.OfKey(k); !ok || kp != p {
				return fmt.Errorf("%s answered a record outside partition %d", addr, p)
			}
			if err := w.Record(k, recs.Values[j]); err != nil {
				return err
			}
		}
		if !recs.More || len(recs.Keys) == 0 {
			return nil
		}
		q.After = recs.Keys[len(recs.Keys)-1]
		if recs, err = m.backupPage(ctx, addr, q); err != nil {
			return err
		}
	}
}

// firstBackupPage asks q's first page of the holders of its partition
// until one answers.
func (m *Node) firstBackupPage(ctx context.Context, q *kitpb.BackupRead) (string, *kitpb.Records, error) {
	deadline := time.Now().Add(catchUpTimeout)
	wait := 20 * time.Millisecond
	last := errors.New("no node holds it")
	for {
		for i, addr := range m.holders(partition.ID(q.Partition), readAttempts) {
			recs, err := m.backupPage(ctx, addr, q)
			if err == nil {
				return addr, recs, nil
			}
			if errors.Is(err, peer.ErrRefused) {
				return "", nil, err
			}
			last = fmt.Errorf("holder %d: %w", i+1, err)
		}
		if time.Now().Add(wait).After(deadline) {
			return "", nil, last
		}
		select {
		case <-ctx.Done():
			return "", nil, errors.Join(last, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (m *Node) backupPage(ctx context.Context, addr string, q *kitpb.BackupRead) (*kitpb.Records, error) {
	cctx, cancel := context.WithTimeout(ctx, catchUpTimeout+readTimeout)
	defer cancel()
	res, err := m.pt.Call(cctx, addr, q, m.reqs.next())
	if err != nil {
		return nil, err
	}
	recs, ok := res.(*kitpb.Records)
	if !ok || len(recs.Keys) != len(recs.Values) {
		return nil, fmt.Errorf("member: BackupRead answered %T", res)
	}
	return recs, nil
}

// backupReads are the snapshots this node took for other members'
// backups, by backup id and partition.
type backupReads struct {
	mu   sync.Mutex
	open map[backupReadKey]*backupRead
}

type backupReadKey struct {
	backup string
	p      partition.ID
}

type backupRead struct {
	snap *persistence.Snapshot
	used time.Time
	busy bool
}

// serveBackupRead answers a page of a BackupRead.
func (m *Node) serveBackupRead(ctx context.Context, from string, q *kitpb.BackupRead) (*kitpb.Records, error) {
	p := partition.ID(q.GetPartition())
	if int(p) >= partition.Count || q.GetBackup() == "" {
		return nil, &peer.RefusedError{Reason: fmt.Sprintf("BackupRead from %s: no partition %d or no backup id", from, p)}
	}
	return m.backups.page(backupReadKey{q.GetBackup(), p}, q.GetAfter(), func() (*persistence.Snapshot, error) {
		r := m.started.Load()
		if r == nil || !r.Holds(p) {
			return nil, kiterr.New(kiterr.Unavailable, fmt.Sprintf("partition %d has no replica here", p))
		}
		if err := r.CatchUp(ctx, p); err != nil {
			m.log.Warn("backup read: no catch-up", "partition", p, "from", from, "err", err)
			return nil, fmt.Errorf("%w: %w", err, kiterr.New(kiterr.Unavailable, "this node's replica could not catch up"))
		}
		snap := m.cfg.Store.NewSnapshot()
		if !r.Holds(p) { // removed and perhaps forgotten meanwhile
			snap.Close()
			return nil, kiterr.New(kiterr.Unavailable, fmt.Sprintf("partition %d has no replica here", p))
		}
		return snap, nil
	})
}

// page answers one page of the read key after the key after: the first
// (no after) from a snapshot take makes, kept until the last page, the
// others from the snapshot kept.
func (b *backupReads) page(key backupReadKey, after []byte, take func() (*persistence.Snapshot, error)) (*kitpb.Records, error) {
	b.mu.Lock()
	b.expire(time.Now())
	open := b.open[key]
	if open != nil && open.busy {
		b.mu.Unlock()
		return nil, kiterr.New(kiterr.Unavailable, "a page of this backup read is being answered")
	}
	if open != nil {
		open.busy = true
	}
	b.mu.Unlock()

	if open == nil {
		if len(after) > 0 {
			return nil, kiterr.New(kiterr.Unavailable, fmt.Sprintf("the backup read of partition %d ended here: start again", key.p))
		}
		snap, err := take()
		if err != nil {
			return nil, err
		}
		open = &backupRead{snap: snap, busy: true}
		b.mu.Lock()
		if old := b.open[key]; old != nil && !old.busy {
			old.snap.Close()
		}
		if b.open == nil {
			b.open = map[backupReadKey]*backupRead{}
		}
		b.open[key] = open
		b.mu.Unlock()
	}

	out, err := backupPage(open.snap, key.p, after)
	b.mu.Lock()
	defer b.mu.Unlock()
	open.busy, open.used = false, time.Now()
	if current := b.open[key] == open; err != nil || !out.More || !current {
		if current {
			delete(b.open, key)
		}
		open.snap.Close()
		return out, err
	}
	// A snapshot keeps Pebble from deleting the tables it sees: one whose
	// reader went away is released even if no other read comes.
	time.AfterFunc(backupReadIdle+time.Second, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.expire(time.Now())
	})
	return out, nil
}

// backupPage reads the records of p after the key after from snap: at
// most actors.ReadPageBytes of them, and at least one.
func backupPage(snap *persistence.Snapshot, p partition.ID, after []byte) (*kitpb.Records, error) {
	lower, upper := partition.KeyRange(p)
	if len(after) > 0 {
		if bytes.Compare(after, lower) < 0 || bytes.Compare(after, upper) >= 0 {
			return nil, &peer.RefusedError{Reason: "BackupRead: after is outside its partition"}
		}
		lower = append(bytes.Clone(after), 0)
	}
	out := &kitpb.Records{}
	err := snap.Scan(lower, upper, false, actors.PageOf(out, 0))
	return out, err
}

// expire releases the snapshots no page was asked of for backupReadIdle
// (the asking node gave up or failed). Under b.mu.
func (b *backupReads) expire(now time.Time) {
	for k, o := range b.open {
		if !o.busy && now.Sub(o.used) > backupReadIdle {
			o.snap.Close()
			delete(b.open, k)
		}
	}
}

// close releases every snapshot when the member stops.
func (b *backupReads) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, o := range b.open {
		if !o.busy {
			o.snap.Close()
		}
		delete(b.open, k)
	}
}
