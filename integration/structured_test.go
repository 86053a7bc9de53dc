//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Some clients (Claude Code among them) hand the model only a result's
// structuredContent, serialized as JSON, whenever it has one, and drop its
// text content (docs/tools.md, "The tools"). So every tool's structuredContent
// must carry the payload itself, never only metadata: this test calls every
// published tool for real and reads only what such a client would read.

// scCalls records which tools a structured-content test called.
type scCalls struct {
	m    *mcpConn
	seen map[string]bool
}

// call makes a call that must succeed and returns its structuredContent
// exactly as a JSON-only client sees it: serialized, then decoded.
func (c *scCalls) call(t *testing.T, tool string, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	c.seen[tool] = true
	r := c.m.call(t, tool, args)
	if r.IsError {
		t.Fatalf("%s %v: %s", tool, args, text(r))
	}
	if r.StructuredContent == nil {
		t.Fatalf("%s: no structuredContent", tool)
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: structuredContent is not an object: %s", tool, b)
	}
	return m, r
}

// str is a string member of a decoded object ("" when absent).
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// anyHas reports whether some object in the array m[key] has member k
// whose value contains want.
func anyHas(m map[string]any, key, k, want string) bool {
	items, _ := m[key].([]any)
	for _, it := range items {
		if o, ok := it.(map[string]any); ok && strings.Contains(fmt.Sprint(o[k]), want) {
			return true
		}
	}
	return false
}

