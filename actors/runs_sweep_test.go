package actors_test

import (
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// TestFinishedRunsAreSwept: every tool call keeps its run, with a result
// of up to 64 KiB. A finished run is kept actors.RunRetention (7 days,
// the developer log's) after its end; the installation deletes it then,
// in the batch of a later run it queues, and GET /runs/{id} answers it
// 404, as an unknown run. A run still queued or running is never swept.
func TestFinishedRunsAreSwept(t *testing.T) {
	// Each row makes a run and answers the status it must keep while kept.
	type maker func(t *testing.T, n *testNode, e *toolEnv) (id, status string)
	queue := func(t *testing.T, n *testNode, e *toolEnv) string {
		t.Helper()
		return ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, e.inst.Id, e.invoke(e.alice, e.conv, "secret")).Run.Id
	}
	start := func(t *testing.T, n *testNode, e *toolEnv, id string) {
		t.Helper()
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, e.inst.Id, &kitpb.StartRun{RunId: id})
	}
	finish := func(t *testing.T, n *testNode, e *toolEnv, id string, ok bool) {
		t.Helper()
		m := &kitpb.FinishRun{RunId: id, Succeeded: ok, Result: []byte(`{"a":1}`)}
		if !ok {
			m = &kitpb.FinishRun{RunId: id, ErrorCode: "http_error", HttpStatus: 500}
		}
		ask[*kitpb.RunReply](t, n, actors.KindInstallation, e.inst.Id, m)
	}
	finished := func(ok bool) maker {
		return func(t *testing.T, n *testNode, e *toolEnv) (string, string) {
			id := queue(t, n, e)
			start(t, n, e, id)
			finish(t, n, e, id, ok)
			if ok {
				return id, actors.RunSucceeded
			}
			return id, actors.RunFailed
		}
	}
	tests := []struct {
		name  string
		run   maker
		age   time.Duration // from the run's end to the later run queued
		swept bool
	}{
		{"a run succeeded 7 days ago is swept", finished(true), actors.RunRetention, true},
		{"a run failed 7 days ago is swept", finished(false), actors.RunRetention, true},
		{"a run finished within 7 days is kept", finished(true), actors.RunRetention - time.Second, false},
		{"a run queued long before it finished is kept 7 days from its end", func(t *testing.T, n *testNode, e *toolEnv) (string, string) {
			id := queue(t, n, e)
			start(t, n, e, id)
			n.clk.Advance(3 * 24 * time.Hour)
			finish(t, n, e, id, true)
			return id, actors.RunSucceeded
		}, actors.RunRetention - time.Second, false},
		{"a queued run is never swept", func(t *testing.T, n *testNode, e *toolEnv) (string, string) {
			return queue(t, n, e), actors.RunQueued
		}, 2 * actors.RunRetention, false},
		{"a running run is never swept", func(t *testing.T, n *testNode, e *toolEnv) (string, string) {
			id := queue(t, n, e)
			start(t, n, e, id)
			return id, actors.RunRunning
		}, 2 * actors.RunRetention, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ownNode(t)
			e := n.toolEnv(t)
			id, status := tt.run(t, n, e)
			n.clk.Advance(tt.age)
			queue(t, n, e) // a later run sweeps

			r, err := try[*kitpb.RunReply](n, actors.KindInstallation, e.inst.Id, &kitpb.GetRun{RunId: id, UserId: e.alice})
			found, hasErr := n.store.Has(actors.RunKey(e.inst.Id, id))
			noErr(t, hasErr)
			if tt.swept {
				wantCode(t, err, kiterr.NotFound)
				if found {
					t.Fatal("the run's record is kept")
				}
				return
			}
			noErr(t, err)
			if r.Run.Status != status {
				t.Fatalf("run %v; want it %s", r.Run, status)
			}
		})
	}

	t.Run("a sweep reads at most writeSweepMax runs, and the next run queued goes on", func(t *testing.T) {
		n := ownNode(t)
		actors.SetWriteSweepMax(n.env, 2)
		e := n.toolEnv(t)
		var old []string
		for range 5 {
			id, _ := finished(true)(t, n, e)
			old = append(old, id)
		}
		n.clk.Advance(actors.RunRetention)
		for i, left := range []int{3, 1, 0} {
			queue(t, n, e)
			kept := 0
			for _, id := range old {
				found, err := n.store.Has(actors.RunKey(e.inst.Id, id))
				noErr(t, err)
				if found {
					kept++
				}
			}
			if kept != left {
				t.Fatalf("after run %d queued: %d old runs kept; want %d", i+1, kept, left)
			}
			n.clk.Advance(time.Second)
		}
	})
}

// TestARunPastItsRetentionIsNotShown: docs/api.md "Users, runs and the
// installation" answers a finished run 404 once its 7 days are over. The
// sweep rides on a later run queued, paced and bounded, so a run not yet
// swept (no run queued since) is judged at the read, as every expiry.
func TestARunPastItsRetentionIsNotShown(t *testing.T) {
	tests := []struct {
		name  string
		age   time.Duration // from the run's end to the read
		shown bool
	}{
		{"a run read 1 s before its 7 days is shown", actors.RunRetention - time.Second, true},
		{"a run read at its 7 days is 404, though not swept", actors.RunRetention, false},
		{"a run read a day past its 7 days is 404, though not swept", actors.RunRetention + 24*time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ownNode(t)
			e := n.toolEnv(t)
			id := ask[*kitpb.ToolCallReply](t, n, actors.KindInstallation, e.inst.Id, e.invoke(e.alice, e.conv, "secret")).Run.Id
			ask[*kitpb.RunReply](t, n, actors.KindInstallation, e.inst.Id, &kitpb.StartRun{RunId: id})
			ask[*kitpb.RunReply](t, n, actors.KindInstallation, e.inst.Id, &kitpb.FinishRun{RunId: id, Succeeded: true, Result: []byte(`{"a":1}`)})
			n.clk.Advance(tt.age)

			_, err := try[*kitpb.RunReply](n, actors.KindInstallation, e.inst.Id, &kitpb.GetRun{RunId: id, UserId: e.alice})
			if tt.shown {
				noErr(t, err)
				return
			}
			wantCode(t, err, kiterr.NotFound)
		})
	}
}
