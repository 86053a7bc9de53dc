//go:build linux

package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMemoryDownstreamCannotRead: a downstream MCP server (the filesystem
// server, allowed "/") runs under the session's sandbox, where the state
// directory is masked: it can neither read nor list a memory file, in
// every sandboxed mode, as root and as the user (the control: it reads
// the worktree).
func TestMemoryDownstreamCannotRead(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
				m := e.mcp(t, "--sandbox", mode, "--mcp-config", cfg)
				if names := m.toolNames(t); !slices.Contains(names, "files__read_text_file") || !slices.Contains(names, "memory_write") {
					t.Fatalf("tools %v\nstderr:\n%s", names, m.stderr.String())
				}
				ok(t, m.call(t, "memory_write", map[string]any{"path": "notes.md", "content": memoMarker + "\n"}))
				_, project, _ := memoryDirs(t, e, e.work)
				// Control: the downstream reads the worktree.
				if r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.work, "README")}); r.IsError || !strings.Contains(text(r), "worktree file") {
					t.Fatalf("control: the downstream cannot read the worktree: %s", text(r))
				}
				if r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(project, "notes.md")}); strings.Contains(text(r), memoMarker) {
					t.Errorf("the downstream read a memory file: %s", text(r))
				}
				if r := m.call(t, "files__list_directory", map[string]any{"path": project}); strings.Contains(text(r), "notes.md") {
					t.Errorf("the downstream listed a memory root: %s", text(r))
				}
				if r := m.call(t, "files__list_directory", map[string]any{"path": filepath.Dir(project)}); strings.Contains(text(r), filepath.Base(project)) {
					t.Errorf("the downstream listed the project roots: %s", text(r))
				}
			})
		}
	})
}
