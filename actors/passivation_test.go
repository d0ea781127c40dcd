package actors_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

// Requests for ids that do not exist must not leave actors behind: a client
// could otherwise fill the node's memory with made-up UUIDs.
func TestAbsentEntitiesLeaveNoActor(t *testing.T) {
	n := shared
	probes := []struct {
		name string
		kind string
		msg  func() *kitpb.GetConversation
	}{
		{"an unknown conversation", actors.KindConversation, func() *kitpb.GetConversation {
			return &kitpb.GetConversation{Caller: &kitpb.Caller{Kind: actors.CallerOperator}}
		}},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			// Warm up: the first requests create reply slots and the like.
			for range 10 {
				_, err := try[*kitpb.ConversationReply](n, p.kind, ids.New(), p.msg())
				wantCode(t, err, kiterr.NotFound)
			}
			before := n.node.LocalProcesses()
			for range 300 {
				_, err := try[*kitpb.ConversationReply](n, p.kind, ids.New(), p.msg())
				wantCode(t, err, kiterr.NotFound)
			}
			eventually.Holds(eventually.Within, func() bool { return n.node.LocalProcesses() <= before+20 }) // stopping is asynchronous
			if after := n.node.LocalProcesses(); after > before+20 {
				t.Fatalf("300 requests for unknown ids left %d more processes", after-before)
			}
		})
	}
	for _, tc := range []struct {
		name string
		kind string
		req  func() (string, error)
	}{
		{"an unknown workspace", actors.KindWorkspace, func() (string, error) {
			_, err := try[*kitpb.WorkspaceReply](n, actors.KindWorkspace, ids.New(), &kitpb.GetWorkspace{})
			return "", err
		}},
		{"an unknown installation", actors.KindInstallation, func() (string, error) {
			_, err := try[*kitpb.InstallationReply](n, actors.KindInstallation, ids.New(), &kitpb.GetInstallation{})
			return "", err
		}},
		{"an unknown kit", actors.KindKit, func() (string, error) {
			_, err := try[*kitpb.KitReply](n, actors.KindKit, ids.New(), &kitpb.GetKit{})
			return "", err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.node.LocalProcesses()
			for range 200 {
				_, err := tc.req()
				wantCode(t, err, kiterr.NotFound)
			}
			eventually.Holds(eventually.Within, func() bool { return n.node.LocalProcesses() <= before+20 }) // stopping is asynchronous
			if after := n.node.LocalProcesses(); after > before+20 {
				t.Fatalf("200 requests for unknown ids left %d more processes", after-before)
			}
		})
	}
}

// Idle actors passivate after one to two IdleTimeouts; an actor that keeps
// being asked stays.
func TestIdleActorsPassivate(t *testing.T) {
	n := ownNode(t)
	// Long enough that a loaded machine's late wake-ups (asked every
	// idle/4) never look idle.
	const idle = time.Second
	n.env.IdleTimeout = idle
	w := n.workspace(t, 1) // activates the workspace actor
	get := func() {
		t.Helper()
		_, err := try[*kitpb.WorkspaceReply](n, actors.KindWorkspace, w.id, &kitpb.GetWorkspace{})
		noErr(t, err)
	}
	get()
	active := n.node.LocalProcesses()

	t.Run("an actor asked more often than IdleTimeout stays", func(t *testing.T) {
		for range 12 { // 12 × idle/4: three IdleTimeouts
			time.Sleep(idle / 4)
			if got := n.node.LocalProcesses(); got < active {
				t.Fatalf("%d processes, want %d: the busy workspace actor passivated", got, active)
			}
			get()
		}
	})
	t.Run("an actor nobody asks passivates within two IdleTimeouts", func(t *testing.T) {
		// The rule's deadline, plus scheduling slack on a loaded machine.
		if !eventually.Holds(2*idle+time.Second, func() bool { return n.node.LocalProcesses() < active }) {
			t.Fatalf("still %d processes after %v idle", n.node.LocalProcesses(), 2*idle)
		}
		get() // and it activates again from storage
	})
}

// A request for a made-up id costs nothing once answered: no actor, no
// process, no cached PID, no heap stays behind, however many come. These
// are the requests the front end makes for ids a client chose: a webhook
// post (no credentials), kit.access's client check (no credentials), and a
// read of a conversation (any caller).
func TestMadeUpIdsLeaveNothing(t *testing.T) {
	n := ownNode(t)
	probes := []struct {
		name string
		ask  func() error
	}{
		{"a post to a made-up webhook", func() error {
			_, err := try[*kitpb.HookPostReply](n, actors.KindWebhook, ids.New(), &kitpb.HookPost{
				InstallationId: ids.New(), SecretHash: actors.HookSecretHash("made-up"), Text: "hello", PostId: ids.Nonce(),
			})
			return err
		}},
		{"a client check of a made-up Kit", func() error {
			_, err := try[*kitpb.Ok](n, actors.KindKit, ids.New(), &kitpb.CheckClientSecret{SecretHash: make([]byte, 32)})
			return err
		}},
		{"a read of a made-up conversation", func() error {
			_, err := try[*kitpb.ConversationReply](n, actors.KindConversation, ids.New(), &kitpb.GetConversation{
				Caller: &kitpb.Caller{Kind: actors.CallerOperator},
			})
			return err
		}},
	}
	const (
		workers  = 8 // the front end asks from many goroutines at once
		requests = 50_000
		perReq   = 50 // bytes of heap a request may leave; 1,700 did before
	)
	send := func(t *testing.T, total int, ask func() error) {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range total / workers {
					if err := ask(); kiterr.CodeOf(err) != kiterr.NotFound {
						t.Errorf("got %v, want not found", err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			send(t, 1000, p.ask) // warm up: reply slots, caches of the store
			settled := func(processes, cached int) bool {
				return n.node.LocalProcesses() <= processes && n.node.CachedPIDs() <= cached
			}
			eventually.Holds(eventually.Within, func() bool { return settled(n.node.LocalProcesses(), n.node.CachedPIDs()) })
			// The pool of reply slots may grow by one per worker.
			processes, cached, heap := n.node.LocalProcesses()+workers, n.node.CachedPIDs(), liveHeap()
			send(t, requests, p.ask)
			eventually.Holds(eventually.Within, func() bool { return settled(processes, cached) }) // the last actors stop asynchronously
			if got := n.node.LocalProcesses(); got > processes {
				t.Errorf("%d requests left %d more processes than reply slots", requests, got-processes)
			}
			if got := n.node.CachedPIDs(); got > cached {
				t.Errorf("%d requests left %d more cached PIDs", requests, got-cached)
			}
			grown := int64(liveHeap()) - int64(heap)
			t.Logf("heap %+d bytes (%.1f a request)", grown, float64(grown)/requests)
			if grown > requests*perReq {
				t.Errorf("%d requests left %d bytes on the heap (%d a request)", requests, grown, grown/requests)
			}
		})
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the first may leave finalized objects for the second
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
