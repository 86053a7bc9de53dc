package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// noUserNSPrefix starts the server inside a user namespace that refuses
// nested ones (bubblewrap's --disable-userns): the server's own bubblewrap
// cannot create a user namespace, as in a container with the engine's
// default seccomp profile or under a hardened CI runner.
func noUserNSPrefix(t *testing.T) []string {
	t.Helper()
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap not installed")
	}
	if landlockABI() < 4 {
		t.Skipf("landlock ABI %d: the landlock backend needs 4 (the report is unit-tested)", landlockABI())
	}
	return []string{bw, "--unshare-user", "--disable-userns", "--die-with-parent", "--dev-bind", "/", "/", "--"}
}

// TestLandlockBackend (docs/security.md, "The landlock backend"): where
// bubblewrap cannot create a user namespace the default picks the
// landlock backend and says so, naming what it does not give; the file
// and secret contracts hold (credentials unreadable by the shell, writes
// outside the worktree refused), the network off refuses every TCP
// connect, UDP and Unix sockets, the network on reaches only the proxies,
// nothing the command leaves behind outlives it, and an explicit native
// backend still refuses to start.
func TestLandlockBackend(t *testing.T) {
	srv := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.prefix = noUserNSPrefix(t)
		writeFile(t, filepath.Join(e.home, ".ssh", "id_ed25519"), "SECRET-SSH-KEY\n")
		writeFile(t, filepath.Join(e.home, ".aws", "credentials"), "SECRET-AWS\n")
		writeFile(t, filepath.Join(e.home, ".config", "gh", "hosts.yml"), "SECRET-GH\n")
		writeFile(t, filepath.Join(e.home, ".config", "tool", "settings"), "home config\n")
		if err := os.Symlink(filepath.Join(e.home, ".ssh"), filepath.Join(e.home, "keys")); err != nil {
			t.Fatal(err)
		}

		script := fmt.Sprintf(`
cat ~/.ssh/id_* ~/.aws/credentials ~/.config/gh/hosts.yml ~/keys/id_ed25519 /etc/shadow 2>/dev/null
grep -rh SECRET ~ 2>/dev/null
cat ~/notes.txt ~/.config/tool/settings README
echo x > %[1]q/new 2>/dev/null && echo WROTE-SIBLING
echo x > ~/new 2>/dev/null && echo WROTE-HOME
echo x > /tmp/evener-ll-$$ 2>/dev/null && echo WROTE-TMP
echo x > "$TMPDIR/t" && echo scratch-ok
echo x > inside && echo worktree-ok
python3 -c 'import socket; socket.create_connection(("127.0.0.1", %[2]d), timeout=3)' 2>/dev/null && echo TCP-CONNECTED
python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))' 2>/dev/null && echo UDP-SENT
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/dbus/system_bus_socket")' 2>/dev/null && echo UNIX-CONNECTED
python3 -c 'import os; os.setsid()' 2>/dev/null && echo SETSID
(sleep 300 & echo $! > bgpid)
echo DONE`, e.sibling, srv.port)
		before := srv.hits.Load()
		r := e.run(t, "exec", "--sandbox-net", "off", "--", "/bin/sh", "-c", script)
		line := startupLine(r)
		for _, want := range []string{"sandbox: landlock enforcing workspace-write (network off", "chosen because bubblewrap cannot create",
			"NOT given by this backend: no PID namespace", "no mount masking", "no private /tmp"} {
			if !strings.Contains(line, want) {
				t.Errorf("startup line %q lacks %q", line, want)
			}
		}
		if !strings.Contains(r.stdout, "DONE") {
			t.Fatalf("the command did not run to its end:\n%s", r)
		}
		for _, bad := range []string{"SECRET", "root:", "WROTE-", "TCP-CONNECTED", "UDP-SENT", "UNIX-CONNECTED", "SETSID"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("the landlock backend let %s through:\n%s", bad, r)
			}
		}
		for _, want := range []string{"home file", "home config", "worktree file", "scratch-ok", "worktree-ok"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q missing: what the mode grants was refused:\n%s", want, r)
			}
		}
		if srv.hits.Load() != before {
			t.Errorf("a TCP connect with the network off reached the host's loopback")
		}
		if _, err := os.Stat(filepath.Join(e.sibling, "new")); err == nil {
			t.Errorf("a file was written outside the worktree")
		}
		// What the command left in the background ends with it.
		if b, err := os.ReadFile(filepath.Join(e.work, "bgpid")); err != nil {
			t.Errorf("no background pid: %v", err)
		} else if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 1 {
			gone := false
			for i := 0; i < 50 && !gone; i++ {
				_, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat")
				gone = err != nil
				if !gone {
					time.Sleep(100 * time.Millisecond)
				}
			}
			if !gone {
				t.Errorf("a background process of the command outlived it (pid %d)", pid)
			}
		}

		// Git metadata is not pinned by a mount: what a command changed
		// there is set aside and the recorded one put back when it ends.
		git := func(args ...string) {
			t.Helper()
			// As the identity, unconfined: the fixture's own set-up.
			r := e.run(t, append([]string{"exec", "--sandbox", "off", "--", "git", "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
			if r.code != 0 {
				t.Fatalf("git %v:\n%s", args, r)
			}
		}
		git("init", "-q")
		git("commit", "-q", "--allow-empty", "-m", "init")
		cfgBefore, _ := os.ReadFile(filepath.Join(e.work, ".git", "config"))
		r = e.run(t, "exec", "--sandbox-net", "off", "--", "/bin/sh", "-c",
			`printf '[core]\n\tfsmonitor = touch planted\n' >> .git/config && echo > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo PLANTED;
git -c user.email=t@t -c user.name=t commit -q --allow-empty -m two && echo COMMITTED`)
		if !strings.Contains(r.stdout, "COMMITTED") {
			t.Errorf("a commit under the landlock backend:\n%s", r)
		}
		if cfg, _ := os.ReadFile(filepath.Join(e.work, ".git", "config")); string(cfg) != string(cfgBefore) {
			t.Errorf("the command's .git/config change survived it:\n%s", cfg)
		}
		if _, err := os.Lstat(filepath.Join(e.work, ".git", "hooks", "pre-commit")); err == nil {
			t.Errorf("a hook planted by the command survived it")
		}
		if strings.Contains(r.stdout, "PLANTED") {
			if _, err := os.Stat(filepath.Join(e.work, ".git", "config.evener-quarantine")); err != nil {
				t.Errorf("the changed .git/config was not set aside: %v", err)
			}
		}

		// The other modes, explicitly on this backend.
		r = e.run(t, "exec", "--sandbox-backend", "landlock", "--sandbox", "read-only", "--sandbox-net", "off", "--",
			"/bin/sh", "-c", "echo x > ro 2>/dev/null && echo WROTE; cat ~/.ssh/id_ed25519 2>/dev/null; cat README")
		if r.code != 0 || strings.Contains(r.stdout, "WROTE") || strings.Contains(r.stdout, "SECRET") || !strings.Contains(r.stdout, "worktree file") {
			t.Errorf("read-only on the landlock backend:\n%s", r)
		}
		r = e.run(t, "exec", "--sandbox-backend", "landlock", "--sandbox", "restricted", "--sandbox-net", "off", "--",
			"/bin/sh", "-c", "cat ~/notes.txt 2>/dev/null; cat README; echo y > r && echo restricted-write-ok")
		if r.code != 0 || strings.Contains(r.stdout, "home file") || !strings.Contains(r.stdout, "worktree file") || !strings.Contains(r.stdout, "restricted-write-ok") {
			t.Errorf("restricted on the landlock backend:\n%s", r)
		}

		// An explicit mode with the default backend falls back too (a
		// one-shot exec used to refuse: its launch was its probe).
		r = e.run(t, "exec", "--sandbox", "workspace-write", "--sandbox-net", "off", "--",
			"/bin/sh", "-c", "cat ~/.ssh/id_ed25519 2>/dev/null; echo x > "+e.sibling+"/new2 2>/dev/null && echo WROTE; echo explicit-ok")
		if r.code != 0 || !strings.Contains(startupLine(r), "sandbox: landlock enforcing workspace-write") || !strings.Contains(r.stdout, "explicit-ok") ||
			strings.Contains(r.stdout, "SECRET") || strings.Contains(r.stdout, "WROTE") {
			t.Errorf("exec --sandbox workspace-write with the default backend:\n%s", r)
		}

		// An explicit native backend keeps refusing to start, with or
		// without an explicit mode.
		marker := filepath.Join(e.work, "ran")
		r = e.run(t, "exec", "--sandbox-backend", "native", "--sandbox", "workspace-write", "--", "/bin/touch", marker)
		if r.code != 125 {
			t.Errorf("an explicit native backend and mode without user namespaces: %s", r)
		}
		r = e.run(t, "exec", "--sandbox-backend", "native", "--", "/bin/touch", marker)
		if r.code != 125 || !strings.Contains(r.stderr, "backend native requested") {
			t.Errorf("an explicit native backend without user namespaces: %s", r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the command ran without the requested native backend")
		}

		// probe: per backend, which guarantee holds and by which mechanism.
		r = e.run(t, "probe", "--sandbox-net", "off")
		for _, want := range []string{"backend native: unusable here: bubblewrap cannot create", "backend landlock:\n", "NOT HELD host processes hidden",
			"by landlock", "by seccomp", "by rlimit", "backend:  landlock, chosen because", "policy:   workspace-write, network off, cache private, backend landlock"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("probe lacks %q:\n%s", want, r)
			}
		}
		if r.code != 0 {
			t.Errorf("probe on the landlock backend exited %d:\n%s", r.code, r)
		}
	})
}

