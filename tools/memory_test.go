//go:build linux

package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/memory"
	"github.com/mark3labs/mcp-go/mcp"
)

type memRec struct {
	recs []string
	Recorder
}

func (m *memRec) Memory(tool, scope, path string) { m.recs = append(m.recs, tool+" "+scope+" "+path) }

func call(t *testing.T, tl Tool, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := tl.Handler(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tl.Name, Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return res, text
}

func TestMemoryTools(t *testing.T) {
	d := testDeps(t)
	state := filepath.Join(t.TempDir(), "state")
	base, err := confine.Resolve(confine.Spec{Mode: confine.ModeOff, ModeExplicit: true, Workdir: d.Policy.Workdir(), Home: d.Policy.Home(), StateDir: state},
		confine.HostReport{OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := memory.Open(state, d.Policy.Workdir(), base, memory.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &memRec{}
	d.Memory, d.Audit = st, rec
	secret := "do-not-log-this-content"
	if res, text := call(t, MemoryWrite(d), map[string]any{"path": "notes/a.md", "content": "first\n" + secret + "\n"}); res.IsError || !strings.Contains(text, "created project memory notes/a.md") {
		t.Fatalf("write: %s", text)
	}
	if _, text := call(t, MemoryView(d), map[string]any{}); !strings.Contains(text, "notes/a.md (30 bytes): first") {
		t.Fatalf("listing: %s", text)
	}
	if _, text := call(t, MemoryView(d), map[string]any{"path": "notes"}); !strings.Contains(text, "project memory, notes/: 1 file\nnotes/a.md (30 bytes): first") {
		t.Fatalf("directory listing: %q", text)
	}
	if _, text := call(t, MemoryView(d), map[string]any{"path": "notes/a.md", "offset": float64(2)}); text != "     2\t"+secret+"\n" {
		t.Fatalf("view: %q", text)
	}
	if res, text := call(t, MemoryEdit(d), map[string]any{"path": "notes/a.md", "old_text": "x", "new_text": "y"}); !res.IsError || !strings.Contains(text, "found 0 times") {
		t.Fatalf("edit: %s", text)
	}
	if _, text := call(t, MemorySearch(d), map[string]any{"pattern": "fir.t"}); text != "notes/a.md:1:first\n" {
		t.Fatalf("search: %q", text)
	}
	if res, text := call(t, MemoryView(d), map[string]any{"scope": "team"}); !res.IsError || !strings.Contains(text, "unknown memory scope") {
		t.Fatalf("scope: %s", text)
	}
	if res, _ := call(t, MemoryView(d), map[string]any{"scope": "personal"}); res.IsError {
		t.Fatal("personal view failed")
	}
	if res, text := call(t, MemoryDelete(d), map[string]any{"path": "notes/a.md"}); res.IsError {
		t.Fatalf("delete: %s", text)
	}
	if strings.Join(rec.recs, ";") != "memory_write project a.md;memory_delete project a.md" {
		t.Fatalf("audit: %v", rec.recs)
	}
	// Without memory the tools say so.
	d.Memory = nil
	if res, text := call(t, MemoryView(d), map[string]any{}); !res.IsError || !strings.Contains(text, "not available") {
		t.Fatalf("no memory: %s", text)
	}
	if es, _ := os.ReadDir(d.Policy.Workdir()); len(es) != 0 {
		t.Fatalf("memory wrote into the worktree: %v", es)
	}
}
