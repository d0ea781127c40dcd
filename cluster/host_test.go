package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/logbuf"
	"github.com/kitd/kitd/proto/kitpb"
)

// echo answers GetUser with the user id it was asked for after the delay
// named by the id ("slow" waits longer than impatientNode's request
// timeout), and
// answers DeactivateUser with a domain failure. GetWorkspace finds nothing:
// echo answers not found and stops, as kitd's actors do for an entity that
// does not exist.
type echo struct{}

func (echo) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *kitpb.GetUser:
		if m.UserId == "slow" {
			time.Sleep(300 * time.Millisecond)
		}
		ctx.Respond(&kitpb.UserReply{User: &kitpb.User{Id: m.UserId}})
	case *kitpb.DeactivateUser:
		ctx.Respond(&kitpb.Failure{Code: string(kiterr.Conflict), Message: "no", Path: "userId"})
	case *kitpb.GetWorkspace:
		ctx.Respond(&kitpb.Failure{Code: string(kiterr.NotFound), Message: "no such workspace"})
		ctx.Stop(ctx.Self())
	}
}

var (
	nodeOnce sync.Once
	node     *Host
)

func testNode(t *testing.T) *Host {
	t.Helper()
	nodeOnce.Do(func() {
		var err error
		node, err = Start(Config{RequestTimeout: 10 * time.Second},
			&Kind{Name: "echo", New: func(string) actor.Actor { return echo{} }})
		if err != nil {
			t.Fatal(err)
		}
	})
	return node
}

// impatientNode is a node of the test's own whose requests time out
// before "slow" answers. The shared node's timeout is long: a request on a
// busy machine may wait past a short one.
func impatientNode(t *testing.T) *Host {
	t.Helper()
	n, err := Start(Config{RequestTimeout: 150 * time.Millisecond},
		&Kind{Name: "echo", New: func(string) actor.Actor { return echo{} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

func TestRequest(t *testing.T) {
	n, impatient := testNode(t), impatientNode(t)
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a reply comes back typed", func(t *testing.T) {
			r, err := Call[*kitpb.UserReply](n, "echo", "a", &kitpb.GetUser{UserId: "u1"})
			if err != nil || r.User.Id != "u1" {
				t.Fatalf("got %v, %v", r, err)
			}
		}},
		{"a failure comes back as a domain error with its path", func(t *testing.T) {
			_, err := Call[*kitpb.Ok](n, "echo", "a", &kitpb.DeactivateUser{})
			var e *kiterr.Error
			if !errors.As(err, &e) || e.Code != kiterr.Conflict || e.Path != "userId" {
				t.Fatalf("got %v", err)
			}
		}},
		{"a reply of another type is an error, not a panic", func(t *testing.T) {
			if _, err := Call[*kitpb.Ok](n, "echo", "a", &kitpb.GetUser{UserId: "u"}); err == nil {
				t.Fatal("want an error")
			}
		}},
		{"an actor that answers too late times out", func(t *testing.T) {
			_, err := Call[*kitpb.UserReply](impatient, "echo", "b", &kitpb.GetUser{UserId: "slow"})
			if !errors.Is(err, errTimeout) {
				t.Fatalf("got %v, want a timeout", err)
			}
		}},
		{"a late reply is never taken for a later request's", func(t *testing.T) {
			// The slow reply of the previous row arrives while these run.
			deadline := time.Now().Add(500 * time.Millisecond)
			for i := 0; time.Now().Before(deadline); i++ {
				want := "fast-" + string(rune('a'+i%26))
				r, err := Call[*kitpb.UserReply](impatient, "echo", "b", &kitpb.GetUser{UserId: want})
				if err != nil {
					continue // queued behind the slow one: a timeout is fine
				}
				if r.User.Id != want {
					t.Fatalf("asked for %s, got the reply for %s", want, r.User.Id)
				}
			}
		}},
		{"many concurrent requests each get their own reply", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 200)
			for i := range 200 {
				wg.Go(func() {
					want := proto.Clone(&kitpb.GetUser{UserId: string(rune('A' + i%50))}).(*kitpb.GetUser)
					r, err := Call[*kitpb.UserReply](n, "echo", "c"+string(rune('a'+i%7)), want)
					if err == nil && r.User.Id != want.UserId {
						err = errors.New("crossed replies")
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// Activations that stop leave nothing behind: not their PID in the node's
// cache (a PID keeps a pointer to its process, so a stale entry would keep
// the whole stopped actor in memory), not their process.
func TestStoppedActivationsLeaveNothing(t *testing.T) {
	n := testNode(t)
	absent := func(id string) error {
		_, err := Call[*kitpb.Ok](n, "echo", id, &kitpb.GetWorkspace{})
		return err
	}
	const workers, concurrent = 4, 4
	tests := []struct {
		name string
		ids  int // per worker
		ask  func(t *testing.T, id string)
	}{
		{"one request per made-up id", 500, func(t *testing.T, id string) {
			if err := absent(id); kiterr.CodeOf(err) != kiterr.NotFound {
				t.Errorf("got %v, want not found", err)
			}
		}},
		{"concurrent requests for one made-up id", 10, func(t *testing.T, id string) {
			// A request may find the activation stopped by another's answer
			// and look it up again, or be dropped with the stopped actor's
			// mailbox and time out: any outcome will do, but no PID may stay
			// cached.
			var wg sync.WaitGroup
			for range concurrent {
				wg.Go(func() { _ = absent(id) })
			}
			wg.Wait()
		}},
	}
	run := func(t *testing.T, ids int, ask func(t *testing.T, id string)) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range ids {
					ask(t, fmt.Sprintf("absent-%s-%d-%d", t.Name(), w, i))
				}
			})
		}
		wg.Wait()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The pool of reply slots may grow by one per request in flight.
			cached, processes := n.CachedPIDs(), n.LocalProcesses()+workers*concurrent
			run(t, tt.ids, tt.ask)
			// Stopping is asynchronous: wait for the last ones.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if n.CachedPIDs() <= cached && n.LocalProcesses() <= processes {
					break
				}
			}
			if got := n.CachedPIDs(); got > cached {
				t.Errorf("%d more cached PIDs", got-cached)
			}
			if got := n.LocalProcesses(); got > processes {
				t.Errorf("%d more processes", got-processes)
			}
		})
	}
}

