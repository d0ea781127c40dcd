package clusterview

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// view builds a cluster view as node "n1" sees it; members are
// "name:state:led:replicated" with partitions as ranges "a-b".
func view(partitions int, members ...string) *View {
	v := &View{Node: "n1", Partitions: partitions}
	span := func(r string) []int {
		var out []int
		if r == "" {
			return nil
		}
		var a, b int
		if _, err := fmt.Sscanf(r, "%d-%d", &a, &b); err != nil {
			panic(err)
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
		return out
	}
	for _, m := range members {
		f := strings.Split(m, ":")
		v.Members = append(v.Members, Node{Name: f[0], State: f[1], Led: span(f[2]), Replicated: span(f[3])})
	}
	return v
}

func TestUnsettled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v        *View
		want     int
		replicas int // 0: Unsettled, the default --replicas
		settled  bool
	}{
		{"every member alive, leading a share, every partition on three replicas",
			view(6, "n1:alive:0-1:0-5", "n2:alive:2-3:0-5", "n3:alive:4-5:0-5"), 3, 0, true},
		{"a member still joining is not alive",
			view(6, "n1:alive:0-2:0-5", "n2:alive:3-5:0-5", "n3:joining::"), 3, 0, false},
		{"a member that leads nothing yet (leaderships not spread)",
			view(6, "n1:alive:0-5:0-5", "n2:alive::0-5", "n3:alive::0-5"), 3, 0, false},
		{"a partition without a leader",
			view(6, "n1:alive:0-1:0-5", "n2:alive:2-3:0-5", "n3:alive:4-4:0-5"), 3, 0, false},
		{"a partition led by two",
			view(6, "n1:alive:0-2:0-5", "n2:alive:2-3:0-5", "n3:alive:4-5:0-5"), 3, 0, false},
		{"a partition on too few replicas",
			view(6, "n1:alive:0-1:0-5", "n2:alive:2-3:0-5", "n3:alive:4-5:1-5"), 3, 0, false},
		{"two nodes need two replicas, not three",
			view(4, "n1:alive:0-1:0-3", "n2:alive:2-3:0-3"), 2, 0, true},
		{"--replicas 2 on three nodes: two replicas a partition are enough",
			view(6, "n1:alive:0-1:0-3", "n2:alive:2-3:2-5", "n3:alive:4-5:0-5"), 3, 2, true},
		{"--replicas 2 on three nodes: one replica is too few",
			view(6, "n1:alive:0-1:0-3", "n2:alive:2-3:2-3", "n3:alive:4-5:4-5"), 3, 2, false},
		{"a view without partitions",
			view(0, "n1:alive:0-1:0-3", "n2:alive:2-3:0-3"), 2, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := tc.v.Unsettled(tc.want)
			if tc.replicas > 0 {
				why = tc.v.UnsettledOn(tc.want, tc.replicas)
			}
			if (why == "") != tc.settled {
				t.Fatalf("unsettled = %q, want settled %v", why, tc.settled)
			}
		})
	}
}

func TestViewDecodesOpsCluster(t *testing.T) {
	var v View
	body := `{"node":"n2","partitions":64,"members":[{"name":"n1","state":"alive","httpAddr":"127.0.0.1:1","partitionsLed":[0,3],"partitionsReplicated":[0,1,3],"activations":0}]}`
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Node != "n2" || v.Partitions != 64 || len(v.Members) != 1 || v.Members[0].State != "alive" ||
		len(v.Members[0].Led) != 2 || len(v.Members[0].Replicated) != 3 {
		t.Fatalf("decoded %+v", v)
	}
}
