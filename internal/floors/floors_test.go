package floors

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kitd/kitd/"

// floors lists, bottom first, the packages of each floor by path prefix (a
// package takes the floor of its longest prefix). A package may import its
// own floor and the ones below, never one above.
var floors = []struct {
	name     string
	packages []string
}{
	{"wire formats and leaves", []string{
		"proto/kitpb", "internal/clock", "internal/ids", "internal/metrics", "internal/manifest",
		"internal/blocks", "internal/domainproof", "internal/jsontext", "internal/plaintext", "internal/eventually", "internal/logbuf",
		"internal/floors", "kitverify", "kitclient", "docs/openapi",
	}},
	{"vocabulary", []string{
		"internal/limits", "internal/kiterr", "internal/partition", "internal/msgjson",
		"internal/history", "internal/loglimit", "internal/workers", "internal/deadline",
	}},
	{"storage", []string{"persistence"}},
	{"consensus and node-to-node transport", []string{"multiraft", "cluster/peer", "cluster/membership"}},
	{"placement and raft's transport", []string{"cluster", "cluster/raftnet"}},
	{"actors", []string{"actors"}},
	{"replicas and deliveries", []string{"replica", "deliveries"}},
	{"HTTP", []string{"http"}},
	{"assembly of a node", []string{"server"}},
	{"commands and harnesses", []string{"cmd", "bench", "e2e"}},
}

// floorOf is the floor of package path pkg (relative to the module), or -1.
func floorOf(pkg string) int {
	best, bestLen := -1, -1
	for i, f := range floors {
		for _, prefix := range f.packages {
			if (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > bestLen {
				best, bestLen = i, len(prefix)
			}
		}
	}
	return best
}

// violations lists what breaks the floors in imports (package → its
// imports, both relative to the module).
func violations(imports map[string][]string) []string {
	var out []string
	for pkg, deps := range imports {
		own := floorOf(pkg)
		if own < 0 {
			out = append(out, pkg+" stands on no floor")
			continue
		}
		for _, dep := range deps {
			if f := floorOf(dep); f > own {
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), a floor above", pkg, floors[own].name, dep, floors[f].name))
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestTheFloorsHold(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		imports[pkg] = nil
		for _, dep := range fields[1:] {
			if rel, ok := strings.CutPrefix(dep, module); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	if len(imports) < 20 {
		t.Fatalf("go list found %d packages: not the module", len(imports))
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
}

func TestTheRuleOfTheFloors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		broken  bool
	}{
		{"an import from a floor below is allowed", map[string][]string{"actors": {"persistence", "internal/kiterr"}}, false},
		{"an import from the same floor is allowed", map[string][]string{"cluster/raftnet": {"cluster"}}, false},
		{"a helper package takes its parent's floor", map[string][]string{"multiraft/multirafttest": {"multiraft", "persistence"}}, false},
		{"an import from a floor above is refused", map[string][]string{"http/api": {"server/clusternode"}}, true},
		{"placement importing the assembly is refused", map[string][]string{"cluster": {"server"}}, true},
		{"storage importing consensus is refused", map[string][]string{"persistence": {"multiraft"}}, true},
		{"a package on no floor is refused", map[string][]string{"newthing": nil}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := violations(tc.imports); (len(got) > 0) != tc.broken {
				t.Fatalf("violations %q, want broken=%v", got, tc.broken)
			}
		})
	}
}