// Short-lived processes do not grow the heap for good. protoactor's process
// registry has 32,768 shards that each keep the slots a first process
// allocated in them; short-lived processes (futures, activations of absent
// entities) filled them in until 9.4 MB stayed allocated.
func TestShortLivedProcessesLeaveNoMemory(t *testing.T) {
	n := testNode(t)
	i := 0
	absent := func() {
		i++
		if _, err := Call[*kitpb.WorkspaceReply](n, "echo", fmt.Sprint("gone-", i), &kitpb.GetWorkspace{}); kiterr.CodeOf(err) != kiterr.NotFound {
			t.Fatalf("request for an absent entity: %v", err)
		}
	}
	absent()
	before := liveHeap()
	const rounds = 20_000 // activations that answer "absent" and stop
	for range rounds {
		absent()
	}
	grown := int64(liveHeap()) - int64(before)
	t.Logf("heap %+d bytes", grown)
	if grown > 1<<20 {
		t.Fatalf("%d short-lived activations left %d bytes on the heap", rounds, grown)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the first one may leave finalized objects for the next
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A request that comes while its activation is stopping (one that answered
// "absent" to the request before it) is answered by the next activation,
// never refused as unavailable: the node's map may still name the stopping
// one until it has left the registry.
func TestARequestAfterAStopFindsTheNextActivation(t *testing.T) {
	n := hostingNode(t)       // a timeout a busy machine cannot reach by itself
	const id = "absent-again" // one identity, asked for again and again
	for i := range 2000 {
		_, err := Call[*kitpb.WorkspaceReply](n, "echo", id, &kitpb.GetWorkspace{})
		if kiterr.CodeOf(err) != kiterr.NotFound {
			t.Fatalf("request %d: %v, want not_found", i, err)
		}
	}
}

// panicky panics on every GetUser, as a handler with a bug would.
type panicky struct{}

func (panicky) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*kitpb.GetUser); ok {
		panic("a bug in a handler")
	}
}

// An actor that panics is started again by its supervisor, which says
// nothing of it: the node logs the failure, with the panic's stack, as an
// error.
func TestAPanicInAnActorIsLogged(t *testing.T) {
	out := &logbuf.Buffer{}
	n, err := Start(Config{RequestTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(out, nil))},
		&Kind{Name: "panicky", New: func(string) actor.Actor { return panicky{} }, Opts: []actor.PropsOption{
			actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)), actor.WithMailbox(NewInlineMailbox)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := Call[*kitpb.UserReply](n, "panicky", "p", &kitpb.GetUser{UserId: "u"}); err == nil {
		t.Fatal("a handler that panicked answered")
	}
	eventually.True(t, "an error line for the panic", func() bool {
		s := out.String()
		return strings.Contains(s, `"level":"ERROR","msg":"actor failed; started again"`) &&
			strings.Contains(s, "a bug in a handler") && strings.Contains(s, "panicky.Receive")
	})
}
