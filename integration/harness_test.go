//go:build linux

// Package integration drives the built evener-mcp binary against the real
// kernel: real bubblewrap, real processes, real files. Every boundary case
// runs twice, as root (how CI runs) and as an unprivileged user (how users
// run), and a case that holds for only one of them fails.
package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testUser is the unprivileged account the suite creates when run as root.
const testUser = "evener-test"

var (
	binPath string // the built evener-mcp
	baseDir string // world-traversable root of every fixture
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	// Not under /tmp: sandboxes get a private /tmp, which would hide the
	// fixtures and let every "cannot read" case pass for the wrong reason.
	baseDir, err = os.MkdirTemp("/var/tmp", "evener-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(baseDir)
	if err := os.Chmod(baseDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binPath = filepath.Join(baseDir, "evener-mcp")
	// The three binaries, side by side, as scripts/run.sh installs them.
	build := exec.Command("go", "build", "-o", baseDir+"/", "../cmd/evener-mcp", "../cmd/evener-mcp-server", "../cmd/evener-mcp-inside")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if os.Getenv("EVENER_IT_RACE") != "" {
		// A developer's knob: the server built with the race detector.
		build = exec.Command("go", "build", "-race", "-o", baseDir+"/", "../cmd/evener-mcp", "../cmd/evener-mcp-server", "../cmd/evener-mcp-inside")
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build evener-mcp:", err)
		return 1
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup(testUser); err != nil {
			out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/bash", testUser).CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "useradd %s: %v: %s\n", testUser, err, out)
				return 1
			}
		}
	}
	return m.Run()
}

// runAs is one identity the server is started as.
type runAs struct {
	name     string
	uid, gid int
	root     bool
}

// identities returns root and the unprivileged test user when the suite
// runs as root, else only the current user (the root half is then skipped,
// and says so).
func identities(t testing.TB) []runAs {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not running as root: the root half of each case is skipped")
		return []runAs{{name: "self", uid: os.Getuid(), gid: os.Getgid()}}
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatalf("lookup %s: %v", testUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return []runAs{{name: "root", root: true}, {name: "user", uid: uid, gid: gid}}
}

// forEachIdentity runs f once per identity as a subtest.
func forEachIdentity(t *testing.T, f func(t *testing.T, id runAs)) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) { f(t, id) })
	}
}

// env is one test's world: a fake HOME full of secrets, a worktree, a
// sibling project, all owned by the identity that starts the server.
type env struct {
	id      runAs
	root    string // fixture root
	home    string
	work    string
	sibling string
	extra   []string // extra environment for the server
	// prefix, when set, starts the server through another program (the
	// server's path and arguments follow it).
	prefix []string
}

// newEnv lays out a fixture owned by id.
func newEnv(t testing.TB, id runAs) *env {
	t.Helper()
	root, err := os.MkdirTemp(baseDir, "t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceRemove(root) })
	e := &env{id: id, root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work"), sibling: filepath.Join(root, "sibling")}
	for _, d := range []string{e.home, e.work, e.sibling} {
		mustMkdir(t, d)
	}
	writeFile(t, filepath.Join(e.work, "README"), "worktree file\n")
	writeFile(t, filepath.Join(e.sibling, "notes"), "sibling file\n")
	writeFile(t, filepath.Join(e.home, "notes.txt"), "home file\n")
	return e
}

// chown hands the fixture to the identity (after the test wrote it as root).
func (e *env) chown(t testing.TB) {
	t.Helper()
	if e.id.root || os.Geteuid() != 0 {
		return
	}
	err := filepath.Walk(e.root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, e.id.uid, e.id.gid)
	})
	if err != nil {
		t.Fatalf("chown fixture: %v", err)
	}
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run starts the binary as the fixture's identity with args, in the
// worktree, with HOME pointing at the fake home. A run is bounded in time.
func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return e.runIn(t, e.work, nil, args...)
}

func (e *env) runIn(t *testing.T, dir string, stdin []byte, args ...string) result {
	t.Helper()
	e.chown(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	if len(e.prefix) > 0 {
		cmd = exec.CommandContext(ctx, e.prefix[0], append(append(e.prefix[1:len(e.prefix):len(e.prefix)], binPath), args...)...)
	}
	cmd.Dir = dir
	cmd.Env = e.serverEnv(t)
	if !e.id.root && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String(), code: cmd.ProcessState.ExitCode()}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("start %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v timed out\n%s", args, r)
	}
	return r
}

// serverEnv is the environment the server starts with: HOME at the fake
// home, XDG directories inside it so nothing real is read, a TMPDIR owned by
// the identity, then e.extra (a later entry wins).
func (e *env) serverEnv(t testing.TB) []string {
	t.Helper()
	tmp := filepath.Join(e.root, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if !e.id.root && os.Geteuid() == 0 {
		_ = os.Chown(tmp, e.id.uid, e.id.gid)
	}
	race := []string{}
	if v := os.Getenv("EVENER_MCP_SESSION_SANDBOX"); v != "" {
		// The experimental session sandbox (docs/speed.md), when the
		// run asks for it: every server test then runs in it.
		race = append(race, "EVENER_MCP_SESSION_SANDBOX="+v)
	}
	if os.Getenv("EVENER_IT_RACE") != "" {
		race = append(race, "GORACE=halt_on_error=1")
	}
	return append(append(race,
		"HOME="+e.home,
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"LANG=C.UTF-8",
		"USER="+e.id.name,
		"XDG_CONFIG_HOME="+filepath.Join(e.home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(e.home, ".local", "state"),
		"TMPDIR="+tmp,
	), e.extra...)
}

// sh runs a shell script under `exec` in the given mode with the network off.
func (e *env) sh(t *testing.T, mode, script string, flags ...string) result {
	t.Helper()
	args := append([]string{"exec", "--sandbox", mode, "--sandbox-net", "off"}, flags...)
	args = append(args, "--", "/bin/sh", "-c", script)
	return e.run(t, args...)
}

func mustMkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func forceRemove(dir string) {
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// startupLine returns the first stderr line starting with "sandbox:".
func startupLine(r result) string {
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "sandbox:") {
			return l
		}
	}
	return ""
}

var modes = []string{"read-only", "workspace-write", "restricted"}
