package cluster

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// hostingNode is a node of its own: Release stops activations that other
// tests of the package would ask, and requests racing a stop wait out dead
// letters longer than the shared node's short timeout.
func hostingNode(t *testing.T) *Host {
	t.Helper()
	n, err := Start(Config{RequestTimeout: 10 * time.Second}, &Kind{Name: "echo", New: func(string) actor.Actor { return echo{} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// identitiesOf returns n identities of partition p.
func identitiesOf(p partition.ID, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if id := fmt.Sprint("hosting-", p, "-", i); partition.Of(id) == p {
			out = append(out, id)
		}
	}
	return out
}

// A node hosts the activations of the partitions it leads only: Release
// stops every activation of a partition and refuses new ones until Host.
func TestReleaseStopsAPartitionsActivations(t *testing.T) {
	n := hostingNode(t)
	const p, other = partition.ID(5), partition.ID(6)
	ids := identitiesOf(p, 20)
	elsewhere := identitiesOf(other, 1)[0]
	for _, id := range append(ids, elsewhere) {
		if _, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Activations(p); got != len(ids) {
		t.Fatalf("%d activations in partition %d, want %d", got, p, len(ids))
	}
	processes := n.LocalProcesses()

	n.Release(p)
	t.Cleanup(func() { n.Host(p) })
	for _, tc := range []struct {
		rule string
		run  func(t *testing.T)
	}{
		{"no activation of a released partition is left", func(t *testing.T) {
			if got := n.Activations(p); got != 0 {
				t.Fatalf("%d activations left", got)
			}
			if got := n.LocalProcesses(); got > processes-len(ids) {
				t.Fatalf("%d processes, want at most %d", got, processes-len(ids))
			}
		}},
		{"a request for an identity of a released partition is refused as not hosted", func(t *testing.T) {
			_, err := Call[*kitpb.UserReply](n, "echo", ids[0], &kitpb.GetUser{UserId: ids[0]})
			if !errors.Is(err, ErrNotHosted) {
				t.Fatalf("err = %v, want ErrNotHosted", err)
			}
			if got := n.Activations(p); got != 0 {
				t.Fatalf("the refused request left %d activations", got)
			}
		}},
		{"another partition is served as before", func(t *testing.T) {
			if _, err := Call[*kitpb.UserReply](n, "echo", elsewhere, &kitpb.GetUser{UserId: elsewhere}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a partition hosted again activates its identities again", func(t *testing.T) {
			n.Host(p)
			if _, err := Call[*kitpb.UserReply](n, "echo", ids[0], &kitpb.GetUser{UserId: ids[0]}); err != nil {
				t.Fatal(err)
			}
			if got := n.Activations(p); got != 1 {
				t.Fatalf("%d activations, want 1", got)
			}
		}},
	} {
		t.Run(tc.rule, tc.run)
	}
}

// Requests racing a Release never leave an activation behind it: from
// Release's return, every request for the partition is refused.
func TestNoActivationOutlivesARelease(t *testing.T) {
	n := hostingNode(t)
	const p = partition.ID(9)
	ids := identitiesOf(p, 50)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[i%len(ids)]
				_, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id})
				if err != nil && !errors.Is(err, ErrNotHosted) {
					t.Errorf("request: %v", err)
					return
				}
			}
		}()
	}
	for round := range 100 {
		for deadline := time.Now().Add(10 * time.Second); n.Activations(p) == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the writers activate nothing", round)
			}
			runtime.Gosched()
		}
		n.Release(p)
		if got := n.Activations(p); got != 0 {
			t.Fatalf("round %d: %d activations right after Release", round, got)
		}
		for _, id := range ids[:3] {
			if _, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id}); !errors.Is(err, ErrNotHosted) {
				t.Fatalf("round %d: a request after Release: %v", round, err)
			}
		}
		n.Host(p)
	}
	close(stop)
	wg.Wait()
}

