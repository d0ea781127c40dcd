package actors

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// barrier is a ReadBarrier whose catch-ups wait until want of them are
// under way at once, or until 5 s after the first began, which it reports.
type barrier struct {
	want   int
	failOn partition.ID // a catch-up of this partition fails; noPartition: none

	mu       sync.Mutex
	asked    map[partition.ID]bool
	together chan struct{}
	deadline chan struct{} // closed 5 s after the first catch-up began
	apart    bool          // a catch-up waited in vain for the others
}

func (b *barrier) CatchUp(p partition.ID) error {
	b.mu.Lock()
	b.asked[p] = true
	if len(b.asked) == b.want {
		close(b.together)
	}
	if b.deadline == nil {
		deadline := make(chan struct{})
		time.AfterFunc(5*time.Second, func() { close(deadline) })
		b.deadline = deadline
	}
	deadline := b.deadline
	b.mu.Unlock()
	select {
	case <-b.together:
	case <-deadline:
		b.mu.Lock()
		b.apart = true
		b.mu.Unlock()
	}
	if p == b.failOn {
		return errors.New("no leader")
	}
	return nil
}

// noPartition is no partition's ID.
const noPartition = partition.ID(partition.Count)

// evenReplicas holds a replica of the even partitions alone.
type evenReplicas struct{}

func (evenReplicas) Holds(p partition.ID) bool { return p%2 == 0 }
func (evenReplicas) ReadRecords(*kitpb.ReadRecords) (*kitpb.Records, error) {
	return &kitpb.Records{}, nil
}

// A read of every partition catches up the replicas held here all at once,
// then reads them from the store; the others are read remotely.
func TestEveryPartition(t *testing.T) {
	store := &persistence.Store{}
	for _, tc := range []struct {
		name        string
		reads       *barrier
		remote      RemoteReader
		wantCaught  int  // catch-ups asked
		wantFromAll bool // every partition read from the store
		fails       bool
	}{
		{"a node alone reads every partition from its store, catching up nothing", nil, nil, 0, true, false},
		{"a node of a cluster that holds every replica catches all of them up at once", &barrier{want: partition.Count, failOn: noPartition}, nil, partition.Count, true, false},
		{"the replicas held are caught up at once, the others read remotely", &barrier{want: partition.Count / 2, failOn: noPartition}, evenReplicas{}, partition.Count / 2, false, false},
		{"a catch-up that fails fails the read", &barrier{want: partition.Count, failOn: 5}, nil, partition.Count, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &Env{Store: store, Remote: tc.remote}
			if tc.reads != nil {
				tc.reads.asked, tc.reads.together = map[partition.ID]bool{}, make(chan struct{})
				env.Reads = tc.reads
			}
			readers, err := env.everyPartition()
			if (err != nil) != tc.fails {
				t.Fatalf("err = %v, want failed %v", err, tc.fails)
			}
			if tc.reads != nil {
				if len(tc.reads.asked) != tc.wantCaught || tc.reads.apart {
					t.Fatalf("%d catch-ups, apart %v; want %d, all at once", len(tc.reads.asked), tc.reads.apart, tc.wantCaught)
				}
			}
			if tc.fails {
				return
			}
			for p, r := range readers {
				held := tc.remote == nil || tc.remote.Holds(partition.ID(p))
				if fromStore := r == PartitionReader(store); fromStore != held || tc.wantFromAll && !fromStore {
					t.Errorf("partition %d read from the store %v, want %v", p, fromStore, held)
				}
				if held && tc.reads != nil && !tc.reads.asked[partition.ID(p)] {
					t.Errorf("partition %d held here but not caught up", p)
				}
			}
		})
	}
}
