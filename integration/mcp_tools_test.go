//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestMCPInitialize: the handshake, the eight tools and the five memory
// tools with explicit annotations, the preamble as instructions and as a resource, and the
// startup line on stderr.
func TestMCPInitialize(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		ins := m.init.Instructions
		for _, want := range []string{"sandbox: workspace-write", "network: off", "scratch directory", "masked paths", "probe: `git config --list` exited", "- memory (memory_view, memory_write"} {
			if !strings.Contains(ins, want) {
				t.Errorf("instructions lack %q:\n%s", want, ins)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tl, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tl.Tools {
			names = append(names, tool.Name)
			a := tool.Annotations
			if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
				t.Errorf("%s: annotations not all set", tool.Name)
			}
		}
		slices.Sort(names)
		if want := []string{"apply_patch", "edit_file", "glob", "grep", "list_dir", "memory_delete", "memory_edit", "memory_search", "memory_view", "memory_write", "read_file", "shell", "terminal_close", "terminal_list", "terminal_read", "terminal_send", "terminal_start", "write_file"}; !slices.Equal(names, want) {
			t.Errorf("tools %v, want %v", names, want)
		}
		rr := mcp.ReadResourceRequest{}
		rr.Params.URI = "evener://sandbox/preamble"
		res, err := m.c.ReadResource(ctx, rr)
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("preamble resource: %v %v", err, res)
		}
		if tc, ok := res.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != ins {
			t.Errorf("the preamble resource differs from the instructions")
		}
		if !strings.HasPrefix(m.stderr.String(), "sandbox: bwrap enforcing workspace-write (network off") {
			t.Errorf("startup line: %q", m.stderr.String())
		}
	})
}

// fileCase is one file-tool call with the outcome the README's mode table
// requires per mode: "" allowed, else the denial rule (or "error" for a
// plain tool error).
type fileCase struct {
	name string
	tool string
	args func(e *env) map[string]any
	want map[string]string
	// check runs after the call (when allowed or not) on the host.
	check func(t *testing.T, e *env, mode string, r *mcp.CallToolResult)
}

func per(off, ro, ww, rs string) map[string]string {
	return map[string]string{"off": off, "read-only": ro, "workspace-write": ww, "restricted": rs}
}

