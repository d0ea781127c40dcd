package replication_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kitd/kitd/replication"
)

// The answers of Propose when the entry cannot be placed or waited for.
func TestProposalErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(c *cluster, lead *member, followers []uint64) error
		want error
	}{
		{
			"a proposal during a leadership transfer is dropped",
			func(c *cluster, lead *member, followers []uint64) error {
				c.net.Hold(followers[0]) // the transfer cannot finish
				if err := lead.node.TransferLeadership(0, followers[0]); err != nil {
					return err
				}
				_, err := lead.node.Propose(context.Background(), 0, []byte("x"))
				return err
			},
			replication.ErrProposalDropped,
		},
		{
			"a configuration change while another is pending is dropped",
			func(c *cluster, lead *member, followers []uint64) error {
				for _, f := range followers {
					c.net.Hold(f) // the first change cannot commit
				}
				held := c.net.Held(followers[0])
				first := make(chan error, 1)
				go func() { first <- lead.node.AddLearner(context.Background(), 0, 4) }()
				for deadline := time.Now().Add(5 * time.Second); c.net.Held(followers[0]) == held; {
					if time.Now().After(deadline) {
						return errors.New("the first change never reached the log")
					}
					time.Sleep(time.Millisecond) // polling the leader's driver
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := lead.node.AddLearner(ctx, 0, 5)
				for _, f := range followers {
					c.net.Release(f)
				}
				if ferr := <-first; ferr != nil {
					return ferr
				}
				return err
			},
			replication.ErrProposalDropped,
		},
		{
			"a proposal whose context ends returns the context's error",
			func(c *cluster, lead *member, followers []uint64) error {
				for _, f := range followers {
					c.net.Hold(f)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				defer cancel()
				_, err := lead.node.Propose(ctx, 0, []byte("x"))
				return err
			},
			context.DeadlineExceeded,
		},
		{
			"a proposal to a closed node is refused",
			func(c *cluster, lead *member, followers []uint64) error {
				n := lead.node
				c.stop(lead.id)
				_, err := n.Propose(context.Background(), 0, []byte("x"))
				return err
			},
			replication.ErrStopped,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, []uint64{1, 2, 3}, nil)
			c.bootstrap(1, []uint64{1, 2, 3})
			c.elect(1)
			lead := c.nodes[c.leader(0)]
			var followers []uint64
			for _, id := range []uint64{1, 2, 3} {
				if id != lead.id {
					followers = append(followers, id)
				}
			}
			if err := tc.run(c, lead, followers); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
