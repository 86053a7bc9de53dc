//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPShell: a fresh sandbox per call, exit codes, streamed progress,
// head-and-tail truncation, timeouts that kill the tree, and violations
// attributed to the call that met them.
func TestMCPShell(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		seedSecrets(t, e)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")

		r := m.call(t, "shell", map[string]any{"command": "echo out; echo err >&2; exit 3"})
		s := structured(t, r)
		if r.IsError || s["exit_code"] != float64(3) || !strings.Contains(s["output"].(string), "out\n") || !strings.Contains(s["output"].(string), "err\n") {
			t.Errorf("exit code/output: %v %s", s, text(r))
		}

		// A fresh sandbox per call: a background process does not survive
		// into the next call, and /tmp is private to each call.
		m.call(t, "shell", map[string]any{"command": "echo kept > /tmp/marker; (setsid sleep 333 &) ; echo started"})
		r = m.call(t, "shell", map[string]any{"command": "cat /tmp/marker 2>&1; pgrep -c sleep || true"})
		if out := structured(t, r)["output"].(string); strings.Contains(out, "kept") {
			t.Errorf("a previous call's /tmp is visible: %q", out)
		}
		if n := thrCountArgv("sleep", "333"); n != 0 {
			t.Errorf("%d detached sleeps survived their call", n)
		}

		// Streaming: progress notifications carry the output as it comes.
		r = m.call(t, "shell", map[string]any{"command": "for i in 1 2 3; do echo tick-$i; sleep 0.2; done"})
		m.mu.Lock()
		streamed := strings.Join(m.progress, "")
		m.mu.Unlock()
		if !strings.Contains(streamed, "tick-1") || !strings.Contains(streamed, "tick-3") {
			t.Errorf("no progress notifications carried the output: %q", streamed)
		}

		// Output cap: 3 MiB of output keeps the head and the tail with a
		// marker in between.
		r = m.call(t, "shell", map[string]any{"command": "echo FIRST-LINE; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST-LINE"})
		s = structured(t, r)
		out := s["output"].(string)
		if s["truncated"] != true || !strings.Contains(out, "FIRST-LINE") || !strings.Contains(out, "LAST-LINE") || !strings.Contains(out, "bytes of output omitted") || len(out) > 1<<20+200 {
			t.Errorf("truncation: truncated=%v len=%d", s["truncated"], len(out))
		}

		// Timeout: trap-TERM loop and a detached child, killed together.
		start := time.Now()
		r = m.call(t, "shell", map[string]any{"command": "(setsid sleep 334 &); trap '' TERM; while :; do :; done", "timeout_ms": 700})
		s = structured(t, r)
		if s["timed_out"] != true || time.Since(start) > 15*time.Second {
			t.Errorf("timeout: %v after %s", s, time.Since(start))
		}
		if n := thrCountArgv("sleep", "334"); n != 0 {
			t.Errorf("%d sleeps survived the timeout", n)
		}

		// Violations: refusals the command met, attributed to this call.
		r = m.call(t, "shell", map[string]any{"command": "touch /etc/evener-x; cat " + filepath.Join(e.home, ".ssh", "id_rsa") + "; mv .git .g 2>&1 || true; git init -q 2>&1 || true"})
		s = structured(t, r)
		v, _ := s["violations"].([]any)
		joined := ""
		for _, x := range v {
			vm := x.(map[string]any)
			joined += vm["action"].(string) + ":" + vm["target"].(string) + " "
		}
		if !strings.Contains(joined, "file-write:/etc/evener-x") || !strings.Contains(joined, "id_rsa") {
			t.Errorf("violations not attributed: %v\n%s", v, s["output"])
		}

		// The workdir argument: relative to the worktree, never outside it.
		mustMkdir(t, filepath.Join(e.work, "subdir"))
		e.chown(t)
		r = m.call(t, "shell", map[string]any{"command": "pwd", "workdir": "subdir"})
		if out := structured(t, r)["output"].(string); strings.TrimSpace(out) != filepath.Join(e.work, "subdir") {
			t.Errorf("workdir: %q", out)
		}
		r = m.call(t, "shell", map[string]any{"command": "pwd", "workdir": "../sibling"})
		if !r.IsError {
			t.Errorf("a workdir outside the worktree was accepted: %s", text(r))
		}

		// The audit log saw the calls, with no secret path in it.
		b, err := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
		if err != nil || !strings.Contains(string(b), `"tool":"shell"`) {
			t.Errorf("audit log: %v %q", err, b)
		}
	})
}

// TestMCPDelegateFloor: a session whose tools include no mutation tool runs
// its shell read-only, even when the server's mode would let it write.
func TestMCPDelegateFloor(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range []string{"workspace-write", "off", "restricted"} {
			e := newEnv(t, id)
			m := e.mcp(t, "--sandbox", mode, "--sandbox-net", "off", "--tools", "read_file,grep,glob,list_dir,shell")
			want := "sandbox: read-only"
			if mode == "restricted" {
				// Restricted keeps its narrower reads and blocks writes.
				want = "sandbox: restricted with writes blocked"
				if r := m.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); !denied(t, r, "outside-roots") {
					t.Errorf("restricted delegate read the sibling: %s", text(r))
				}
				if out := structured(t, m.call(t, "shell", map[string]any{"command": "cat ../sibling/notes; echo scratch > $TMPDIR/s && cat $TMPDIR/s"}))["output"].(string); strings.Contains(out, "sibling file") || !strings.Contains(out, "scratch") {
					t.Errorf("restricted delegate's shell: %q", out)
				}
			}
			if !strings.Contains(m.init.Instructions, want) {
				t.Errorf("%s: the preamble does not say %q:\n%s", mode, want, m.init.Instructions)
			}
			if !waitFor(5*time.Second, func() bool {
				return strings.Contains(m.stderr.String(), "read-only") || strings.Contains(m.stderr.String(), "writes blocked")
			}) {
				t.Errorf("%s: the startup line does not say the floor:\n%s", mode, m.stderr.String())
			}
			r := m.call(t, "shell", map[string]any{"command": "echo x > planted.txt; cat README"})
			if _, err := os.Stat(filepath.Join(e.work, "planted.txt")); err == nil {
				t.Errorf("%s: a read-only delegate's shell wrote the worktree", mode)
			}
			if !strings.Contains(structured(t, r)["output"].(string), "worktree file") {
				t.Errorf("%s: the delegate's shell cannot read: %s", mode, text(r))
			}
		}
	})
}