// TestLandlockBackendNetworkOn: with the network on, the landlock
// backend's commands reach the session's proxies and nothing else: an
// allowed destination through both proxies, a direct TCP connect refused.
func TestLandlockBackendNetworkOn(t *testing.T) {
	srv := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.prefix = noUserNSPrefix(t)
		cfg := egressFixture(t, e, fmt.Sprintf("allowed.test:%d", srv.port), fmt.Sprintf("127.0.0.1:%d", srv.port))
		script := fmt.Sprintf(`
curl -sf -m 5 http://allowed.test:%[1]d/ && echo HTTP_OK
curl -sf -m 5 -x "$ALL_PROXY" http://allowed.test:%[1]d/ && echo SOCKS_OK
curl -sf -m 5 --noproxy '*' http://127.0.0.1:%[1]d/ >/dev/null 2>&1 && echo DIRECT_REACHED
python3 -c 'import socket; socket.create_connection(("127.0.0.1", %[1]d), timeout=3)' 2>/dev/null && echo TCP-CONNECTED
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()' 2>/dev/null && echo LISTENED
echo DONE`, srv.port)
		before := srv.hits.Load()
		r := e.run(t, "exec", "--sandbox-net", "on", "--config", cfg, "--", "/bin/sh", "-c", script)
		if !strings.Contains(startupLine(r), "sandbox: landlock enforcing workspace-write (network on via allowlist proxies") ||
			!strings.Contains(startupLine(r), "filtered by port only") {
			t.Errorf("startup line: %q", startupLine(r))
		}
		for _, want := range []string{"HTTP_OK", "SOCKS_OK", "DONE"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s missing:\n%s", want, r)
			}
		}
		for _, bad := range []string{"DIRECT_REACHED", "TCP-CONNECTED", "LISTENED"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("%s with the network on through the proxies:\n%s", bad, r)
			}
		}
		if got := srv.hits.Load() - before; got != 2 {
			t.Errorf("the server saw %d requests, want 2 (both through the proxies)", got)
		}
	})
}

