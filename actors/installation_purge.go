package actors

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// An uninstalled installation deletes what it accumulated, which nothing
// reads again: a reinstall is a new installation, and every request to
// this one is refused from the uninstall on (tokens 401, webhooks and
// responseUrls 404). The sweeps of installation_grants_sweep.go and
// installation_bottokens_sweep.go run on writes it no longer makes.
//
// Once the uninstall is committed and answered, the installation sends
// itself purgeNext, and each takes one batch: up to writeSweepMax keys under
// installationRecordsPrefix from where the last stopped, deleting
//   - each grant index entry and bot token entry, with its credential;
//   - each UserGrant and responseUrl record;
//   - each run with its open-run entry, but a run still running: its
//     runner reports its outcome, which the developer log shows, and
//     finishRun then deletes it and asks for another pass, which deletes
//     the marker (an activation, interruptRuns);
//   - each WebhookRef, with its locator and, asked of its webhook actor
//     first (ForgetWebhook), the webhook's record.
//
// Requests interleave with the batches. What lies in other partitions
// (credentials, locators, webhook records) goes in a step before the
// entries it is found by (docs/cluster.md "Global indexes"): a kill
// between leaves the entries, which the next pass deletes again.
//
// The uninstall writes purgeKey in its batch; the pass that leaves nothing
// deletes it. A kill mid-purge leaves it to the installation's next
// activation, which starts a pass (every activation of an uninstalled one
// does: one seek when nothing is left), and the node that starts to lead
// the partition wakes every installation with a marker
// (WakeDeliveriesIn). The installation record itself stays, so that its
// id answers as an uninstalled one's, with its locator, its delivery
// records (their own retention) and its developer log entries.

// purgeNext is the installation's message to itself: the next batch of
// its purge.
type purgeNext struct{}

// purgeState is where the purge of an uninstalled installation stands.
type purgeState struct {
	due    bool   // a batch is to be sent for
	queued bool   // a purgeNext is in the mailbox: keep the actor active
	from   []byte // the first key of the next batch; nil: a new pass
	kept   bool   // the pass so far kept a running run
	again  bool   // a run ended since the pass began: another follows it
}

// runEnded is finishRun's: the run it deleted may be one the pass under
// way kept, which then leaves the marker; another pass deletes it.
func (s *purgeState) runEnded() { s.due, s.again = true, true }

// purgeAfter sends purgeNext when a batch is due. Receive calls it after
// every message, so a batch follows the answer of what asked for it.
func (a *installationActor) purgeAfter(ctx actorContext) {
	if !a.purge.due || a.purge.queued || a.life.loadErr != nil {
		return
	}
	a.purge.due, a.purge.queued = false, true
	ctx.Send(ctx.Self(), purgeNext{})
}

// purgeBatch deletes the next batch; another is due when it reached its
// bound. A failure is logged and leaves the rest to the next activation.
func (a *installationActor) purgeBatch() {
	a.purge.queued = false
	if a.inst == nil || !a.inst.Uninstalled {
		return
	}
	more, err := a.purgeSome()
	if err != nil {
		a.purge = purgeState{}
		if a.env.Logger != nil {
			a.env.Logger.Warn("purge of an uninstalled installation stopped; its next activation goes on", "installation", a.id, "err", err)
		}
		return
	}
	a.purge.due = more || a.purge.again
}

func (a *installationActor) purgeSome() (more bool, err error) {
	prefix := installationRecordsPrefix(a.id)
	lower := prefix
	if a.purge.from != nil {
		lower = a.purge.from
	} else {
		a.purge.kept, a.purge.again = false, false
	}
	type entry struct{ k, v []byte }
	var entries []entry
	last, more, err := sweepScan(a.env.Store, lower, persistence.PrefixEnd(prefix), a.env.writeSweepMax(), func(k, v []byte) error {
		entries = append(entries, entry{bytes.Clone(k), bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("purge %s: %w", a.id, err)
	}
	elsewhere, own := a.env.newBatch(), a.env.newBatch()
	for _, e := range entries {
		if err := a.purgeEntry(elsewhere, own, e.k, e.v); err != nil {
			closeAll([]batch{elsewhere, own})
			return false, err
		}
	}
	if !more && !a.purge.kept {
		marked, err := a.env.Store.Has(purgeKey(a.id))
		if err != nil {
			closeAll([]batch{elsewhere, own})
			return false, fmt.Errorf("purge %s: %w", a.id, err)
		}
		if marked {
			own.Delete(purgeKey(a.id))
		}
	}
	if err := a.env.commitInSteps(elsewhere, own); err != nil {
		return false, fmt.Errorf("purge %s: %w", a.id, err)
	}
	a.purge.from = nil
	if more {
		a.purge.from = keyAfter(last)
	}
	return more, nil
}

// purgeEntry adds the deletion of the record at k (value v) to own, and
// of what it finds in other partitions to elsewhere; a running run is
// kept, and a key of no kind named here too.
func (a *installationActor) purgeEntry(elsewhere, own batch, k, v []byte) error {
	switch KeyKind(k) {
	case "grantCredentialKey":
		elsewhere.Delete(credentialKey(k[len(k)-32:]))
	case "botTokenKey":
		elsewhere.Delete(credentialKey(v))
	case "runKey":
		run := &kitpb.Run{}
		if err := proto.Unmarshal(v, run); err != nil {
			return fmt.Errorf("purge %s: run: %w", a.id, err)
		}
		if run.Status == RunRunning {
			a.purge.kept = true
			return nil
		}
		own.Delete(openRunKey(a.id, run.Id))
	case "openRunKey":
		run := &kitpb.Run{}
		found, err := load(a.env.Store, runKey(a.id, string(k[len(openRunsPrefix(a.id)):])), run)
		if err != nil {
			return err
		}
		if found && run.Status == RunRunning {
			return nil // kept with its run
		}
	case "webhookRefKey":
		id := string(k[len(webhookRefsPrefix(a.id)):])
		// Its record first: the locator and the ref are what a retry
		// finds it by.
		if _, err := cluster.Call[*kitpb.Ok](a.env.Host, KindWebhook, id, &kitpb.ForgetWebhook{}); err != nil && kiterr.CodeOf(err) != kiterr.NotFound {
			return fmt.Errorf("purge %s: forget webhook %s: %w", a.id, id, err)
		}
		elsewhere.Delete(locatorKey(id))
	case "userGrantKey", "responseURLKey":
	default:
		return nil
	}
	own.Delete(k)
	return nil
}
