//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Terminals over MCP (docs/terminals.md, "Terminals"), as root and as the
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

// proc is one process, told apart from a later one with the same pid by
// its start time.
type proc struct {
	pid   int
	start string
}

// procStat is a process's state and start time (fields 3 and 22 of
// /proc/<pid>/stat).
func procStat(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}

// ownProcs lists the processes below server (its descendants: only what
// this test's server started, other servers run on the machine) whose
// command line contains marker ("" for all of them).
func ownProcs(server int, marker string) []proc {
	var out []proc
	for _, p := range descendants(server) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			continue
		}
		if _, start, ok := procStat(p); ok {
			out = append(out, proc{p, start})
		}
	}
	return out
}

// running lists those of ps still running (wherever they were moved in
// the process tree since), zombies aside.
func running(ps []proc) []proc {
	var out []proc
	for _, p := range ps {
		if state, start, ok := procStat(p.pid); ok && start == p.start && state != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// ownHolders are server's loopback holders themselves (argv[1] is the
// hidden subcommand), not the bubblewraps around them.
func ownHolders(server int) []proc {
	var out []proc
	for _, p := range ownProcs(server, "__loopback-hold") {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
		if argv := strings.Split(string(b), "\x00"); len(argv) > 1 && argv[1] == "__loopback-hold" {
			out = append(out, p)
		}
	}
	return out
}

// waitOwn waits (bounded) for a process of server's with marker and
// returns them all.
func waitOwn(t *testing.T, server int, marker string) []proc {
	t.Helper()
	var ps []proc
	if !waitFor(10*time.Second, func() bool { ps = ownProcs(server, marker); return len(ps) > 0 }) {
		t.Fatalf("no process %q below the server", marker)
	}
	return ps
}

// waitGone waits (bounded) until none of ps runs.
func waitGone(t *testing.T, ps []proc, what string) {
	t.Helper()
	if !waitFor(5*time.Second, func() bool { return len(running(ps)) == 0 }) {
		t.Errorf("%s left processes running: %v", what, running(ps))
	}
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
		pid := m.cmd.Process.Pid

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
		if hs := ownProcs(pid, "__loopback-hold"); len(hs) != 0 {
			t.Errorf("a loopback holder runs before any terminal: %v", hs)
		}
		repl := m.termStart(t, map[string]any{"command": "/usr/bin/python3 -q"})
		// A root server's session holds its loopback in a holder process;
		// a user server's holder ends once its namespaces are open (the
		// server's descriptors keep them; docs/terminals.md, "Terminals").
		if hs := ownHolders(pid); id.root && len(hs) != 1 || !id.root && len(hs) != 0 {
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
		bgProcs := append(waitOwn(t, pid, "sleep 1041"), waitOwn(t, pid, "sleep 1042")...)
		if r := m.call(t, "terminal_close", map[string]any{"id": bg}); r.IsError {
			t.Fatalf("terminal_close: %s", text(r))
		}
		waitGone(t, bgProcs, "terminal_close")
		if r := m.call(t, "terminal_read", map[string]any{"id": bg}); !r.IsError {
			t.Error("a closed terminal can still be read")
		}

		// The session's end ends every terminal, and the loopback holder:
		// everything the server started.
		m.termStart(t, map[string]any{"command": "sleep 1043"})
		waitOwn(t, pid, "sleep 1043")
		if id.root {
			waitOwn(t, pid, "__loopback-hold")
		}
		all := ownProcs(pid, "")
		m.c.Close()
		waitGone(t, all, "the session's end")
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
// a protected path stays unchanged whatever it tries (docs/protected-paths.md, "Protected
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
		pid := srv.cmd.Process.Pid
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})
		a.termStart(t, map[string]any{"command": "sleep 1061"})
		b.termStart(t, map[string]any{"command": "sleep 1062"})
		aProcs, bProcs := waitOwn(t, pid, "sleep 1061"), waitOwn(t, pid, "sleep 1062")
		a.c.Close() // DELETE
		waitGone(t, aProcs, "DELETE")
		if len(running(bProcs)) == 0 {
			t.Fatal("another session's terminal ended with the first")
		}
		// b makes no call: it idles out, and its terminal with it.
		if !waitFor(15*time.Second, func() bool { return len(running(bProcs)) == 0 }) {
			t.Error("idle expiry left the session's terminal running")
		}
		c := srv.mustConnect(t, clientOpts{})
		c.termStart(t, map[string]any{"command": "sleep 1063"})
		waitOwn(t, pid, "sleep 1063")
		all := ownProcs(pid, "")
		srv.stop(t) // SIGTERM
		waitGone(t, all, "SIGTERM")
	})
}

// cpuTicks is a process's CPU time so far (utime and stime, fields 14 and
// 15 of /proc/<pid>/stat), in clock ticks (100 a second).
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("the server's CPU time: %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return ut + st
}

