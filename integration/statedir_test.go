//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStateDirMasked (issue 13 item 4): with --state-dir DIR, inside the
// worktree or outside it, neither a command nor the file tools can read
// the audit log there (every session's command lines and denials), in
// every mode, as root and as the user.
func TestStateDirMasked(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, place := range []string{"inside", "outside"} {
			t.Run(place, func(t *testing.T) {
				e := newEnv(t, id)
				writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "PRIVATE KEY\n")
				dir := filepath.Join(e.root, "state")
				if place == "inside" {
					dir = filepath.Join(e.work, ".evener-state")
				}
				for _, mode := range modes {
					t.Run(mode, func(t *testing.T) {
						m := e.mcp(t, "--sandbox", mode, "--sandbox-net", "off", "--state-dir", dir)
						// A denial is audited: the log now holds a record.
						if r := m.call(t, "read_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")}); !r.IsError {
							t.Fatalf("control: ~/.ssh/id_rsa readable: %s", text(r))
						}
						log := filepath.Join(dir, "audit.jsonl")
						if !waitFor(5*time.Second, func() bool { b, _ := os.ReadFile(log); return strings.Contains(string(b), "denied") }) {
							t.Fatalf("control: no audit record in %s", log)
						}
						out := m.shellOut(t, "cat "+log+" 2>/dev/null; ls -A "+dir+" 2>/dev/null; true")
						if strings.Contains(out, "denied") || strings.Contains(out, "audit.jsonl") {
							t.Errorf("the shell reads the state directory:\n%s", out)
						}
						if r := m.call(t, "read_file", map[string]any{"path": log}); !r.IsError || strings.Contains(text(r), "denied\"") {
							t.Errorf("read_file of the audit log: %s", text(r))
						}
						if r := m.call(t, "list_dir", map[string]any{"path": dir}); !r.IsError && strings.Contains(text(r), "audit") {
							t.Errorf("list_dir of the state directory: %s", text(r))
						}
						if r := m.call(t, "grep", map[string]any{"pattern": "decision", "path": dir, "literal": true}); strings.Contains(text(r), "audit.jsonl") {
							t.Errorf("grep in the state directory: %s", text(r))
						}
						if place == "inside" {
							if r := m.call(t, "grep", map[string]any{"pattern": "decision", "literal": true}); strings.Contains(text(r), "audit.jsonl") {
								t.Errorf("grep over the worktree finds the audit log: %s", text(r))
							}
						}
					})
				}
			})
		}
	})
}
