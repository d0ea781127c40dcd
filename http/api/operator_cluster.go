package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/partition"
)

// The cluster view of OPERATIONS.md section 7. A single node is the whole
// cluster: the one member, alive, hosting every partition.

type clusterView struct {
	Node       string          `json:"node"`
	Partitions int             `json:"partitions"`
	Members    []clusterMember `json:"members"`
}

type clusterMember struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	HTTPAddr string `json:"httpAddr"`
	// Led lists the partitions whose activations the member hosts;
	// Activations counts them.
	Led         []partition.ID `json:"partitionsLed"`
	Activations int            `json:"activations"`
}

func (s *Server) opCluster(call) (reply, error) {
	led := s.node.HostedPartitions()
	if led == nil {
		led = []partition.ID{}
	}
	return jsonReply(fasthttp.StatusOK, clusterView{
		Node: s.nodeName, Partitions: partition.Count,
		Members: []clusterMember{{Name: s.nodeName, State: "alive", HTTPAddr: s.httpAddr, Led: led, Activations: s.node.ActivationCount()}},
	})
}
