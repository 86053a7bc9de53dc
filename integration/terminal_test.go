//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Terminals over MCP (README, "Terminals"), as root and as the
// unprivileged user: what the issue asks them to show.

// termStart starts a terminal and returns its id.
func (m *mcpConn) termStart(t *testing.T, args map[string]any) string {
	t.Helper()
	r := m.call(t, "terminal_start", args)
	if r.IsError {
		t.Fatalf("terminal_start %v: %s\nstderr:\n%s", args, text(r), m.stderr.String())
	}
	s := structured(t, r)
	if s["backend"] != "bwrap" {
		t.Errorf("backend %v, want bwrap", s["backend"])
	}
	return s["id"].(string)
}

// termSend types text and keys.
func (m *mcpConn) termSend(t *testing.T, id, txt string, keys ...string) {
	t.Helper()
	args := map[string]any{"id": id, "text": txt}
	if len(keys) > 0 {
		ks := make([]any, len(keys))
		for i, k := range keys {
			ks[i] = k
		}
		args["keys"] = ks
	}
	if r := m.call(t, "terminal_send", args); r.IsError {
		t.Fatalf("terminal_send: %s", text(r))
	}
}

// termUntil reads the output view until want appears (bounded); it returns
// everything read.
func (m *mcpConn) termUntil(t *testing.T, id, want string) string {
	t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := m.call(t, "terminal_read", map[string]any{"id": id, "wait_ms": 2000})
		if r.IsError {
			t.Fatalf("terminal_read: %s", text(r))
		}
		s := structured(t, r)
		all.WriteString(s["text"].(string))
		if strings.Contains(all.String(), want) {
			return all.String()
		}
		if s["exited"] == true {
			break
		}
	}
	t.Fatalf("terminal %s never showed %q; read:\n%s", id, want, all.String())
	return ""
}

// holders are the session holders (loopback_linux.go) of this run's
// servers: the holder is this run's binary (other servers on the host have
// theirs).
func holders() []int {
	var out []int
	for _, p := range procsWith(binPath + " __loopback-hold") {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if strings.HasPrefix(string(b), binPath+"\x00__loopback-hold") {
			out = append(out, p)
		}
	}
	return out
}

// TestTerminalTools: a python REPL answers, C-c interrupts, the screen
// view places text where the program put it, the terminal is inside the
// boundary, and terminal_close and the session's end leave no process.
func TestTerminalTools(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		mustMkdir(t, filepath.Join(e.home, ".ssh"))
		writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "PLANTED-PRIVATE-KEY\n")
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")

		names, _ := listNames(t, m)
		for _, want := range []string{"terminal_start", "terminal_send", "terminal_read", "terminal_close", "terminal_list"} {
			if !strings.Contains(strings.Join(names, " "), want) {
				t.Fatalf("%s not published: %v", want, names)
			}
		}

		// No terminal yet: the shell runs as ever, with no loopback holder.
		// A root server's terminals get one. A user server's session made
		// its namespaces at its first spawn (its user namespace bounds the
		// session's processes) and holds them by descriptor: with the
		// network off its terminals need no process for their loopback.
		if out := m.shellOut(t, "echo before-terminal"); !strings.Contains(out, "before-terminal") {
			t.Fatalf("shell: %q", out)
		}
		if hs := holders(); len(hs) != 0 {
			t.Errorf("a loopback holder runs before any terminal: %v", hs)
		}
		repl := m.termStart(t, map[string]any{"command": "/usr/bin/python3 -q"})
		if hs := holders(); id.root && len(hs) != 1 || !id.root && len(hs) != 0 {
			t.Errorf("holders once a terminal runs: %v", hs)
		}
		m.termUntil(t, repl, ">>>")
		m.termSend(t, repl, "print(6*7)", "Enter")
		if out := m.termUntil(t, repl, "42"); strings.ContainsRune(out, 0x1b) {
			t.Errorf("escape bytes in the output view: %q", out)
		}

		sh := m.termStart(t, map[string]any{})
		m.termSend(t, sh, "sleep 1000; echo after-$((6*7))", "Enter")
		time.Sleep(500 * time.Millisecond)
		m.termSend(t, sh, "", "C-c")
		m.termSend(t, sh, "echo alive-$((6*7))", "Enter")
		if out := m.termUntil(t, sh, "alive-42"); strings.Contains(out, "after-42") {
			t.Errorf("C-c did not interrupt the sleep:\n%s", out)
		}

		// The boundary: no secret, no write outside the write roots.
		m.termSend(t, sh, "cat ~/.ssh/id_rsa; echo escaped > "+filepath.Join(e.sibling, "from-terminal")+"; echo done-$((1+1))", "Enter")
		if out := m.termUntil(t, sh, "done-2"); strings.Contains(out, "PLANTED-PRIVATE-KEY") {
			t.Errorf("a terminal read the planted key:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(e.sibling, "from-terminal")); err == nil {
			t.Error("a terminal wrote outside the write roots")
		}

		scr := m.termStart(t, map[string]any{"command": `printf '\033[2J\033[5;10Hhello-screen'; sleep 30`, "cols": 80, "rows": 24})
		found := false
		for i := 0; i < 20 && !found; i++ {
			r := m.call(t, "terminal_read", map[string]any{"id": scr, "wait_ms": 1000, "view": "screen"})
			s := structured(t, r)
			rows := strings.Split(s["text"].(string), "\n")
			if len(rows) >= 5 && strings.Index(rows[4], "hello-screen") == 9 {
				found = true
				if strings.ContainsRune(s["text"].(string), 0x1b) {
					t.Errorf("escape bytes in the screen view: %q", s["text"])
				}
			}
		}
		if !found {
			t.Error("the screen view never showed the text at row 5, column 10")
		}

		bg := m.termStart(t, map[string]any{"command": "sleep 1041 & sleep 1042"})
		if !waitFor(10*time.Second, func() bool { return len(procsWith("sleep 1041")) > 0 && len(procsWith("sleep 1042")) > 0 }) {
			t.Fatal("the terminal's processes never ran")
		}
		if r := m.call(t, "terminal_close", map[string]any{"id": bg}); r.IsError {
			t.Fatalf("terminal_close: %s", text(r))
		}
		if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep 104")) == 0 }) {
			t.Errorf("terminal_close left processes: %v", procsWith("sleep 104"))
		}
		if r := m.call(t, "terminal_read", map[string]any{"id": bg}); !r.IsError {
			t.Error("a closed terminal can still be read")
		}

		// The session's end ends every terminal.
		m.termStart(t, map[string]any{"command": "sleep 1043"})
		if !waitFor(10*time.Second, func() bool { return len(procsWith("sleep 1043")) > 0 }) {
			t.Fatal("sleep 1043 never ran")
		}
		m.c.Close()
		if !waitFor(5*time.Second, func() bool {
			return len(procsWith("sleep 1043")) == 0 && len(procsWith("sleep 1000")) == 0 && len(holders()) == 0
		}) {
			t.Errorf("the session ended but its terminals or loopback holder did not: %v %v", procsWith("sleep 10"), holders())
		}
	})
}

