package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// transportFile says whether a file of server/ belongs to a transport
// (docs/architecture.md, "One hub, two transports"): the stdio transport
// (transport_stdio.go, stdio_*.go) or the HTTP one (transport_http.go,
// http_*.go, persist_http.go).
func transportFile(name string) bool {
	for _, p := range []string{"transport_", "stdio_", "http_", "persist_http"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TestHubKnowsNoTransport: no file of the hub (server/ outside the
// transports' files and transport.go, which declares what a transport
// provides) names anything a transport's file declares.
func TestHubKnowsNoTransport(t *testing.T) {
	files, err := filepath.Glob("../../server/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("server/: %v", err)
	}
	fset := token.NewFileSet()
	declared := map[string]string{} // name -> the transport file declaring it
	hub := map[string]*ast.File{}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") || name == "transport.go" {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !transportFile(name) {
			hub[name] = af
			continue
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						declared[sp.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							declared[n.Name] = name
						}
					}
				}
			}
		}
	}
	if len(hub) == 0 || len(declared) == 0 {
		t.Fatal("found no hub or no transport files")
	}
	var bad []string
	for name, af := range hub {
		ast.Inspect(af, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				ast.Inspect(sel.X, func(m ast.Node) bool { return checkIdent(m, name, fset, declared, &bad) })
				return false // a selected field or method is not a package-level name
			}
			return checkIdent(n, name, fset, declared, &bad)
		})
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("the hub names a transport's declaration: %s", b)
	}
}

func checkIdent(n ast.Node, file string, fset *token.FileSet, declared map[string]string, bad *[]string) bool {
	if id, ok := n.(*ast.Ident); ok {
		if from, ok := declared[id.Name]; ok && id.Name != "_" {
			*bad = append(*bad, fset.Position(id.Pos()).String()+": "+id.Name+" (from "+from+")")
		}
	}
	return true
}
