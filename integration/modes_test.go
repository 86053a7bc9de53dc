//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// probeOp is one read or write a sandboxed shell attempts, with the outcome
// the README's mode table requires in each mode.
type probeOp struct {
	name   string
	script func(e *env) string // exits 0 when the operation succeeded
	want   map[string]bool     // mode -> allowed
}

func all(v bool) map[string]bool {
	return map[string]bool{"off": v, "read-only": v, "workspace-write": v, "restricted": v}
}

func table(off, ro, ww, rs bool) map[string]bool {
	return map[string]bool{"off": off, "read-only": ro, "workspace-write": ww, "restricted": rs}
}

var modeOps = []probeOp{
	{"read worktree", func(e *env) string { return "grep -q 'worktree file' " + q(e.work, "README") }, all(true)},
	{"read sibling project", func(e *env) string { return "grep -q 'sibling file' " + q(e.sibling, "notes") }, table(true, true, true, false)},
	{"read home file", func(e *env) string { return "grep -q 'home file' " + q(e.home, "notes.txt") }, table(true, true, true, false)},
	{"read system root", func(e *env) string { return "test -s /etc/passwd && grep -q root /etc/passwd" }, all(true)},
	{"list home", func(e *env) string { return "ls " + q(e.home) + " | grep -q notes.txt" }, table(true, true, true, false)},
	{"write worktree", func(e *env) string { return "echo x > " + q(e.work, "new-file") }, table(true, false, true, true)},
	{"mkdir worktree", func(e *env) string { return "mkdir " + q(e.work, "new-dir") }, table(true, false, true, true)},
	{"write sibling project", func(e *env) string { return "echo x > " + q(e.sibling, "new-file") }, table(true, false, false, false)},
	{"write home", func(e *env) string { return "echo x > " + q(e.home, "new-file") }, table(true, false, false, false)},
	{"write add-dir", func(e *env) string { return "echo x > " + q(e.root, "extra", "new-file") }, table(true, false, true, false)},
	{"write scratch (TMPDIR)", func(e *env) string {
		return `test -n "$TMPDIR" && echo x > "$TMPDIR/f" && test "$TMPDIR" = "$EVENER_SCRATCH_DIR"`
	}, table(true, true, true, true)},
	{"write private /tmp", func(e *env) string { return "echo x > /tmp/evener-private-probe" }, all(true)},
	{"write system root", func(e *env) string { return "echo x > /etc/evener-probe" }, table(false, false, false, false)},
}

// TestModeTable runs every row of the README's mode table for spawned
// processes, in every mode, as root and as an unprivileged user.
func TestModeTable(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range append([]string{"off"}, modes...) {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				mustMkdir(t, filepath.Join(e.root, "extra"))
				var script strings.Builder
				for i, op := range modeOps {
					fmt.Fprintf(&script, "if ( %s ) 2>/dev/null; then echo 'op%d:ok'; else echo 'op%d:refused'; fi\n", op.script(e), i, i)
				}
				r := e.sh(t, mode, script.String(), "--add-dir", filepath.Join(e.root, "extra"))
				if r.code != 0 {
					t.Fatalf("script failed: %s", r)
				}
				for i, op := range modeOps {
					want := op.want[mode]
					if mode == "off" && id.root && op.name == "write system root" {
						want = true // off is the user's own access, and root may write /etc
						defer os.Remove("/etc/evener-probe")
					}
					got := strings.Contains(r.stdout, fmt.Sprintf("op%d:ok", i))
					if !strings.Contains(r.stdout, fmt.Sprintf("op%d:", i)) {
						t.Fatalf("%s: no outcome printed\n%s", op.name, r)
					}
					if got != want {
						t.Errorf("%s in %s: allowed=%v, want %v", op.name, mode, got, want)
					}
				}
				// The private /tmp never reaches the host's /tmp.
				if mode != "off" {
					if _, err := os.Stat("/tmp/evener-private-probe"); err == nil {
						t.Errorf("a sandboxed write to /tmp reached the host /tmp")
					}
				} else {
					os.Remove("/tmp/evener-private-probe")
				}
				// Writes the table refuses left nothing behind.
				for _, p := range []string{filepath.Join(e.sibling, "new-file"), filepath.Join(e.home, "new-file")} {
					if _, err := os.Stat(p); (err == nil) != (mode == "off") {
						t.Errorf("%s exists=%v after mode %s", p, err == nil, mode)
					}
				}
			})
		}
	})
}

// TestStartupLine checks the one-line report for each mode and network
// decision, and that it is printed before the command's own output.
func TestStartupLine(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		for _, mode := range modes {
			for _, net := range []string{"on", "off"} {
				r := e.run(t, "exec", "--sandbox", mode, "--sandbox-net", net, "--", "sh", "-c", "echo out; echo err >&2")
				line := startupLine(r)
				wantPrefix := "sandbox: bwrap enforcing " + mode + " (network " + net
				if !strings.HasPrefix(line, wantPrefix) || !strings.Contains(line, "secrets masked") {
					t.Errorf("%s/%s: startup line %q, want prefix %q", mode, net, line, wantPrefix)
				}
				if !strings.HasPrefix(r.stderr, "sandbox:") {
					t.Errorf("%s/%s: the startup line is not the first thing on stderr:\n%s", mode, net, r.stderr)
				}
				wantCache := map[string]string{"read-only": "cache none", "workspace-write": "cache private", "restricted": "cache private"}[mode]
				if !strings.Contains(line, wantCache) {
					t.Errorf("%s: startup line %q does not say %q (this bwrap has no overlay)", mode, line, wantCache)
				}
				if r.stdout != "out\n" || r.code != 0 {
					t.Errorf("%s/%s: %s", mode, net, r)
				}
			}
		}
	})
}

// TestExitCodePassesThrough checks exec exits with the command's code.
func TestExitCodePassesThrough(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		for _, code := range []int{0, 1, 3, 42} {
			r := e.sh(t, "workspace-write", fmt.Sprintf("exit %d", code))
			if r.code != code {
				t.Errorf("exit %d came back as %d\n%s", code, r.code, r)
			}
		}
		r := e.run(t, "exec", "--sandbox", "workspace-write", "--", "sh", "-c", "kill -9 $$")
		if r.code != 137 {
			t.Errorf("a command killed by SIGKILL exited %d, want 137\n%s", r.code, r)
		}
		r = e.runIn(t, e.work, []byte("piped input\n"), "exec", "--sandbox", "restricted", "--", "cat")
		if r.stdout != "piped input\n" {
			t.Errorf("stdin did not reach the command: %s", r)
		}
	})
}

// q joins path elements and single-quotes the result for sh.
func q(parts ...string) string {
	return "'" + strings.ReplaceAll(filepath.Join(parts...), "'", `'\''`) + "'"
}
