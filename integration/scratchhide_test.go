//go:build linux

package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestScratchHiddenFromOtherServers (issue 13 item 10): two stdio servers
// of the same user on the same host, each with its scratch in the host's
// /tmp. A command of server A leaves a file in its scratch; server B's
// file tools cannot read it, list it, glob it or grep it, though B's user
// owns it (B's shell never sees it: its /tmp is private). B's own scratch
// stays usable.
func TestScratchHiddenFromOtherServers(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "TMPDIR=/tmp")
		a := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		scrA := strings.TrimSpace(a.shellOut(t, `printf 'scratch-secret-4711\n' > "$TMPDIR/a.txt" && printf '%s' "$TMPDIR"`))
		if !strings.HasPrefix(scrA, "/tmp/evener-mcp-") {
			t.Fatalf("server A's scratch is %q; want one in /tmp", scrA)
		}
		for _, mode := range []string{"read-only", "workspace-write"} {
			t.Run(mode, func(t *testing.T) {
				b := e.mcp(t, "--sandbox", mode, "--sandbox-net", "off")
				if r := b.call(t, "read_file", map[string]any{"path": filepath.Join(scrA, "a.txt")}); !r.IsError || strings.Contains(text(r), "4711") {
					t.Errorf("B read A's scratch: %s", text(r))
				}
				if r := b.call(t, "list_dir", map[string]any{"path": scrA}); !r.IsError {
					t.Errorf("B listed A's scratch: %s", text(r))
				}
				if r := b.call(t, "list_dir", map[string]any{"path": "/tmp"}); strings.Contains(text(r), filepath.Base(scrA)) {
					t.Errorf("B's listing of /tmp names A's scratch: %s", text(r))
				}
				if r := b.call(t, "glob", map[string]any{"pattern": "evener-mcp-*/a.txt", "path": "/tmp"}); strings.Contains(text(r), "a.txt") {
					t.Errorf("B's glob found A's file: %s", text(r))
				}
				if r := b.call(t, "grep", map[string]any{"pattern": "scratch-secret-4711", "path": scrA, "literal": true}); strings.Contains(text(r), "a.txt") || strings.Contains(text(r), "4711") && !r.IsError {
					t.Errorf("B's grep found A's file: %s", text(r))
				}
				if out := b.shellOut(t, "cat "+filepath.Join(scrA, "a.txt")+" 2>&1; true"); strings.Contains(out, "4711") {
					t.Errorf("B's shell read A's scratch: %s", out)
				}
				// B's own scratch: written by its shell, read by its file tools.
				scrB := strings.TrimSpace(b.shellOut(t, `printf 'mine\n' > "$TMPDIR/b.txt" && printf '%s' "$TMPDIR"`))
				if r := b.call(t, "read_file", map[string]any{"path": filepath.Join(scrB, "b.txt")}); r.IsError || !strings.Contains(text(r), "mine") {
					t.Errorf("B cannot read its own scratch: %s", text(r))
				}
			})
		}
	})
}