// serverIdle fails if the server then uses more than 0.1 s of CPU a
// second (measured over 2 s).
func serverIdle(t *testing.T, pid int, after string) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	before := cpuTicks(t, pid)
	time.Sleep(2 * time.Second)
	used := cpuTicks(t, pid) - before
	t.Logf("after %s the server used %d ms of CPU in 2 s", after, used*10)
	if used > 20 {
		t.Errorf("after %s the server used %d ms of CPU in 2 s", after, used*10)
	}
}

// callWithin is a tool call bounded by d (an error when it takes longer).
func (m *mcpConn) callWithin(d time.Duration, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return m.c.CallTool(ctx, req)
}

// screenAnswers reads the screen view (waiting up to 1 s) until it shows
// want, and fails if a read takes more than 10 s to answer.
func (m *mcpConn) screenAnswers(t *testing.T, id, want string) {
	t.Helper()
	var last string
	for i := 0; i < 10; i++ {
		start := time.Now()
		r, err := m.callWithin(20*time.Second, "terminal_read", map[string]any{"id": id, "view": "screen", "wait_ms": 1000})
		if took := time.Since(start); err != nil || took > 10*time.Second {
			t.Errorf("terminal_read view=screen answered after %s (wait_ms 1000): %v", took.Round(time.Millisecond), err)
			return
		}
		if r.IsError {
			t.Fatalf("terminal_read: %s", text(r))
		}
		if last = structured(t, r)["text"].(string); strings.Contains(last, want) {
			return
		}
	}
	t.Errorf("the screen never showed %q:\n%s", want, last)
}

// TestTerminalOutputBombs: output built to make the server's screen
// emulator work without end or wait on the program: fourteen bytes asking
// to repeat a character 2^31 times, and 200,000 device-attribute queries
// from a program in raw mode that never reads the answers. The screen
// view answers within its wait; after terminal_close, and after the
// session's DELETE, the server is idle; SIGTERM ends it within the drain
// timeout, a bomb running and a screen read in flight. Output past a
// terminal's share of the server's CPU degrades its screen view only.
func TestTerminalOutputBombs(t *testing.T) {
	rep := `printf 'A\033[2147483646b'; sleep 1071`
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--drain-timeout", "1s")
		pid := srv.cmd.Process.Pid
		m := srv.mustConnect(t, clientOpts{})
		for _, p := range []struct{ cmd, shows string }{
			{rep, strings.Repeat("A", 80)},
			{`stty raw -echo; yes $'\033[c' | tr -d '\n' | head -c 600000; echo; echo asked-$((6*7)); sleep 1072`, "asked-42"},
		} {
			tid := m.termStart(t, map[string]any{"command": p.cmd, "cols": 80, "rows": 24})
			m.screenAnswers(t, tid, p.shows)
			if r, err := m.callWithin(20*time.Second, "terminal_close", map[string]any{"id": tid}); err != nil || r.IsError {
				t.Fatalf("terminal_close: %v %v", err, r)
			}
			serverIdle(t, pid, "terminal_close")
		}

		// Output past the terminal's share of the server's CPU: the screen
		// view says it is degraded, the output view has it all.
		flood := m.termStart(t, map[string]any{"command": `yes | head -c 5000000; echo flooded-$((6*7)); sleep 1073`, "cols": 500, "rows": 200})
		m.termUntil(t, flood, "flooded-42")
		if r, err := m.callWithin(20*time.Second, "terminal_read", map[string]any{"id": flood, "view": "screen"}); err != nil || r.IsError {
			t.Errorf("terminal_read view=screen: %v %v", err, r)
		} else if st := structured(t, r); st["screen_degraded"] != true || !strings.Contains(text(r), "screen degraded") {
			t.Errorf("the flood's screen view does not say it is degraded: %v\n%s", st["screen_degraded"], text(r))
		}
		if r, err := m.callWithin(20*time.Second, "terminal_close", map[string]any{"id": flood}); err != nil || r.IsError {
			t.Fatalf("terminal_close: %v %v", err, r)
		}
		serverIdle(t, pid, "terminal_close of the flood")

		d := srv.mustConnect(t, clientOpts{})
		d.termStart(t, map[string]any{"command": rep})
		time.Sleep(500 * time.Millisecond)
		d.c.Close() // DELETE
		serverIdle(t, pid, "the session's DELETE")

		f := srv.mustConnect(t, clientOpts{})
		tid := f.termStart(t, map[string]any{"command": rep})
		time.Sleep(500 * time.Millisecond)
		// With the output read, the screen read waits its 3 s: in flight.
		f.call(t, "terminal_read", map[string]any{"id": tid})
		go func() {
			_, _ = f.callWithin(30*time.Second, "terminal_read", map[string]any{"id": tid, "view": "screen", "wait_ms": 3000})
		}()
		time.Sleep(200 * time.Millisecond)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		termed := time.Now()
		select {
		case <-srv.done:
			t.Logf("SIGTERM ended the server in %s", time.Since(termed).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Errorf("SIGTERM (drain timeout 1 s) did not end the server within 10 s:\n%s", srv.stderr.String())
			_ = srv.cmd.Process.Kill()
		}
	})
}
