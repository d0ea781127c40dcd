package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every write of an actor goes through its Env's batch, so that a node of
// a cluster replicates it: a batch taken from the store directly would
// commit on this node alone. Only the layout upgrade, which runs before
// the node serves, writes the store itself.
func TestActorsCommitThroughTheirEnv(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"batch.go": true, "upgrade.go": true}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || allowed[name] {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if ok && (sel.Sel.Name == "NewBatch" || sel.Sel.Name == "NewBatchSize") {
				t.Errorf("%s: a batch from the store itself (%s) commits without replication: use env.newBatch()",
					fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
