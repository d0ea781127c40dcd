package clusternode

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/replica"
)

// nothingHosted is replica.Hosts for a replica whose partitions nobody
// serves.
type nothingHosted struct{}

func (nothingHosted) Host(partition.ID)    {}
func (nothingHosted) Release(partition.ID) {}

// A node whose groups run serves none of its partitions until it is
// opened: until then its actors would commit outside the groups.
func TestANodeServesNoPartitionUntilOpened(t *testing.T) {
	s, err := persistence.Open("db", persistence.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := replica.Start(ctx, replica.Config{Store: s, Hosts: nothingHosted{}, TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	m := &Node{}
	m.started.Store(rep)
	const p = partition.ID(3)
	if !rep.LeaseValid(p) {
		t.Fatal("the replica alone holds no lease: nothing to gate")
	}
	if m.leaseValid(p) {
		t.Error("a node serves a partition before it is opened")
	}
	m.Open()
	if !m.leaseValid(p) {
		t.Error("an opened node does not serve the partition it leads")
	}
}
