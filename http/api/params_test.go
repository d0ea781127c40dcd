package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// handlerSource is the package's functions by name (methods and plain
// functions alike), read from its non-test files.
func handlerSource(t *testing.T) map[string][]*ast.FuncDecl {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	funcs := map[string][]*ast.FuncDecl{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				funcs[fd.Name.Name] = append(funcs[fd.Name.Name], fd)
			}
		}
	}
	return funcs
}

// callParams is the names of fd's parameters of type call.
func callParams(fd *ast.FuncDecl) []string {
	var out []string
	for _, f := range fd.Type.Params.List {
		if id, ok := f.Type.(*ast.Ident); ok && id.Name == "call" {
			for _, n := range f.Names {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// paramReads is every name fd reads with param, and with param in the
// functions it hands its call to, transitively. A name that is not a
// string literal is reported as bad.
func paramReads(funcs map[string][]*ast.FuncDecl, fd *ast.FuncDecl, seen map[*ast.FuncDecl]bool, names map[string]bool, bad *[]string) {
	if seen[fd] {
		return
	}
	seen[fd] = true
	ins := callParams(fd)
	isIn := func(e ast.Expr) bool {
		id, ok := e.(*ast.Ident)
		return ok && slices.Contains(ins, id.Name)
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "param" && isIn(sel.X) {
			lit, ok := c.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				*bad = append(*bad, fd.Name.Name+" reads a parameter whose name is not a literal")
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			names[name] = true
			return true
		}
		if !slices.ContainsFunc(c.Args, isIn) {
			return true
		}
		var callee string
		switch f := c.Fun.(type) {
		case *ast.Ident:
			callee = f.Name
		case *ast.SelectorExpr:
			callee = f.Sel.Name
		}
		for _, next := range funcs[callee] {
			paramReads(funcs, next, seen, names, bad)
		}
		return true
	})
}

// Every handler reads by name only the path parameters its route's pattern
// has: a name the pattern lacks would panic (call.param), never read as "".
// The handlers and the functions they hand their call to are read from the
// source, so a row, a handler or a helper added later is checked too.
func TestHandlersReadTheirRoutesParameters(t *testing.T) {
	funcs := handlerSource(t)
	for i, rt := range routes {
		if rt.handle == nil {
			continue
		}
		full := runtime.FuncForPC(reflect.ValueOf(rt.handle).Pointer()).Name()
		name := full[strings.LastIndex(full, ".")+1:]
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			decls := funcs[name]
			if len(decls) == 0 {
				t.Fatalf("no source for the handler %s", full)
			}
			read, bad := map[string]bool{}, []string(nil)
			for _, fd := range decls {
				paramReads(funcs, fd, map[*ast.FuncDecl]bool{}, read, &bad)
			}
			for _, b := range bad {
				t.Error(b)
			}
			for n := range read {
				if !slices.Contains(paramNames[i][:], n) {
					t.Errorf("%s reads the parameter {%s}, which %s lacks", name, n, rt.path)
				}
			}
		})
	}
	t.Run("only param reads the parameters", func(t *testing.T) {
		for _, decls := range funcs {
			for _, fd := range decls {
				if fd.Name.Name == "param" || fd.Name.Name == "serveCall" {
					continue
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "params" {
						t.Errorf("%s reads call.params by position; read them by name (call.param)", fd.Name.Name)
					}
					return true
				})
			}
		}
	})
}

// The router hands an app host page its one path parameter, {id}, as
// app.PathParam (dispatch): a page row with another name or a second
// parameter would lose it.
func TestPagesTakeOneParameterNamedID(t *testing.T) {
	for i, rt := range routes {
		if rt.page == nil {
			continue
		}
		if names := paramNames[i]; names[1] != "" || names[0] != "" && names[0] != "id" {
			t.Errorf("%s %s: a page takes at most one path parameter, {id}", rt.method, rt.path)
		}
	}
}

func TestCallParam(t *testing.T) {
	row := slices.IndexFunc(routes[:], func(rt route) bool {
		return rt.method == "DELETE" && rt.path == "/ops/v1/conversations/{id}/members/{userId}"
	})
	if row < 0 {
		t.Fatal("no route DELETE /ops/v1/conversations/{id}/members/{userId}")
	}
	in := call{names: &paramNames[row], params: [maxParams]string{"c1", "u1"}}
	for _, tc := range []struct{ name, want string }{
		{"id", "c1"},
		{"userId", "u1"},
	} {
		t.Run("a parameter of the pattern reads its value: "+tc.name, func(t *testing.T) {
			if got := in.param(tc.name); got != tc.want {
				t.Fatalf("param(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		rule string
		in   call
		name string
	}{
		{"a name the pattern lacks panics", in, "conversationId"},
		{"the empty name panics", in, ""},
		{"a call of a route without parameters panics", call{}, "id"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("param(%q) did not panic", tc.name)
				}
			}()
			tc.in.param(tc.name)
		})
	}
}