// TestTerminalReadOnly: a read-only session's terminal writes nothing,
// the worktree included.
func TestTerminalReadOnly(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		m := e.mcp(t, "--sandbox", "read-only", "--sandbox-net", "off")
		sh := m.termStart(t, map[string]any{"command": "echo x > written; cat README; echo status-$?"})
		m.termUntil(t, sh, "worktree file")
		if _, err := os.Stat(filepath.Join(e.work, "written")); err == nil {
			t.Error("a read-only session's terminal wrote into the worktree")
		}
	})
}

// TestTerminalLoopback: a server started in a terminal is reachable from
// the same session's shell, and not from the host's loopback or another
// session. With the network on, the namespace's only way out is still the
// session's proxies: a direct connection to a server outside fails, the
// allowlisted one through the proxy works.
func TestTerminalLoopback(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	outside := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, network := range []string{"off", "on"} {
			t.Run("network="+network, func(t *testing.T) {
				e := newEnv(t, id)
				flags := []string{"--sandbox", "workspace-write", "--sandbox-net", network}
				if network == "on" {
					cfg := egressFixture(t, e, fmt.Sprintf("allowed.test:%d", outside.port), fmt.Sprintf("127.0.0.1:%d", outside.port))
					flags = append(flags, "--config", cfg)
				}
				port := freePort(t)
				a := e.mcp(t, flags...)
				srv := a.termStart(t, map[string]any{"command": fmt.Sprintf("/usr/bin/python3 -m http.server %d --bind 127.0.0.1", port)})
				a.termUntil(t, srv, "Serving HTTP")

				fetch := fmt.Sprintf("curl -s -m 5 --noproxy '*' http://127.0.0.1:%d/README", port)
				if out := a.shellOut(t, fetch); !strings.Contains(out, "worktree file") {
					t.Fatalf("the session's shell did not reach its terminal's server:\n%s", out)
				}
				if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
					c.Close()
					t.Error("the host's loopback reached a terminal's server")
				}
				b := e.mcp(t, flags...)
				if out := b.shellOut(t, fetch); strings.Contains(out, "worktree file") {
					t.Error("another session reached this session's terminal server")
				}
				if network == "on" {
					before := outside.hits.Load()
					direct := a.shellOut(t, fmt.Sprintf("curl -s -m 5 --noproxy '*' http://127.0.0.1:%d/ || echo DIRECT-FAILED", outside.port))
					if !strings.Contains(direct, "DIRECT-FAILED") || outside.hits.Load() != before {
						t.Errorf("a direct connection left the session's namespace:\n%s", direct)
					}
					proxied := a.shellOut(t, fmt.Sprintf("curl -s -m 5 http://allowed.test:%d/", outside.port))
					if !strings.Contains(proxied, "LOOPBACK-OK") {
						t.Errorf("the proxies did not work beside the shared loopback:\n%s", proxied)
					}
					fromTerm := a.termStart(t, map[string]any{"command": fmt.Sprintf("curl -s -m 5 http://allowed.test:%d/", outside.port)})
					a.termUntil(t, fromTerm, "LOOPBACK-OK")
				}
			})
		}
	})
}