// TestLandlockBackendMCP: over MCP, the preamble names the backend and
// what it does not give; the shell and the file tools keep the secret
// contract (the file tools by their own layer).
func TestLandlockBackendMCP(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.prefix = noUserNSPrefix(t)
		writeFile(t, filepath.Join(e.home, ".ssh", "id_ed25519"), "SECRET-SSH-KEY\n")
		if err := os.Symlink(filepath.Join(e.home, ".ssh", "id_ed25519"), filepath.Join(e.work, "key-link")); err != nil {
			t.Fatal(err)
		}
		m := e.mcp(t, "--sandbox-net", "off")
		pre := m.preamble(t)
		for _, want := range []string{"enforced by landlock", "weaker backend (landlock: no namespaces): NOT given: no PID namespace",
			".git/config, hooks, commondir and gitdir are not read-only under this backend"} {
			if !strings.Contains(pre, want) {
				t.Errorf("preamble lacks %q:\n%s", want, pre)
			}
		}
		r := m.call(t, "shell", map[string]any{"command": "cat ~/.ssh/id_* key-link; echo x > ../outside && echo WROTE; echo ok > inside && cat inside"})
		if out := text(r); strings.Contains(out, "SECRET") || strings.Contains(out, "WROTE") || !strings.Contains(out, "ok") {
			t.Errorf("shell under the landlock backend:\n%s", out)
		}
		for _, p := range []string{"key-link", filepath.Join(e.home, ".ssh", "id_ed25519")} {
			if r := m.call(t, "read_file", map[string]any{"path": p}); !r.IsError || strings.Contains(text(r), "SECRET") {
				t.Errorf("read_file %s under the landlock backend: %s", p, text(r))
			}
		}
	})
}
