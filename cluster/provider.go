package cluster

import (
	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// singleMember is the membership provider of a one-node cluster: the member
// list is this node alone. A gossip provider (memberlist) replaces it
// without changing any actor.
type singleMember struct {
	c *pcluster.Cluster
}

func (p *singleMember) StartMember(c *pcluster.Cluster) error {
	p.c = c
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return err
	}
	c.MemberList.UpdateClusterTopology([]*pcluster.Member{{
		Id:    c.ActorSystem.ID,
		Host:  host,
		Port:  int32(port),
		Kinds: c.GetClusterKinds(),
	}})
	return nil
}

func (p *singleMember) StartClient(c *pcluster.Cluster) error {
	p.c = c
	return nil
}

func (p *singleMember) Shutdown(bool) error { return nil }
