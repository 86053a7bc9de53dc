//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// droppedCapsMask is the capabilities a server started by root gives up
// (confine's serverDroppedCaps: CAP_CHOWN, CAP_DAC_OVERRIDE,
// CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_LINUX_IMMUTABLE,
// CAP_MKNOD).
const droppedCapsMask = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<9 | 1<<27

// capLines are the /proc status capability lines the builds must agree on.
var capLines = []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}

// TestCgoBuild: binaries built the toolchain's default way where a C
// compiler exists (cgo on, as `go install .../cmd/...@latest` builds them)
// start as root and as a user: `help`, `probe`, `exec` and a stdio session
// with a shell call work, and the capability sets of every server thread
// and of a sandboxed command are those the CGO_ENABLED=0 build (the
// suite's binPath) gives. The server holds none of the dropped file
// capabilities, and a root server's read_file of another user's 0600 file
// fails in both builds.
func TestCgoBuild(t *testing.T) {
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath(strings.Fields(string(cc) + " gcc")[0]); err != nil {
		t.Skipf("no C compiler (%s): the toolchain builds without cgo here", strings.TrimSpace(string(cc)))
	}
	dir := filepath.Join(baseDir, "cgo")
	mustMkdir(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "../cmd/evener-mcp", "../cmd/evener-mcp-server", "../cmd/evener-mcp-inside")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with cgo: %v\n%s", err, out)
	}
	cgoBin := filepath.Join(dir, "evener-mcp")
	for _, b := range []string{cgoBin, filepath.Join(dir, "evener-mcp-server")} {
		out, err := exec.Command("go", "version", "-m", b).Output()
		if err != nil || !strings.Contains(string(out), "CGO_ENABLED=1") {
			t.Fatalf("%s is not a cgo build: %v\n%s", b, err, out)
		}
	}

	forEachIdentity(t, func(t *testing.T, id runAs) {
		want := capsOfBuild(t, id, "CGO_ENABLED=0", binPath)
		got := capsOfBuild(t, id, "CGO_ENABLED=1", cgoBin)
		t.Logf("server CapEff %s, shell CapEff %s", got["server CapEff"], got["shell CapEff"])
		for _, who := range []string{"server", "shell"} {
			for _, k := range capLines {
				if got[who+" "+k] != want[who+" "+k] {
					t.Errorf("%s %s: cgo build %s, CGO_ENABLED=0 build %s", who, k, got[who+" "+k], want[who+" "+k])
				}
			}
		}
		if id.root {
			eff, err := strconv.ParseUint(got["server CapEff"], 16, 64)
			if err != nil || eff == 0 || eff&droppedCapsMask != 0 {
				t.Errorf("root server's CapEff %s: want every capability but %#x", got["server CapEff"], droppedCapsMask)
			}
		}
	})
}

// capsOfBuild runs the checks every build must pass with the evener-mcp
// binary bin as id (a subtest called name), and returns the capability lines of the stdio
// server's threads ("server CapEff", ...; the threads must agree) and of
// a command its shell tool ran ("shell CapEff", ...).
func capsOfBuild(t *testing.T, id runAs, name, bin string) map[string]string {
	t.Helper()
	saved := binPath
	binPath = bin // the suite's tests run one at a time (none is parallel)
	defer func() { binPath = saved }()
	caps := map[string]string{}
	t.Run(name, func(t *testing.T) {
		e := newEnv(t, id)
		secret := filepath.Join(e.work, "other-users-key")
		writeFile(t, secret, "PRIVATE KEY 7781\n")
		if r := e.run(t, "help"); r.code != 0 || !strings.Contains(r.stderr, "usage:") {
			t.Fatalf("help: %s", r)
		}
		if r := e.run(t, "probe"); r.code != 0 || !strings.Contains(r.stdout, "mount plan") {
			t.Fatalf("probe: %s", r)
		}
		if r := e.sh(t, "workspace-write", "cat README"); r.code != 0 || r.stdout != "worktree file\n" {
			t.Fatalf("exec: %s", r)
		}
		m := e.mcp(t)
		// After the fixture is the identity's: another user's 0600 file.
		if err := os.Chmod(secret, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(secret, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		r := m.call(t, "shell", map[string]any{"command": "grep '^Cap' /proc/self/status; echo markers=$(env | grep -c EVENER_MCP_DROP_CAPS)"})
		if r.IsError {
			t.Fatalf("shell: %s\nstderr:\n%s", text(r), m.stderr.String())
		}
		out := text(r)
		for _, k := range capLines {
			caps["shell "+k] = capLine(out, k)
			if caps["shell "+k] == "" {
				t.Errorf("shell: no %s in %q", k, out)
			}
		}
		if !strings.Contains(out, "markers=0") {
			t.Errorf("the capability marker reached a sandboxed command: %q", out)
		}
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(m.cmd.Process.Pid) + "/task")
		if err != nil || len(tasks) == 0 {
			t.Fatalf("server threads: %v", err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(m.cmd.Process.Pid) + "/task/" + task.Name() + "/status")
			if err != nil {
				continue // the thread exited
			}
			for _, k := range capLines {
				v := capLine(string(b), k)
				if prev, ok := caps["server "+k]; ok && prev != v {
					t.Errorf("server thread %s: %s %s, another thread %s", task.Name(), k, v, prev)
				}
				caps["server "+k] = v
			}
		}
		if r := m.call(t, "read_file", map[string]any{"path": "other-users-key"}); !r.IsError || strings.Contains(text(r), "7781") {
			t.Errorf("read_file of another user's 0600 file: %s", text(r))
		}
	})
	return caps
}

// capLine is the value of one "CapXxx:\t<hex>" line of a status file.
func capLine(status, key string) string {
	for l := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
