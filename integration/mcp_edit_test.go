//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestMCPEditAndPatch: edits keep CRLF and indentation, refuse ambiguity,
// apply all or nothing; patches in both formats apply atomically across
// files and a failing one leaves every file untouched.
func TestMCPEditAndPatch(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.work, "crlf.txt"), "one\r\ntwo\r\nthree\r\n")
		writeFile(t, filepath.Join(e.work, "code.go"), "func f() {\n\tif x {\n\t\treturn 1\n\t}\n}\n")
		writeFile(t, filepath.Join(e.work, "dup.txt"), "same\nsame\n")
		writeFile(t, filepath.Join(e.work, "a.txt"), "alpha\nbeta\n")
		writeFile(t, filepath.Join(e.work, "b.txt"), "gamma\ndelta\n")
		must(t, os.Chmod(filepath.Join(e.work, "code.go"), 0o755))
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(e.work, name))
			return string(b)
		}

		r := m.call(t, "edit_file", map[string]any{"path": "crlf.txt", "edits": []any{map[string]any{"old_text": "two\nthree", "new_text": "2\n3"}}})
		if r.IsError || read("crlf.txt") != "one\r\n2\r\n3\r\n" || !strings.Contains(text(r), "+2") {
			t.Errorf("CRLF edit: %q %s", read("crlf.txt"), text(r))
		}
		r = m.call(t, "edit_file", map[string]any{"path": "code.go", "edits": []any{map[string]any{"old_text": "if x {\n\treturn 1\n}", "new_text": "if y {\n\treturn 2\n}"}}})
		if r.IsError || read("code.go") != "func f() {\n\tif y {\n\t\treturn 2\n\t}\n}\n" {
			t.Errorf("indentation-preserving edit: %q %s", read("code.go"), text(r))
		}
		if fi, _ := os.Stat(filepath.Join(e.work, "code.go")); fi.Mode().Perm() != 0o755 {
			t.Errorf("edit lost the file mode: %v", fi.Mode())
		}
		r = m.call(t, "edit_file", map[string]any{"path": "dup.txt", "edits": []any{map[string]any{"old_text": "same", "new_text": "x"}}})
		if !r.IsError || !strings.Contains(text(r), "ambiguous") || read("dup.txt") != "same\nsame\n" {
			t.Errorf("ambiguous edit: %s", text(r))
		}
		r = m.call(t, "edit_file", map[string]any{"path": "dup.txt", "edits": []any{map[string]any{"old_text": "same", "new_text": "x", "replace_all": true}}, "dry_run": true})
		if r.IsError || read("dup.txt") != "same\nsame\n" || !strings.Contains(text(r), "+x") {
			t.Errorf("dry run wrote or failed: %s", text(r))
		}
		r = m.call(t, "edit_file", map[string]any{"path": "a.txt", "edits": []any{
			map[string]any{"old_text": "alpha", "new_text": "A"},
			map[string]any{"old_text": "not there", "new_text": "B"}}})
		if !r.IsError || read("a.txt") != "alpha\nbeta\n" {
			t.Errorf("a failing second edit must leave the file untouched: %q", read("a.txt"))
		}

		// Envelope patch across files, with a move and an end-of-file anchor.
		patch := "*** Begin Patch\n*** Update File: a.txt\n@@\n alpha\n-beta\n+BETA\n*** End of File\n*** Update File: b.txt\n*** Move to: moved/b.txt\n@@\n-gamma\n+GAMMA\n delta\n*** Add File: new.txt\n+fresh\n*** End Patch\n"
		r = m.call(t, "apply_patch", map[string]any{"patch": patch})
		if r.IsError || read("a.txt") != "alpha\nBETA\n" || read("moved/b.txt") != "GAMMA\ndelta\n" || read("new.txt") != "fresh\n" {
			t.Errorf("envelope patch: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(e.work, "b.txt")); err == nil {
			t.Errorf("a moved file was left at its old path")
		}
		// A failing chunk in the third file: none of the three changes.
		patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: other.txt\n+x\n*** Update File: new.txt\n@@\n-does not match\n+y\n*** End Patch\n"
		r = m.call(t, "apply_patch", map[string]any{"patch": patch})
		if !r.IsError || read("a.txt") != "alpha\nBETA\n" || read("new.txt") != "fresh\n" {
			t.Errorf("a failing patch changed files: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(e.work, "other.txt")); err == nil {
			t.Errorf("a failing patch created a file")
		}
		// A plain unified diff.
		diff := "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-alpha\n+unified\n BETA\n"
		r = m.call(t, "apply_patch", map[string]any{"patch": diff})
		if r.IsError || read("a.txt") != "unified\nBETA\n" {
			t.Errorf("unified diff: %q %s", read("a.txt"), text(r))
		}
		// Symlink modes and git metadata are refused.
		r = m.call(t, "apply_patch", map[string]any{"patch": "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n"})
		if !r.IsError {
			t.Errorf("a symlink-creating patch was applied")
		}
		r = m.call(t, "apply_patch", map[string]any{"patch": "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+#!/bin/sh\n*** End Patch\n"})
		if !r.IsError {
			t.Errorf("a patch into .git was applied")
		}
		// No temp files left behind anywhere in the worktree.
		filepath.Walk(e.work, func(p string, info os.FileInfo, err error) error {
			if err == nil && strings.Contains(info.Name(), ".evener-") {
				t.Errorf("leftover temp file %s", p)
			}
			return nil
		})
	})
}

