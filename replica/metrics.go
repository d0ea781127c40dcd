package replica

import (
	"math/bits"
	"time"

	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
)

// logStats are Log's counters: every actor commit goes through them, so
// they are atomic counters and one histogram, no lock.
type logStats struct {
	duration *metrics.Histogram // Commit, from call to applied here (or failed)
	failed   metrics.Counter    // commits answered 503: not confirmed
	remote   metrics.Counter    // entries proposed through another node's leader
	refused  metrics.Counter    // of those, sends the leader asked refused, to be sent again
}

func newLogStats() logStats {
	return logStats{duration: metrics.NewHistogram(metrics.LatencyBuckets)}
}

// observe records one Commit that started at start.
func (s *logStats) observe(start time.Time, err error) {
	s.duration.ObserveDuration(time.Since(start))
	if err != nil {
		s.failed.Inc()
	}
}

// Collect writes the replication metrics of this node (a
// metrics.Collector): what it leads and holds, how its groups keep up, and
// what the actors' commits cost. Read on a scrape only.
func (r *Replica) Collect(w *metrics.Writer) {
	led, replicated := r.Partitions()
	w.Family("kitd_raft_partitions", "Partitions this node leads, and holds a replica of.", metrics.TypeGauge)
	w.Uint("kitd_raft_partitions", metrics.Label("role", "leader"), uint64(bits.OnesCount64(led)))
	w.Uint("kitd_raft_partitions", metrics.Label("role", "replica"), uint64(bits.OnesCount64(replicated)))

	w.Gauge("kitd_raft_groups", "Groups this node has a replica of, held or not: one its group removed counts until it is forgotten.", uint64(len(r.node.Groups())))
	w.Counter("kitd_raft_replicas_forgotten_total", "Replicas this node deleted, with their records, after their group's leader said the group had removed it.", r.forgotten.Load())

	w.Counter("kitd_reads_unheld_total", "Reads of a partition this node holds no replica of that did not go to a node holding it: a bug, logged.", r.unheld.count.Load())

	w.Counter("kitd_raft_leadership_changes_total", "Times a partition's leadership came to or left this node.", r.changes.Load())

	lag, voters, learners := r.followers(led)
	w.Gauge("kitd_raft_follower_lag_entries", "Of the groups this node leads, the most entries a voter lacks of the commit index.", lag)
	w.Gauge("kitd_raft_voters", "Voters of the groups this node leads, summed: 3 a group while every replica is in place.", voters)
	w.Gauge("kitd_raft_learners", "Learners (replicas being filled before they vote) in the groups this node leads.", learners)

	st := r.node.Stats()
	w.Counter("kitd_raft_cycles_total", "Driver cycles that wrote groups' entries and state (one synced batch each).", st.Cycles)
	w.Counter("kitd_raft_syncs_total", "Syncs of the raft log (and of the store, for a restored snapshot) those cycles asked for: the fdatasyncs replication costs.", st.Syncs)
	w.Counter("kitd_raft_groups_written_total", "Sum over cycles of the groups each wrote: divided by cycles, how many groups share an fsync.", st.GroupsWritten)
	w.Gauge("kitd_raft_snapshots_sending", "Snapshots this node is streaming to followers that lag past its log (a new replica fills this way).", uint64(max(st.SnapshotsSending, 0)))
	w.Family("kitd_raft_snapshots_total", "Snapshots this node streamed to a follower, by outcome: a failed one is sent again.", metrics.TypeCounter)
	w.Uint("kitd_raft_snapshots_total", metrics.Label("outcome", "sent"), st.SnapshotsSent)
	w.Uint("kitd_raft_snapshots_total", metrics.Label("outcome", "failed"), st.SnapshotsFailed)
	w.Counter("kitd_raft_messages_sent_total", "Raft messages this node sent its peers (appends, answers, heartbeats, votes), snapshots aside.", st.MessagesSent)
	w.Family("kitd_raft_messages_unsent_total", "Raft messages this node did not send, by reason: an append that only told a follower the commit index, or one said in another message of the same cycle.", metrics.TypeCounter)
	w.Uint("kitd_raft_messages_unsent_total", metrics.Label("reason", "commit_only"), st.UnsentCommitOnly)
	w.Uint("kitd_raft_messages_unsent_total", metrics.Label("reason", "coalesced"), st.UnsentCoalesced)
	w.Counter("kitd_raft_forced_votes_refused_total", "Votes of a transfer's campaign this node refused because its leader's last heartbeat named no such transfer: a transfer given up on and acted on late (docs/cluster.md \"Transfers and the lease\").", st.ForcedVotesRefused)
	w.Gauge("kitd_raft_groups_idle", "Groups this node leads that had nothing to do at the last tick, and tick (and heartbeat) only every few ticks.", uint64(max(st.IdleGroups, 0)))

	s := &r.Log.stats
	w.Family("kitd_raft_commit_duration_seconds", "Actor commits through raft, from the proposal to applied on this node.", metrics.TypeHistogram)
	w.Histogram("kitd_raft_commit_duration_seconds", "", s.duration.Snapshot())
	w.Counter("kitd_raft_commits_failed_total", "Actor commits answered 503 unavailable: not confirmed by a quorum in time.", s.failed.Load())
	w.Counter("kitd_raft_remote_proposals_total", "Entries this node proposed through another node's leader (an index entry of a partition led elsewhere).", s.remote.Load())
	w.Counter("kitd_raft_remote_proposals_refused_total", "Of those, sends that the node asked refused with nothing appended (it no longer led, or leadership was moving): the entry went again.", s.refused.Load())
}

// followers is, over the groups in led, the largest lag of a voter behind
// the commit index, and the numbers of voters and learners.
func (r *Replica) followers(led uint64) (lag, voters, learners uint64) {
	for p := range partition.Count {
		if led&(1<<uint(p)) == 0 {
			continue
		}
		st, err := r.node.Status(multiraft.GroupID(p))
		if err != nil || st.Leader != r.id {
			continue
		}
		voters += uint64(len(st.Voters))
		learners += uint64(len(st.Learners))
		for _, v := range st.Voters {
			if m, ok := st.Match[v]; ok && m < st.Commit && st.Commit-m > lag {
				lag = st.Commit - m
			}
		}
	}
	return lag, voters, learners
}
