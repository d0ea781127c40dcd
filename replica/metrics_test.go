package replica

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/metrics"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
)

// gather is what Collect writes.
func gather(c metrics.Collector) string {
	var reg metrics.Registry
	reg.Register(c)
	return string(reg.Gather())
}

func TestReplicationMetrics(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, Config{Store: s, Hosts: &hosts{hosted: map[partition.ID]bool{}}, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := s.NewBatch()
	b.Set(keyIn(3, "k"), []byte("v"))
	err = r.Log.Commit(b.Repr())
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A commit that fails counts as failed.
	failing := newLog(&fakeGroups{err: multiraft.ErrLeadershipLost}, s, time.Second)
	b = s.NewBatch()
	b.Set(keyIn(3, "k"), nil)
	_ = failing.Commit(b.Repr())
	b.Close()

	got := gather(r.Collect)
	for _, rule := range []struct{ name, series, value string }{
		{"a node alone leads every partition", `kitd_raft_partitions{role="leader"}`, "64"},
		{"and holds a replica of each", `kitd_raft_partitions{role="replica"}`, "64"},
		{"it has a group a partition", `kitd_raft_groups`, "64"},
		{"a node alone forgets no replica", `kitd_raft_replicas_forgotten_total`, "0"},
		{"each leadership that came here is a change", `kitd_raft_leadership_changes_total`, "64"},
		{"a node alone has no follower to lag", `kitd_raft_follower_lag_entries`, "0"},
		{"it is the one voter of each group", `kitd_raft_voters`, "64"},
		{"and there is no learner", `kitd_raft_learners`, "0"},
		{"the commit is in the histogram", `kitd_raft_commit_duration_seconds_count`, "1"},
		{"it did not fail", `kitd_raft_commits_failed_total`, "0"},
		{"no entry went through another node", `kitd_raft_remote_proposals_total`, "0"},
		{"the driver wrote in cycles", `kitd_raft_cycles_total`, "[1-9][0-9]*"},
		{"the commit's cycle synced the raft log", `kitd_raft_syncs_total`, "[1-9][0-9]*"},
		{"a node alone streams no snapshot", `kitd_raft_snapshots_sending`, "0"},
		{"snapshots are counted by outcome: sent", `kitd_raft_snapshots_total{outcome="sent"}`, "0"},
		{"snapshots are counted by outcome: failed", `kitd_raft_snapshots_total{outcome="failed"}`, "0"},
		{"a node alone sends no raft message", `kitd_raft_messages_sent_total`, "0"},
		{"messages not sent are counted by reason: commit only", `kitd_raft_messages_unsent_total{reason="commit_only"}`, "0"},
		{"messages not sent are counted by reason: coalesced", `kitd_raft_messages_unsent_total{reason="coalesced"}`, "0"},
	} {
		t.Run(rule.name, func(t *testing.T) {
			line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(rule.series) + ` ` + rule.value + `$`)
			if !line.MatchString(got) {
				t.Errorf("want %s %s in:\n%s", rule.series, rule.value, got)
			}
		})
	}
	t.Run("a group with nothing to do is counted idle", func(t *testing.T) {
		all := regexp.MustCompile(`(?m)^kitd_raft_groups_idle 64$`)
		eventually.True(t, "every group of a node alone idle", func() bool { return all.MatchString(gather(r.Collect)) })
	})
	t.Run("a commit that fails is counted", func(t *testing.T) {
		if n := failing.stats.failed.Load(); n != 1 {
			t.Errorf("failed = %d, want 1", n)
		}
	})
}