// TestMCPServersSnippet starts the server exactly as the README's
// mcpServers entry says (command and args, nothing else) and uses it.
func TestMCPServersSnippet(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```json\n(\\{\\s*\"mcpServers\".*?)\n```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README has no ```json mcpServers block")
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(block[1], &cfg); err != nil {
		t.Fatalf("README mcpServers JSON: %v", err)
	}
	entry, ok := cfg.MCPServers["evener"]
	if !ok {
		t.Fatalf("no \"evener\" entry in %s", block[1])
	}
	e := newEnv(t, identities(t)[0])
	// The entry names the installed binary and a project path; point them
	// at the test build and the fixture, and change nothing else.
	args := make([]string, len(entry.Args))
	for i, a := range entry.Args {
		args[i] = strings.ReplaceAll(a, "/path/to/your/project", e.work)
	}
	if filepath.Base(entry.Command) != "evener-mcp" {
		t.Fatalf("the entry runs %q", entry.Command)
	}
	c, err := client.NewStdioMCPClientWithOptions(binPath, nil, args, transport.WithCommandFunc(
		func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = e.serverEnv(t)
			return cmd, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "snippet", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "read_file"
	call.Params.Arguments = map[string]any{"path": "README"}
	res, err := c.CallTool(ctx, call)
	if err != nil || res.IsError || text(res) != "worktree file\n" {
		t.Fatalf("read_file through the snippet's server: %v %v", err, res)
	}
}

// TestMCPReadFileKinds: byte-exact text with ranges and totals, binary and
// non-UTF-8 flagged (never a silent U+FFFD), images as image content, and
// the size cap.
func TestMCPReadFileKinds(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	writeFile(t, filepath.Join(e.work, "lines.txt"), "one\r\ntwo\r\nthree\r\n")
	writeFile(t, filepath.Join(e.work, "latin1.txt"), "caf\xe9\n")
	writeFile(t, filepath.Join(e.work, "blob.bin"), "abc\x00def")
	writeFile(t, filepath.Join(e.work, "pic.png"), "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	big := make([]byte, 11<<20)
	must(t, os.WriteFile(filepath.Join(e.work, "big.txt"), big, 0o644))
	m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")

	r := m.call(t, "read_file", map[string]any{"path": "lines.txt", "offset": 2, "limit": 1})
	s := structured(t, r)
	if text(r) != "two\r\n" || s["total_lines"] != float64(3) || s["more"] != true {
		t.Errorf("range: %q %v", text(r), s)
	}
	r = m.call(t, "read_file", map[string]any{"path": "latin1.txt"})
	if s := structured(t, r); s["non_utf8"] != true || !strings.Contains(text(r), `\xe9`) || strings.ContainsRune(text(r), '\uFFFD') {
		t.Errorf("non-UTF-8: %q %v", text(r), s)
	}
	r = m.call(t, "read_file", map[string]any{"path": "blob.bin"})
	if s := structured(t, r); s["binary"] != true || strings.Contains(text(r), "def") {
		t.Errorf("binary: %q %v", text(r), s)
	}
	r = m.call(t, "read_file", map[string]any{"path": "pic.png"})
	if len(r.Content) != 1 {
		t.Fatalf("image: %v", r.Content)
	}
	if img, ok := r.Content[0].(mcp.ImageContent); !ok || img.MIMEType != "image/png" {
		t.Errorf("image content: %#v", r.Content[0])
	}
	r = m.call(t, "read_file", map[string]any{"path": "big.txt"})
	if !r.IsError || !strings.Contains(text(r), "cap") {
		t.Errorf("size cap: %s", text(r))
	}
}
