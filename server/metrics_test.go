package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDenialRulesComplete: every Rule constant confine declares is in the
// denials metric's fixed label set, so a new rule is counted under its own
// name rather than as "other".
func TestDenialRulesComplete(t *testing.T) {
	files, err := filepath.Glob("../confine/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Rule") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				found++
				if !slices.Contains(denialRules, v) {
					t.Errorf("confine.%s (%q) is not in denialRules", name.Name, v)
				}
			}
			return true
		})
	}
	if found < 8 {
		t.Errorf("found %d Rule constants in confine; the parse is wrong", found)
	}
}
