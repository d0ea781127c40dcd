// Package clusterview is test infrastructure, not server code: GET
// /ops/v1/cluster (OPERATIONS.md section 7) as its clients outside the
// server read it (the e2e tests, kitbench), and whether a node's view shows
// a settled cluster.
package clusterview

import "fmt"

// View is one node's answer to GET /ops/v1/cluster.
type View struct {
	Node       string `json:"node"`
	Partitions int    `json:"partitions"`
	Members    []Node `json:"members"`
}

// Node is a member as the node sees it.
type Node struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	HTTPAddr string `json:"httpAddr"`
	// Led lists the partitions it leads; Replicated those it holds a
	// replica of (Led included).
	Led        []int `json:"partitionsLed"`
	Replicated []int `json:"partitionsReplicated"`
}

// Unsettled says why v is not yet the view of a settled cluster of want
// members ("" once it is): want members alive, each leading some
// partitions, every partition led by exactly one and replicated on
// min(3, want), the default --replicas.
func (v *View) Unsettled(want int) string {
	return v.UnsettledOn(want, 3)
}

// UnsettledOn is Unsettled for nodes started with --replicas replicas:
// every partition replicated on min(replicas, want).
func (v *View) UnsettledOn(want, replicas int) string {
	alive, led, repl := 0, map[int]int{}, map[int]int{}
	for _, m := range v.Members {
		if m.State != "alive" {
			continue
		}
		alive++
		if len(m.Led) == 0 {
			return fmt.Sprintf("%s (seen by %s) leads nothing", m.Name, v.Node)
		}
		for _, p := range m.Led {
			led[p]++
		}
		for _, p := range m.Replicated {
			repl[p]++
		}
	}
	if alive != want {
		return fmt.Sprintf("%s sees %d alive, want %d", v.Node, alive, want)
	}
	if v.Partitions < 1 {
		return fmt.Sprintf("%s lists no partitions", v.Node)
	}
	for p := range v.Partitions {
		if led[p] != 1 || repl[p] < min(replicas, want) {
			return fmt.Sprintf("%s: partition %d led by %d, on %d replicas", v.Node, p, led[p], repl[p])
		}
	}
	return ""
}