// freePort is a loopback port nothing listens on at the host.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestTerminalHooksAuditDelegate: terminal calls pass the hooks like any
// tool, the audit log records them without what was typed, and a delegate
// session (no file-changing tool) gets read-only terminals like its shell.
func TestTerminalHooksAuditDelegate(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		pre := blockingHook(t, filepath.Join(e.root, "hooks"), "no-forbidden-word", `*'"tool_name":"terminal_start"'*forbidden-word*`, "terminals may not say forbidden-word")
		cfg := hookConfig(t, e, "hooks", hookDef{event: "PreToolUse", matcher: "terminal_.*", command: pre})
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
		r := m.call(t, "terminal_start", map[string]any{"command": "echo forbidden-word > planted-by-blocked-terminal"})
		if !hookDenied(t, r, "terminals may not say forbidden-word") {
			t.Errorf("the hook did not block terminal_start: %s", text(r))
		}
		time.Sleep(300 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(e.work, "planted-by-blocked-terminal")); err == nil {
			t.Error("the blocked terminal ran")
		}
		sh := m.termStart(t, map[string]any{"command": "read -s pw; echo got-${#pw}"})
		m.termSend(t, sh, "hunter2-typed-secret", "Enter")
		m.termUntil(t, sh, "got-20")
		if r := m.call(t, "terminal_close", map[string]any{"id": sh}); r.IsError {
			t.Fatalf("terminal_close: %s", text(r))
		}
		audit, err := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"tool":"terminal_start"`, `"tool":"terminal_send"`, `"tool":"terminal_close"`, "keys Enter"} {
			if !strings.Contains(string(audit), want) {
				t.Errorf("the audit log lacks %s:\n%s", want, audit)
			}
		}
		if strings.Contains(string(audit), "hunter2") {
			t.Errorf("the audit log holds what was typed:\n%s", audit)
		}

		d := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--tools", "read_file,shell,terminal_start,terminal_read")
		w := d.termStart(t, map[string]any{"command": "echo x > delegate-wrote; echo status-$?"})
		d.termUntil(t, w, "status-")
		if _, err := os.Stat(filepath.Join(e.work, "delegate-wrote")); err == nil {
			t.Error("a delegate session's terminal wrote into the worktree")
		}
	})
}

// TestTerminalProtected: a terminal is a spawned process like any other:
// a protected path stays unchanged whatever it tries (README, "Protected
// paths and runner state").
func TestTerminalProtected(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		mustMkdir(t, filepath.Join(e.work, "ci"))
		writeFile(t, filepath.Join(e.work, "ci", "deploy.yml"), "original\n")
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--protect", filepath.Join(e.work, "ci"))
		sh := m.termStart(t, map[string]any{})
		m.termSend(t, sh, "echo planted > ci/deploy.yml; mv ci ci2; rm -rf ci; ln -sf ci l; echo planted > l/deploy.yml; echo attempts-$((40+2))", "Enter")
		m.termUntil(t, sh, "attempts-42")
		b, err := os.ReadFile(filepath.Join(e.work, "ci", "deploy.yml"))
		if err != nil || string(b) != "original\n" {
			t.Errorf("the protected file changed through a terminal: %q %v", b, err)
		}
	})
}

// TestTerminalHTTPSessionEnd: over Streamable HTTP, a session's terminals
// end with it however it ends (the client's DELETE, idle expiry, SIGTERM),
// and only its own: another session's terminal keeps running.
func TestTerminalHTTPSessionEnd(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--idle-timeout", "3s", "--drain-timeout", "1s")
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})
		a.termStart(t, map[string]any{"command": "sleep 1061"})
		b.termStart(t, map[string]any{"command": "sleep 1062"})
		if !waitFor(10*time.Second, func() bool { return len(procsWith("sleep 1061")) > 0 && len(procsWith("sleep 1062")) > 0 }) {
			t.Fatal("the terminals never ran")
		}
		a.c.Close() // DELETE
		if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep 1061")) == 0 }) {
			t.Error("DELETE left the session's terminal running")
		}
		if len(procsWith("sleep 1062")) == 0 {
			t.Fatal("another session's terminal ended with the first")
		}
		// b makes no call: it idles out, and its terminal with it.
		if !waitFor(15*time.Second, func() bool { return len(procsWith("sleep 1062")) == 0 }) {
			t.Error("idle expiry left the session's terminal running")
		}
		c := srv.mustConnect(t, clientOpts{})
		c.termStart(t, map[string]any{"command": "sleep 1063"})
		if !waitFor(10*time.Second, func() bool { return len(procsWith("sleep 1063")) > 0 }) {
			t.Fatal("the third terminal never ran")
		}
		srv.stop(t) // SIGTERM
		if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep 106")) == 0 && len(holders()) == 0 }) {
			t.Errorf("SIGTERM left terminals or loopback holders: %v %v", procsWith("sleep 106"), holders())
		}
	})
}
