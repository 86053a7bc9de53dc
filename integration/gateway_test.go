//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// toolNames lists the session's tools.
func (m *mcpConn) toolNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := testCtx()
	defer cancel()
	res, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v\nstderr:\n%s", err, m.stderr.String())
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestGatewayFilesystem: the filesystem server allowed "/" behind
// evener-mcp reads the worktree, never a planted key or a masked path,
// writes only inside the write roots (nothing in read-only), as root and as
// a user, in every mode.
func TestGatewayFilesystem(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "GATEWAY-SECRET-KEY\n")
				cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
				m := e.mcp(t, "--sandbox", mode, "--mcp-config", cfg)
				names := m.toolNames(t)
				if !slices.Contains(names, "files__read_text_file") || !slices.Contains(names, "read_file") {
					t.Fatalf("tools %v: want files__read_text_file beside read_file\nstderr:\n%s", names, m.stderr.String())
				}
				if !strings.Contains(m.init.Instructions, "files (network host") {
					t.Errorf("preamble does not name the server and its network:\n%s", m.init.Instructions)
				}
				r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.work, "README")})
				if r.IsError || !strings.Contains(text(r), "worktree file") {
					t.Fatalf("reading the worktree: %s\nstderr:\n%s", text(r), m.stderr.String())
				}
				r = m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")})
				if strings.Contains(text(r), "GATEWAY-SECRET-KEY") {
					t.Fatalf("the downstream read ~/.ssh/id_rsa: %s", text(r))
				}
				out := filepath.Join(e.sibling, "planted")
				r = m.call(t, "files__write_file", map[string]any{"path": out, "content": "x"})
				if _, err := os.Stat(out); err == nil {
					t.Fatalf("the downstream wrote outside the write roots: %s", text(r))
				}
				in := filepath.Join(e.work, "written")
				r = m.call(t, "files__write_file", map[string]any{"path": in, "content": "inside"})
				_, err := os.Stat(in)
				switch {
				case mode == "read-only" && err == nil:
					t.Fatalf("the downstream wrote the worktree in read-only: %s", text(r))
				case mode != "read-only" && err != nil:
					t.Fatalf("the downstream could not write the worktree in %s: %s", mode, text(r))
				}
			})
		}
	})
}