// An identity has one activation at most: requests that find none at the
// same moment share the one the first of them starts.
func TestConcurrentRequestsShareOneActivation(t *testing.T) {
	var built sync.Map // identity → number of actors built
	n, err := Start(Config{RequestTimeout: 10 * time.Second}, &Kind{Name: "echo", New: func(id string) actor.Actor {
		c, _ := built.LoadOrStore(id, new(atomic.Int32))
		c.(*atomic.Int32).Add(1)
		return echo{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	const identities, callers = 50, 8
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range identities {
				id := fmt.Sprint("shared-", (i+c)%identities)
				if _, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	built.Range(func(id, c any) bool {
		if got := c.(*atomic.Int32).Load(); got != 1 {
			t.Errorf("%s activated %d times", id, got)
		}
		return true
	})
}

// A node whose lead of a partition has no lease answers none of its
// requests, not even from an activation it holds: another node may lead
// the partition by now. When the lease is back, the activation answers.
func TestNoAnswerWithoutALease(t *testing.T) {
	n := hostingNode(t)
	id := identitiesOf(3, 1)[0]
	if _, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id}); err != nil {
		t.Fatal(err)
	}
	var valid atomic.Bool
	n.SetLease(func(p partition.ID) bool { return p != 3 || valid.Load() })
	for _, who := range []string{id, identitiesOf(3, 2)[1]} {
		if _, err := Call[*kitpb.UserReply](n, "echo", who, &kitpb.GetUser{UserId: who}); !errors.Is(err, ErrNotHosted) {
			t.Errorf("request without a lease: %v, want ErrNotHosted", err)
		}
	}
	if _, err := Call[*kitpb.UserReply](n, "echo", identitiesOf(4, 1)[0], &kitpb.GetUser{UserId: "x"}); err != nil {
		t.Errorf("a partition with its lease: %v", err)
	}
	valid.Store(true)
	if _, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id}); err != nil {
		t.Errorf("the lease back: %v", err)
	}
}

// An activation that finishes starting after its partition was released
// is stopped, and the request that started it is refused, not hung: the
// stop runs inline (the inline mailbox) and the stopped activation
// forgets itself, which takes the lock the refusal held.
func TestActivationStartedAcrossARelease(t *testing.T) {
	const p = partition.ID(5)
	id := identitiesOf(p, 1)[0]
	building, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n, err := Start(Config{RequestTimeout: 10 * time.Second}, &Kind{Name: "echo", New: func(string) actor.Actor {
		once.Do(func() {
			close(building)
			<-release
		})
		return echo{}
	}, Opts: []actor.PropsOption{actor.WithDispatcher(actor.NewSynchronizedDispatcher(10)), actor.WithMailbox(NewInlineMailbox)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	done := make(chan error, 1)
	go func() {
		_, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id})
		done <- err
	}()
	<-building
	n.Release(p)
	close(release)
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotHosted) {
			t.Fatalf("got %v, want ErrNotHosted", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request hung: the activation's stop waited on the lock its refusal held")
	}
}

// stopCounter counts the activations it starts and the Stopping they
// handle, slowly, as an activation writing what it holds back does. An
// activation whose Started finds startedBlock waits on it first, as one
// loading its state does.
type stopCounter struct {
	started, stopped *atomic.Int32
	loading          chan struct{} // closed when a Started begins; nil: none
	startedBlock     chan struct{}
}

func (s stopCounter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.started.Add(1)
		if s.startedBlock != nil {
			close(s.loading)
			<-s.startedBlock
		}
	case *actor.Stopping:
		time.Sleep(20 * time.Millisecond)
		s.stopped.Add(1)
	case *kitpb.GetUser:
		ctx.Respond(&kitpb.UserReply{User: &kitpb.User{Id: m.UserId}})
	}
}

// Stop returns once every activation has handled its Stopping, and none
// starts after it: the store closes after Stop, and an activation writes
// what it holds back as it stops, or reads its state as it starts.
func TestStop(t *testing.T) {
	type counts struct{ started, stopped atomic.Int32 }
	start := func(t *testing.T, c *counts, loading, block chan struct{}) *Host {
		n, err := Start(Config{RequestTimeout: 10 * time.Second}, &Kind{Name: "echo", New: func(id string) actor.Actor {
			if id == "loading" {
				return stopCounter{&c.started, &c.stopped, loading, block}
			}
			return stopCounter{started: &c.started, stopped: &c.stopped}
		}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ask := func(n *Host, id string) error {
		_, err := Call[*kitpb.UserReply](n, "echo", id, &kitpb.GetUser{UserId: id})
		return err
	}
	tests := []struct {
		name string
		run  func(t *testing.T, n *Host, c *counts, loading, block chan struct{})
	}{
		{"Stop returns once every activation has stopped", func(t *testing.T, n *Host, c *counts, _, _ chan struct{}) {
			const activations = 5
			for i := range activations {
				if err := ask(n, fmt.Sprint("stopping-", i)); err != nil {
					t.Fatal(err)
				}
			}
			n.Stop()
			if got := c.stopped.Load(); got != activations {
				t.Fatalf("%d of %d activations had stopped when Stop returned", got, activations)
			}
		}},
		{"an activation starting as Stop begins has stopped when Stop returns", func(t *testing.T, n *Host, c *counts, loading, block chan struct{}) {
			go ask(n, "loading")
			<-loading
			stopped := make(chan struct{})
			go func() {
				n.Stop()
				close(stopped)
			}()
			// Stop has taken the starting activation (it waits for it)
			// once it no longer hosts anything.
			eventually.True(t, "Stop to begin", func() bool { return n.stopped.Load() })
			close(block)
			<-stopped
			if got := c.stopped.Load(); got != 1 {
				t.Fatalf("%d activations had stopped when Stop returned, want the starting one", got)
			}
		}},
		{"no activation starts after Stop, and hosting again is refused", func(t *testing.T, n *Host, c *counts, _, _ chan struct{}) {
			n.Stop()
			n.Host(partition.Of("after"))
			if err := ask(n, "after"); err == nil {
				t.Fatal("a request after Stop was answered")
			}
			if got := c.started.Load(); got != 0 {
				t.Fatalf("%d activations started after Stop", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c counts
			loading, block := make(chan struct{}), make(chan struct{})
			n := start(t, &c, loading, block)
			tt.run(t, n, &c, loading, block)
		})
	}
}

// selfStopper stops itself as it starts while fail says so, as an actor
// that cannot read its state does, and counts its activations.
type selfStopper struct {
	started *atomic.Int32
	fail    *atomic.Bool
}

func (s selfStopper) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		s.started.Add(1)
		if s.fail.Load() {
			ctx.Stop(ctx.Self())
		}
	case *kitpb.GetUser:
		ctx.Respond(&kitpb.UserReply{User: &kitpb.User{Id: "ok"}})
	}
}

// An activation that stops itself as it starts (it could not load its
// state) leaves no entry behind: the next message activates the identity
// again. A stale entry sent every later message to the stopped process,
// where it was dropped, and the identity never ran again.
func TestAnActivationStoppedAsItStartsIsNotKept(t *testing.T) {
	id := identitiesOf(partition.ID(5), 1)[0]
	var started atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	n, err := Start(Config{RequestTimeout: 2 * time.Second}, &Kind{Name: "stopper", New: func(string) actor.Actor {
		return selfStopper{started: &started, fail: &fail}
	}, Opts: []actor.PropsOption{actor.WithDispatcher(actor.NewSynchronizedDispatcher(10)), actor.WithMailbox(NewInlineMailbox)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	for range 20 {
		n.Send("stopper", id, &kitpb.GetUser{})
	}
	fail.Store(false)
	eventually.NoError(t, "the identity answers once it can start", func() error {
		_, err := Call[*kitpb.UserReply](n, "stopper", id, &kitpb.GetUser{})
		return err
	})
}