var fileCases = []fileCase{
	{"read worktree file", "read_file", func(e *env) map[string]any { return map[string]any{"path": "README"} }, per("", "", "", ""),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if text(r) != "worktree file\n" {
				t.Errorf("%s: content %q", mode, text(r))
			}
		}},
	{"read sibling by ..", "read_file", func(e *env) map[string]any { return map[string]any{"path": "../sibling/notes"} }, per("", "", "", "outside-roots"), nil},
	{"read sibling absolute", "read_file", func(e *env) map[string]any { return map[string]any{"path": filepath.Join(e.sibling, "notes")} }, per("", "", "", "outside-roots"), nil},
	{"read prefix sibling", "read_file", func(e *env) map[string]any { return map[string]any{"path": e.work + "-evil/x"} }, per("", "", "", "outside-roots"), nil},
	{"read secret absolute", "read_file", func(e *env) map[string]any { return map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")} }, per("", "denylist", "denylist", "denylist"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if mode != "off" && strings.Contains(fmt.Sprint(r.Content, r.StructuredContent), "SECRET") {
				t.Errorf("%s: secret leaked", mode)
			}
			if mode != "off" && strings.Contains(text(r), e.home) {
				t.Errorf("%s: the denial echoes a host path: %s", mode, text(r))
			}
		}},
	{"read secret through worktree symlink", "read_file", func(e *env) map[string]any { return map[string]any{"path": "key-link"} }, per("", "denylist", "denylist", "outside-roots"), nil},
	{"read via a/../ trick", "read_file", func(e *env) map[string]any { return map[string]any{"path": "sub/../README"} }, per("", "", "", ""), nil},
	{"read /proc environ", "read_file", func(e *env) map[string]any { return map[string]any{"path": "/proc/self/environ"} }, per("", "denylist", "denylist", "denylist"), nil},
	{"read tilde path", "read_file", func(e *env) map[string]any { return map[string]any{"path": "~/.ssh/id_rsa"} }, per("invalid-path", "invalid-path", "invalid-path", "invalid-path"), nil},
	{"read NUL path", "read_file", func(e *env) map[string]any { return map[string]any{"path": "READ\x00ME"} }, per("invalid-path", "invalid-path", "invalid-path", "invalid-path"), nil},
	{"read FIFO", "read_file", func(e *env) map[string]any { return map[string]any{"path": "fifo"} }, per("not-regular", "not-regular", "not-regular", "not-regular"), nil},
	{"write worktree", "write_file", func(e *env) map[string]any { return map[string]any{"path": "new.txt", "content": "new\n"} }, per("", "read-only-mode", "", ""),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			_, err := os.Stat(filepath.Join(e.work, "new.txt"))
			if (err == nil) != (mode != "read-only") {
				t.Errorf("%s: new.txt exists=%v", mode, err == nil)
			}
		}},
	{"write nested new dirs", "write_file", func(e *env) map[string]any { return map[string]any{"path": "a/b/c.txt", "content": "x"} }, per("", "read-only-mode", "", ""), nil},
	{"write sibling", "write_file", func(e *env) map[string]any { return map[string]any{"path": "../sibling/new", "content": "x"} }, per("", "read-only-mode", "outside-roots", "outside-roots"), nil},
	{"write home", "write_file", func(e *env) map[string]any {
		return map[string]any{"path": filepath.Join(e.home, "new"), "content": "x"}
	}, per("", "read-only-mode", "outside-roots", "outside-roots"), nil},
	{"write git config", "write_file", func(e *env) map[string]any { return map[string]any{"path": ".git/config", "content": "[core]\n"} }, per("", "git-metadata", "git-metadata", "git-metadata"), nil},
	{"write git hook, odd case", "write_file", func(e *env) map[string]any {
		return map[string]any{"path": ".GIT/hooks/pre-commit", "content": "#!/bin/sh\n"}
	}, per("", "git-metadata", "git-metadata", "git-metadata"), nil},
	{"write through symlink", "write_file", func(e *env) map[string]any { return map[string]any{"path": "sib-link", "content": "clobbered"} }, per("symlink", "read-only-mode", "symlink", "symlink"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if b, _ := os.ReadFile(filepath.Join(e.sibling, "notes")); string(b) != "sibling file\n" {
				t.Errorf("%s: the symlink target was written: %q", mode, b)
			}
		}},
	{"write dangling symlink", "write_file", func(e *env) map[string]any { return map[string]any{"path": "dangle", "content": "x"} }, per("symlink", "read-only-mode", "symlink", "symlink"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if _, err := os.Stat(filepath.Join(e.sibling, "created-by-dangle")); err == nil {
				t.Errorf("%s: a file was created outside through a dangling symlink", mode)
			}
		}},
	{"write through symlinked dir", "write_file", func(e *env) map[string]any { return map[string]any{"path": "sibdir-link/x", "content": "x"} }, per("symlink", "read-only-mode", "symlink", "symlink"), nil},
	{"write hard link", "write_file", func(e *env) map[string]any { return map[string]any{"path": "hard", "content": "replaced"} }, per("", "read-only-mode", "", ""),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if b, _ := os.ReadFile(filepath.Join(e.sibling, "hard-target")); mode != "off" && string(b) != "outside\n" {
				t.Errorf("%s: writing a hard link changed the file outside: %q", mode, b)
			}
		}},
	{"write scratch", "write_file", func(e *env) map[string]any { return map[string]any{"path": "SCRATCH/f", "content": "x"} }, per("", "", "", ""), nil},
	{"list worktree", "list_dir", func(e *env) map[string]any { return map[string]any{"path": ".", "depth": 2} }, per("", "", "", ""),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if !strings.Contains(text(r), "README") || !strings.Contains(text(r), "sib-link -> ") {
				t.Errorf("%s: listing %q", mode, text(r))
			}
		}},
	{"list home", "list_dir", func(e *env) map[string]any { return map[string]any{"path": e.home} }, per("", "", "", "outside-roots"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if mode != "off" && mode != "restricted" && (strings.Contains(text(r), ".ssh") || !strings.Contains(text(r), "notes.txt")) {
				t.Errorf("%s: home listing must omit masked entries and keep the rest: %q", mode, text(r))
			}
		}},
	{"glob worktree", "glob", func(e *env) map[string]any { return map[string]any{"pattern": "**/README"} }, per("", "", "", ""), nil},
	{"glob secrets", "glob", func(e *env) map[string]any { return map[string]any{"pattern": ".ssh/*", "path": e.home} }, per("", "", "", "outside-roots"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if mode != "off" && strings.Contains(text(r), "id_rsa") {
				t.Errorf("%s: glob found a masked file: %s", mode, text(r))
			}
		}},
	{"grep secrets", "grep", func(e *env) map[string]any { return map[string]any{"pattern": "SECRET", "path": e.home} }, per("", "", "", "outside-roots"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if mode != "off" && strings.Contains(text(r), "SECRET") {
				t.Errorf("%s: grep read a masked file: %s", mode, text(r))
			}
		}},
	{"grep worktree", "grep", func(e *env) map[string]any {
		return map[string]any{"pattern": "worktree file", "output_mode": "files"}
	}, per("", "", "", ""),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if !strings.Contains(text(r), "README") {
				t.Errorf("%s: grep missed README: %s", mode, text(r))
			}
		}},
	{"edit worktree", "edit_file", func(e *env) map[string]any {
		return map[string]any{"path": "README", "edits": []any{map[string]any{"old_text": "worktree", "new_text": "edited"}}}
	}, per("", "read-only-mode", "", ""), nil},
	{"patch add", "apply_patch", func(e *env) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n*** Add File: added.txt\n+hello\n*** End Patch\n"}
	}, per("", "read-only-mode", "", ""), nil},
	{"patch escaping ..", "apply_patch", func(e *env) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n*** Add File: ../sibling/evil\n+x\n*** End Patch\n"}
	}, per("error", "error", "error", "error"),
		func(t *testing.T, e *env, mode string, r *mcp.CallToolResult) {
			if _, err := os.Stat(filepath.Join(e.sibling, "evil")); err == nil {
				t.Errorf("%s: a patch wrote outside the worktree", mode)
			}
		}},
	{"patch absolute", "apply_patch", func(e *env) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n*** Add File: /tmp/evener-evil\n+x\n*** End Patch\n"}
	}, per("error", "error", "error", "error"), nil},
}