func TestStructuredContentCarriesPayload(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		hello := "hello, world\nsecond line\n"
		writeFile(t, filepath.Join(e.work, "hello.txt"), hello)
		writeFile(t, filepath.Join(e.work, "five.txt"), "l1\nl2\nl3\nl4\nl5")
		writeFile(t, filepath.Join(e.work, "latin1.txt"), "caf\xe9\n")
		writeFile(t, filepath.Join(e.work, "src", "a.go"), "package a\n\n// NEEDLE-93 here\n")
		kib2 := strings.Repeat("0123456789abcdef\"quoted\" and\ttab line of text, about sixty-four bytes.\n", 32)[:2048]
		writeFile(t, filepath.Join(e.work, "two-kib.txt"), kib2)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		c := &scCalls{m: m, seen: map[string]bool{}}

		// read_file: the whole file, then a range, each byte-exact in
		// structuredContent; the text content is the same text, nothing
		// added, so a client that shows it pays for the file once.
		s, r := c.call(t, "read_file", map[string]any{"path": "hello.txt"})
		if str(s, "content") != hello {
			t.Errorf("read_file: structuredContent content %q, want %q (structuredContent: %v)", str(s, "content"), hello, s)
		}
		if text(r) != hello {
			t.Errorf("read_file: text content %q, want the file's text alone", text(r))
		}
		s, _ = c.call(t, "read_file", map[string]any{"path": "five.txt", "offset": 2, "limit": 2})
		if str(s, "content") != "l2\nl3\n" || s["more"] != true || s["total_lines"] != float64(5) || s["offset"] != float64(2) {
			t.Errorf("read_file offset 2 limit 2: %v", s)
		}
		s, _ = c.call(t, "read_file", map[string]any{"path": "five.txt", "offset": 4})
		if str(s, "content") != "l4\nl5" || s["more"] != false {
			t.Errorf("read_file offset 4: %v", s)
		}
		s, _ = c.call(t, "read_file", map[string]any{"path": "latin1.txt"})
		if str(s, "content") != `caf\xe9`+"\n" || s["non_utf8"] != true {
			t.Errorf("read_file of a non-UTF-8 file: %v", s)
		}
		s, r = c.call(t, "read_file", map[string]any{"path": "two-kib.txt"})
		if str(s, "content") != kib2 {
			t.Errorf("read_file of 2 KiB: content differs")
		}
		sc, _ := json.Marshal(r.StructuredContent)
		whole, _ := json.Marshal(r)
		t.Logf("read_file of a 2048-byte file: text content %d bytes, structuredContent %d bytes, whole result %d bytes", len(text(r)), len(sc), len(whole))

		// The file tools that change files.
		s, _ = c.call(t, "write_file", map[string]any{"path": "new/w.txt", "content": "written\n"})
		if str(s, "path") != "new/w.txt" || s["bytes"] != float64(8) || s["created"] != true {
			t.Errorf("write_file: %v", s)
		}
		s, _ = c.call(t, "edit_file", map[string]any{"path": "new/w.txt", "edits": []any{map[string]any{"old_text": "written", "new_text": "edited"}}})
		if d := str(s, "diff"); !strings.Contains(d, "-written") || !strings.Contains(d, "+edited") || s["applied"] != true {
			t.Errorf("edit_file: %v", s)
		}
		s, _ = c.call(t, "apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: new/p.txt\n+patched\n*** End Patch\n"})
		if !anyHas(s, "files", "path", "new/p.txt") || !anyHas(s, "files", "action", "add") {
			t.Errorf("apply_patch: %v", s)
		}

		// The tools that find and list.
		s, _ = c.call(t, "glob", map[string]any{"pattern": "**/*.go"})
		if ps, _ := s["paths"].([]any); !slices.Contains(ps, any("src/a.go")) {
			t.Errorf("glob: %v", s)
		}
		s, _ = c.call(t, "grep", map[string]any{"pattern": "NEEDLE-[0-9]+", "context": 1})
		if !anyHas(s, "matches", "text", "// NEEDLE-93 here") || !anyHas(s, "matches", "path", "src/a.go") || !anyHas(s, "matches", "line", "3") {
			t.Errorf("grep content: %v", s)
		}
		s, _ = c.call(t, "grep", map[string]any{"pattern": "NEEDLE", "output_mode": "files"})
		if fs, _ := s["files"].([]any); !slices.Contains(fs, any("src/a.go")) {
			t.Errorf("grep files: %v", s)
		}
		s, _ = c.call(t, "grep", map[string]any{"pattern": "l[0-9]", "output_mode": "count"})
		if !anyHas(s, "counts", "path", "five.txt") || !anyHas(s, "counts", "count", "5") {
			t.Errorf("grep count: %v", s)
		}
		s, _ = c.call(t, "list_dir", map[string]any{"path": ".", "depth": 2})
		if !anyHas(s, "entries", "path", "src/a.go") || !anyHas(s, "entries", "type", "dir") {
			t.Errorf("list_dir: %v", s)
		}

		// shell: the output and the exit code.
		s, _ = c.call(t, "shell", map[string]any{"command": "echo OUT-$((6*7)); echo ERR-$((7*7)) >&2; exit 3"})
		if o := str(s, "output"); !strings.Contains(o, "OUT-42") || !strings.Contains(o, "ERR-49") || s["exit_code"] != float64(3) {
			t.Errorf("shell: %v", s)
		}

		// memory: a listing, a file (whole and a range), an edit, a search.
		note := "# build\n" + memoMarker + "\nthird line\n"
		if s, _ = c.call(t, "memory_write", map[string]any{"path": "build.md", "content": note}); s["created"] != true || s["bytes"] != float64(len(note)) {
			t.Errorf("memory_write: %v", s)
		}
		s, _ = c.call(t, "memory_view", map[string]any{})
		if !anyHas(s, "files", "path", "build.md") || !anyHas(s, "files", "first_line", "# build") {
			t.Errorf("memory_view listing: %v", s)
		}
		s, r = c.call(t, "memory_view", map[string]any{"path": "build.md"})
		if content := str(s, "content"); !strings.Contains(content, "2\t"+memoMarker+"\n") || !strings.Contains(content, "3\tthird line\n") || content != text(r) {
			t.Errorf("memory_view of a file: structuredContent %v, text %q", s, text(r))
		}
		s, _ = c.call(t, "memory_view", map[string]any{"path": "build.md", "offset": 2, "limit": 1})
		if content := str(s, "content"); !strings.Contains(content, memoMarker) || strings.Contains(content, "third") || s["more"] != true {
			t.Errorf("memory_view offset 2 limit 1: %v", s)
		}
		if s, _ = c.call(t, "memory_edit", map[string]any{"path": "build.md", "old_text": "third line", "new_text": "THIRD-edited"}); str(s, "path") != "build.md" {
			t.Errorf("memory_edit: %v", s)
		}
		s, _ = c.call(t, "memory_search", map[string]any{"pattern": "THIRD-edited"})
		if !anyHas(s, "matches", "text", "THIRD-edited") || !anyHas(s, "matches", "line", "3") {
			t.Errorf("memory_search: %v", s)
		}
		if s, _ = c.call(t, "memory_delete", map[string]any{"path": "build.md"}); str(s, "path") != "build.md" {
			t.Errorf("memory_delete: %v", s)
		}

		// terminals: what the program printed, and its end.
		s, _ = c.call(t, "terminal_start", map[string]any{"command": "read x; echo got-$x; read y"})
		tid := str(s, "id")
		if tid == "" {
			t.Fatalf("terminal_start: %v", s)
		}
		if s, _ = c.call(t, "terminal_send", map[string]any{"id": tid, "text": "TERM7", "keys": []any{"Enter"}}); str(s, "id") != tid {
			t.Errorf("terminal_send: %v", s)
		}
		var seen strings.Builder
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !strings.Contains(seen.String(), "got-TERM7"); {
			s, _ = c.call(t, "terminal_read", map[string]any{"id": tid, "wait_ms": 1000})
			seen.WriteString(str(s, "text"))
		}
		if !strings.Contains(seen.String(), "got-TERM7") {
			t.Errorf("terminal_read: the output never reached structuredContent: %q", seen.String())
		}
		s, _ = c.call(t, "terminal_list", map[string]any{})
		if !anyHas(s, "terminals", "id", tid) || !anyHas(s, "terminals", "command", "echo got-$x") {
			t.Errorf("terminal_list: %v", s)
		}
		if s, _ = c.call(t, "terminal_close", map[string]any{"id": tid}); s["exited"] != true {
			t.Errorf("terminal_close: %v", s)
		}

		// Every published tool was called.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tl, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tl.Tools {
			if !c.seen[tool.Name] {
				t.Errorf("tool %s is published but this test does not check its structuredContent", tool.Name)
			}
		}
	})
}
