package tools

import (
	"encoding/json"
	"flag"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/internal/sandboxtest"
)

var update = flag.Bool("update", false, "rewrite the golden tool schemas")

// testDeps are Deps over a workspace-write policy on a fresh sandboxtest
// host (resolved against a fake usable host: nothing is started).
func testDeps(t *testing.T) Deps {
	t.Helper()
	h := sandboxtest.NewHost(t)
	return Deps{Policy: sandboxtest.Resolve(t, h.Spec(confine.ModeWorkspaceWrite), sandboxtest.Usable), Bounds: DefaultBounds}
}

// TestSchemasGolden snapshots every tool definition (name, description,
// schemas, annotations) under testdata/; a missing or changed snapshot
// fails. Refresh with -update.
func TestSchemasGolden(t *testing.T) {
	for _, st := range All(testDeps(t)) {
		got, err := json.MarshalIndent(st.Tool, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		file := filepath.Join("testdata", st.Tool.Name+".json")
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: no golden schema (run go test ./tools -update): %v", st.Tool.Name, err)
		}
		if string(want) != string(got) {
			t.Errorf("%s: schema changed; if intended, run go test ./tools -update\n--- got\n%s", st.Tool.Name, got)
		}
	}
}

// TestAnnotationsExplicit: all four hints set on every tool, none left to
// the library's defaults.
func TestAnnotationsExplicit(t *testing.T) {
	want := map[string][4]bool{ // readOnly, destructive, idempotent, openWorld
		"read_file": {true, false, true, false}, "write_file": {false, true, true, false},
		"edit_file": {false, true, false, false}, "apply_patch": {false, true, false, false},
		"glob": {true, false, true, false}, "grep": {true, false, true, false},
		"list_dir": {true, false, true, false}, "shell": {false, true, false, false},
		// The terminal tools start and drive processes (not read-only) but
		// change no file themselves; reading and listing are read-only.
		"terminal_start": {false, true, false, false}, "terminal_send": {false, true, false, false},
		"terminal_read": {true, false, false, false}, "terminal_close": {false, true, true, false},
		"terminal_list": {true, false, true, false},
		"memory_view":   {true, false, true, false}, "memory_write": {false, true, true, false},
		"memory_edit": {false, true, false, false}, "memory_search": {true, false, true, false},
		"memory_delete": {false, true, true, false},
	}
	tools := All(testDeps(t))
	if len(tools) != len(Names()) {
		t.Fatalf("All has %d tools, Names %d", len(tools), len(Names()))
	}
	for i, st := range tools {
		a := st.Tool.Annotations
		if st.Tool.Name != Names()[i] || st.Facts.Name != st.Tool.Name {
			t.Errorf("tool %d is %s (facts %s), Names says %s", i, st.Tool.Name, st.Facts.Name, Names()[i])
		}
		// The facts agree with the annotations: a tool that changes files
		// is not read-only, and only such tools count for the floor. The
		// memory tools never count (docs/memory.md, "Memory"): theirs is "read"
		// exactly when they are read-only.
		switch {
		case st.Facts.Memory != "":
			if st.Facts.Changes || (st.Facts.Memory == "read") != *a.ReadOnlyHint || st.Facts.Files || st.Facts.Processes || st.Facts.Approval != "" {
				t.Errorf("%s: memory facts %+v disagree with readOnlyHint %v", st.Tool.Name, st.Facts, *a.ReadOnlyHint)
			}
		case st.Facts.Changes == *a.ReadOnlyHint && st.Tool.Name != "shell" && !st.Facts.Terminal:
			t.Errorf("%s: Changes %v but readOnlyHint %v", st.Tool.Name, st.Facts.Changes, *a.ReadOnlyHint)
		}
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil || a.Title == "" {
			t.Errorf("%s: an annotation is left to the default: %+v", st.Tool.Name, a)
			continue
		}
		got := [4]bool{*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint}
		if got != want[st.Tool.Name] {
			t.Errorf("%s: annotations %v, want %v", st.Tool.Name, got, want[st.Tool.Name])
		}
		var in map[string]any
		if err := json.Unmarshal(st.Tool.RawInputSchema, &in); err != nil || in["additionalProperties"] != false {
			t.Errorf("%s: input schema must be valid JSON with additionalProperties false", st.Tool.Name)
		}
		if len(st.Tool.RawOutputSchema) == 0 {
			t.Errorf("%s: no output schema", st.Tool.Name)
		}
	}
}

// TestNoDirectFileOrProcessAccess: tools reach files and processes only
// through confine (docs/tools.md, "The tools").
func TestNoDirectFileOrProcessAccess(t *testing.T) {
	banned := []string{"os.Open(", "os.OpenFile(", "os.Create(", "os.WriteFile(", "os.ReadFile(", "os.Remove(", "os.RemoveAll(", "os.Rename(", "os.Mkdir(", "os.MkdirAll(", "os.ReadDir(", "os.Stat(", "os.Lstat(", "syscall.", "unix."}
	err := filepath.Walk(".", func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			switch strings.Trim(imp.Path.Value, `"`) {
			case "os/exec", "syscall", "golang.org/x/sys/unix":
				t.Errorf("%s imports %s", p, imp.Path.Value)
			}
		}
		src, _ := os.ReadFile(p)
		for _, b := range banned {
			if strings.Contains(string(src), b) {
				t.Errorf("%s calls %s", p, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
