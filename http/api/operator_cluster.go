package api

import (
	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/internal/partition"
)

// The cluster view of OPERATIONS.md section 7. A single node is the whole
// cluster: the one member, alive, hosting every partition.

type clusterView struct {
	Node       string        `json:"node"`
	Partitions int           `json:"partitions"`
	Members    []clusterNode `json:"members"`
}

type clusterNode struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	HTTPAddr string `json:"httpAddr"`
	// Led lists the partitions the member leads, whose activations it
	// hosts; Replicated the ones it holds a replica of (Led included).
	Led        []partition.ID `json:"partitionsLed"`
	Replicated []partition.ID `json:"partitionsReplicated"`
	// Activations counts this node's activations (0 for the others: a
	// node knows only its own).
	Activations int `json:"activations"`
}

func (s *Server) opCluster(call) (reply, error) {
	if s.cluster == nil {
		led := s.node.HostedPartitions()
		if led == nil {
			led = []partition.ID{}
		}
		return jsonReply(fasthttp.StatusOK, clusterView{
			Node: s.nodeName, Partitions: partition.Count,
			Members: []clusterNode{{Name: s.nodeName, State: "alive", HTTPAddr: s.httpAddr, Led: led, Replicated: led,
				Activations: s.node.ActivationCount()}},
		})
	}
	v := clusterView{Node: s.nodeName, Partitions: partition.Count}
	for _, m := range s.cluster.Nodes() {
		cm := clusterNode{Name: m.Name, State: m.State, HTTPAddr: m.HTTPAddr, Led: m.Led, Replicated: m.Replicated}
		if m.Name == s.nodeName {
			cm.Activations = s.node.ActivationCount()
		}
		v.Members = append(v.Members, cm)
	}
	return jsonReply(fasthttp.StatusOK, v)
}