// TestMCPFileToolsModeTable runs every file-tool case in every mode as both
// identities over a real MCP stdio connection.
func TestMCPFileToolsModeTable(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range append([]string{"off"}, modes...) {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				seedSecrets(t, e)
				initRepo(t, e.work)
				writeFile(t, filepath.Join(e.work+"-evil", "x"), "prefix sibling\n")
				writeFile(t, filepath.Join(e.sibling, "hard-target"), "outside\n")
				must(t, os.Link(filepath.Join(e.sibling, "hard-target"), filepath.Join(e.work, "hard")))
				must(t, os.Symlink(filepath.Join(e.home, ".ssh", "id_rsa"), filepath.Join(e.work, "key-link")))
				must(t, os.Symlink(filepath.Join(e.sibling, "notes"), filepath.Join(e.work, "sib-link")))
				must(t, os.Symlink(filepath.Join(e.sibling, "created-by-dangle"), filepath.Join(e.work, "dangle")))
				must(t, os.Symlink(e.sibling, filepath.Join(e.work, "sibdir-link")))
				must(t, syscallMkfifo(filepath.Join(e.work, "fifo")))
				mustMkdir(t, filepath.Join(e.work, "sub"))
				m := e.mcp(t, "--sandbox", mode, "--sandbox-net", "off")
				scratch := scratchOf(t, m)
				for _, c := range fileCases {
					args := c.args(e)
					if p, ok := args["path"].(string); ok && strings.HasPrefix(p, "SCRATCH/") {
						args["path"] = filepath.Join(scratch, strings.TrimPrefix(p, "SCRATCH/"))
					}
					r := m.call(t, c.tool, args)
					want := c.want[mode]
					switch {
					case want == "" && r.IsError:
						t.Errorf("%s (%s): refused, want allowed: %s", c.name, mode, text(r))
					case want == "error" && !r.IsError:
						t.Errorf("%s (%s): allowed, want an error", c.name, mode)
					case want != "" && want != "error" && !denied(t, r, want):
						t.Errorf("%s (%s): want denial %q, got isError=%v %v %s", c.name, mode, want, r.IsError, structured(t, r), text(r))
					}
					if c.check != nil {
						c.check(t, e, mode, r)
					}
				}
			})
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// scratchOf reads the session's scratch directory out of the preamble.
func scratchOf(t *testing.T, m *mcpConn) string {
	t.Helper()
	for _, l := range strings.Split(m.init.Instructions, "\n") {
		if rest, ok := strings.CutPrefix(l, "- scratch directory: "); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no scratch directory in the preamble:\n%s", m.init.Instructions)
	return ""
}
