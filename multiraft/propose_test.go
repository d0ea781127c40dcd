package multiraft_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/multiraft"
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
			multiraft.ErrProposalDropped,
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
				if !eventually.Holds(eventually.Within, func() bool { return c.net.Held(followers[0]) != held }) {
					return errors.New("the first change never reached the log")
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
			multiraft.ErrProposalDropped,
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
			multiraft.ErrStopped,
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

// A node that holds the only voter of a group leads it once it campaigns,
// without waiting for an election timeout (no tick here).
func TestCampaignLeadsAtOnce(t *testing.T) {
	c := newCluster(t, []uint64{1}, nil)
	c.bootstrap(2, []uint64{1})
	m := c.nodes[1]
	if err := m.node.Campaign(1); err != nil {
		t.Fatal(err)
	}
	if err := m.node.Flush(); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[multiraft.GroupID]uint64{0: 0, 1: 1} {
		if st, err := m.node.Status(g); err != nil || st.Leader != want {
			t.Errorf("group %d: leader %d (%v), want %d", g, st.Leader, err, want)
		}
	}
	if err := m.node.Campaign(7); !errors.Is(err, multiraft.ErrUnknownGroup) {
		t.Errorf("campaign for a group the node lacks: %v, want ErrUnknownGroup", err)
	}
}

// ProposeAll returns once every entry is applied, each in its own group;
// one entry its group refuses fails the call, and the error names it.
func TestProposeAll(t *testing.T) {
	c := newCluster(t, []uint64{1}, nil)
	c.bootstrap(3, []uint64{1})
	m := c.nodes[1]
	for g := range multiraft.GroupID(2) {
		if err := m.node.Campaign(g); err != nil {
			t.Fatal(err)
		}
	}
	c.awaitLeads(1, 0, 1)
	ctx := context.Background()
	props := []multiraft.Proposal{{Group: 0, Data: []byte("a")}, {Group: 1, Data: []byte("b")}}
	if err := m.node.ProposeAll(ctx, props); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[multiraft.GroupID]string{0: "a", 1: "b"} {
		recs, err := m.kv.Records(g)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range recs {
			found = found || v == want
		}
		if !found {
			t.Errorf("group %d holds %v, want %q applied", g, recs, want)
		}
	}
	// Group 2 has no leader: it never campaigned.
	err := m.node.ProposeAll(ctx, []multiraft.Proposal{{Group: 0, Data: []byte("c")}, {Group: 2, Data: []byte("d")}})
	var nl *multiraft.NotLeaderError
	if !errors.As(err, &nl) || nl.Group != 2 {
		t.Errorf("err = %v, want NotLeaderError for group 2", err)
	}
	// The error says which entry failed: a caller may send it again.
	var pe *multiraft.ProposalsError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || pe.Errs[0] != nil || !errors.As(pe.Errs[1], &nl) {
		t.Errorf("err = %#v, want the second entry's refusal only", err)
	}
}
