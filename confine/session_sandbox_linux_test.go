//go:build linux

package confine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sessionLauncher is a workspace-write, network-off launcher whose eligible
// commands run in the session sandbox (SessionSandboxEnv).
func sessionLauncher(t *testing.T) (*Launcher, fixture) {
	t.Helper()
	return sessionLauncherUnder(t, "/var/tmp")
}

// sessionLauncherUnder is sessionLauncher with the fixture under parent.
func sessionLauncherUnder(t *testing.T, parent string) (*Launcher, fixture) {
	t.Helper()
	t.Setenv(SessionSandboxEnv, "1")
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	f := newFixtureUnder(t, parent)
	p, err := Resolve(f.spec(ModeWorkspaceWrite, NetworkOff), h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.StartSpawner()
	return s, f
}

// runSh runs a shell script in s and returns its output.
func runSh(t *testing.T, s *Launcher, script string) (string, Result) {
	t.Helper()
	var out bytes.Buffer
	res, err := s.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return out.String(), res
}

// TestSessionSandboxRuns: a command in the session sandbox gets its exit
// code, its output, its working directory, a scrubbed environment, no
// capabilities, no_new_privs, seccomp, a PID namespace of its own with its
// own /proc; the session's holder is built once.
func TestSessionSandboxRuns(t *testing.T) {
	s, f := sessionLauncher(t)
	out, res := runSh(t, s, `echo hi; pwd; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; ls /proc | grep -cE '^[0-9]+$'; echo $$; exit 3`)
	if res.ExitCode != 3 {
		t.Fatalf("exit %d, out %q", res.ExitCode, out)
	}
	for _, want := range []string{"hi\n", f.work + "\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	first := currentBox(s)
	if first == nil {
		t.Fatal("no session sandbox was built")
	}
	// Nothing of the holder's is open in the command: its three standard
	// descriptors and the one ls reads the directory through.
	if fds, _ := runSh(t, s, `ls /proc/self/fd | tr '\n' ' '`); fds != "0 1 2 3 " {
		t.Errorf("descriptors open in the command: %q", fds)
	}
	out2, res2 := runSh(t, s, `env`)
	if res2.ExitCode != 0 || strings.Contains(out2, SessionSandboxEnv) {
		t.Errorf("env: exit %d, %q", res2.ExitCode, out2)
	}
	again := currentBox(s)
	if again != first {
		t.Error("an unchanged plan built a new holder")
	}
	t.Logf("%s", out)
}

// childServerSetup is what a test that starts this test binary again as a
// server (its child, made to run by childEnv) needs: it skips in the child
// and where there is no sandbox, and returns the binary and a directory
// an unprivileged child can use.
func childServerSetup(t *testing.T, childEnv string) (exe, dir string) {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	if h := Probe(ProbeFull, os.Environ()); h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, dir
}

// currentBox is the session's holder now.
func currentBox(s *Launcher) *sessionBox {
	s.sb.mu.Lock()
	defer s.sb.mu.Unlock()
	return s.sb.box
}

// TestSessionSandboxCallsApart: two calls of one session run in one holder
// but cannot see or signal each other: the second sees only its own
// processes in /proc, and its `kill -9 -1` leaves the first one's process
// tree running; the first then finishes normally.
func TestSessionSandboxCallsApart(t *testing.T) {
	s, f := sessionLauncher(t)
	runSh(t, s, "true") // the holder, built
	first := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		res, err := s.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c",
			`sleep 60 & echo $! > bg-pid; : > a-started; i=0; while [ ! -e b-done ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; kill -0 $(cat bg-pid) && echo bg-alive; exit 0`},
			Stdout: &out, Stderr: &out, Timeout: 45 * time.Second})
		if err != nil {
			first <- "error: " + err.Error()
			return
		}
		first <- out.String() + "exit=" + res.Signal + string(rune('0'+res.ExitCode%10))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(f.work, "a-started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, res := runSh(t, s, `for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\0' ' '; echo; done; kill -9 -1; echo killed=$?`)
	if strings.Contains(out, "sleep 60") || strings.Contains(out, "b-done") {
		t.Errorf("the second call sees the first one's processes:\n%s", out)
	}
	if res.ExitCode != 0 && res.Signal == "" {
		t.Logf("second call: exit %d", res.ExitCode)
	}
	mustWrite(t, filepath.Join(f.work, "b-done"), "")
	select {
	case got := <-first:
		if !strings.Contains(got, "bg-alive") || !strings.HasSuffix(got, "exit=0") {
			t.Errorf("the first call was disturbed by the second's kill -9 -1: %q", got)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the first call did not end")
	}
}

// TestSessionSandboxCredentialAppears: a credential file created between
// two calls is masked in the second (its plan differs, so the holder is
// built again before it runs).
func TestSessionSandboxCredentialAppears(t *testing.T) {
	s, f := sessionLauncher(t)
	key := filepath.Join(f.home, ".ssh", "id_ed25519")
	out, _ := runSh(t, s, "cat "+key+" 2>&1; echo end")
	if strings.Contains(out, "SECRET") {
		t.Fatalf("secret before it was written: %q", out)
	}
	before := currentBox(s)
	mustWrite(t, key, "SECRET\n")
	out, _ = runSh(t, s, "cat "+key+" 2>&1; echo end")
	if strings.Contains(out, "SECRET") {
		t.Errorf("a credential file that appeared between calls was readable in the next: %q", out)
	}
	if currentBox(s) == before {
		t.Error("the holder was not rebuilt for the new plan")
	}
}

// TestSessionSandboxNestedRepoPinned: a repository created in the worktree
// between two calls is pinned in the second (its config read-only), and the
// git sweep still runs after the call: a git dir the call renamed is set
// aside, as after a bubblewrap of its own.
func TestSessionSandboxNestedRepoPinned(t *testing.T) {
	s, f := sessionLauncher(t)
	runSh(t, s, "true")
	before := currentBox(s)
	nested := filepath.Join(f.work, "sub")
	gitRepo(t, f.home, nested)
	cfg := readFile(t, filepath.Join(nested, ".git", "config"))
	out, res := runSh(t, s, `echo '[core]' >> sub/.git/config && echo wrote-config; echo end`)
	if strings.Contains(out, "wrote-config") {
		t.Errorf("the nested repository was not pinned in the next call: %q", out)
	}
	if got := readFile(t, filepath.Join(nested, ".git", "config")); got != cfg {
		t.Errorf("the nested config changed: %q", got)
	}
	if currentBox(s) == before {
		t.Error("the holder was not rebuilt for the new plan")
	}
	out, res = runSh(t, s, `mv sub/.git sub/.git-moved && echo moved-git`)
	if strings.Contains(out, "moved-git") && len(res.Quarantined) == 0 {
		t.Errorf("a git dir renamed in the session sandbox was not swept: %q %+v", out, res)
	}
}

// TestSessionSandboxMaskDetached: a credential file the host replaces by a
// rename between two calls (which detaches the holder's mask over it) is
// still masked in the next call: the holder is built again.
func TestSessionSandboxMaskDetached(t *testing.T) {
	s, f := sessionLauncher(t)
	key := filepath.Join(f.home, ".claude", ".credentials.json") // masked file-exact
	mustWrite(t, key, "OLD-SECRET\n")
	out, _ := runSh(t, s, "cat "+key+" 2>&1; grep -c . /proc/self/mountinfo; echo end")
	t.Logf("first: %q", out)
	if strings.Contains(out, "SECRET") {
		t.Fatalf("the credential was readable: %q", out)
	}
	before := currentBox(s)
	mustWrite(t, key+".new", "NEW-SECRET\n")
	if err := os.Rename(key+".new", key); err != nil {
		t.Fatal(err)
	}
	out, _ = runSh(t, s, "cat "+key+" 2>&1; grep -c . /proc/self/mountinfo; echo end")
	t.Logf("second: %q", out)
	if strings.Contains(out, "SECRET") {
		t.Errorf("a credential renamed into place between calls was readable in the next: %q", out)
	}
	if currentBox(s) == before {
		t.Error("the holder was not rebuilt")
	}
}

// TestSessionSandboxTimeout: a call's timeout kills its whole tree, a
// process that left its session (setsid) included; the session's next
// call runs.
func TestSessionSandboxTimeout(t *testing.T) {
	s, _ := sessionLauncher(t)
	var out bytes.Buffer
	res, err := s.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c", "setsid sleep 41.75 & sleep 41.75"},
		Stdout: &out, Stderr: &out, Timeout: 500 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Fatalf("run: %v, %+v", err, res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, _ := exec.Command("pgrep", "-f", "sleep 41.75").Output()
		if len(bytes.TrimSpace(left)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left running after the timeout: %s", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, res := runSh(t, s, "echo next"); out != "next\n" || res.ExitCode != 0 {
		t.Errorf("the next call: %q %+v", out, res)
	}
}

// TestSessionSandboxProcMasks: the slot's own /proc carries the plan's
// masks (the call's init's memory is covered: nothing is read from it) and
// bubblewrap's read-only covers.
func TestSessionSandboxProcMasks(t *testing.T) {
	s, _ := sessionLauncher(t)
	out, _ := runSh(t, s, "head -c16 /proc/1/mem 2>/dev/null | wc -c; grep -c ' /proc/1/mem ' /proc/self/mountinfo; (echo 1 > /proc/sys/kernel/ns_last_pid) 2>/dev/null && echo wrote-sysctl; echo end")
	if out != "0\n1\nend\n" {
		t.Errorf("%q", out)
	}
	if os.Geteuid() == 0 {
		// A root server's plan: host kernel state masked, /proc read-only.
		out, _ = runSh(t, s, "cat /proc/keys 2>/dev/null | wc -c; grep -c ' /proc/keys ' /proc/self/mountinfo; awk '$5==\"/proc\" {print $6}' /proc/self/mountinfo | tail -1 | cut -c1-2")
		if out != "0\n1\nro\n" {
			t.Errorf("root's /proc plan: %q", out)
		}
	}
}

// TestSessionSandboxNotFound: a command that is not there ends with 127
// and says so, like a bubblewrap's execvp failure; the next call runs.
func TestSessionSandboxNotFound(t *testing.T) {
	s, _ := sessionLauncher(t)
	var out bytes.Buffer
	res, err := s.Run(context.Background(), Command{Args: []string{"no-such-command-here"}, Stdout: &out, Stderr: &out, Timeout: 20 * time.Second})
	if err != nil || res.ExitCode != 127 || !strings.Contains(out.String(), "no-such-command-here") {
		t.Errorf("%v %+v %q", err, res, out.String())
	}
	if out, _ := runSh(t, s, "echo next"); out != "next\n" {
		t.Errorf("next: %q", out)
	}
}

// TestSessionSandboxPrivateTmp: each call has a /tmp and a /dev/shm of its
// own, as with a bubblewrap per call; what the plan binds below /tmp (here
// the worktree and the scratch) is there, writable, in every call.
func TestSessionSandboxPrivateTmp(t *testing.T) {
	s, f := sessionLauncherUnder(t, "/tmp")
	out, _ := runSh(t, s, "echo kept > /tmp/marker; echo kept > /dev/shm/marker; echo w > in-work; echo s > $TMPDIR/in-scratch; echo ok")
	if out != "ok\n" {
		t.Fatalf("first call: %q", out)
	}
	out, _ = runSh(t, s, "cat /tmp/marker /dev/shm/marker 2>/dev/null; cat in-work $TMPDIR/in-scratch")
	if out != "w\ns\n" {
		t.Errorf("second call: %q, want only the worktree's and the scratch's files", out)
	}
	if readFile(t, filepath.Join(f.work, "in-work")) != "w\n" {
		t.Error("the worktree write did not reach the host")
	}
}

// TestSessionSandboxSecondLayer: where the Landlock layer holds (the
// startup line says so), a command in the session sandbox runs under it
// as a per-call spawn does: it cannot create a file in the sandbox's /dev,
// which bubblewrap's own /dev would allow.
func TestSessionSandboxSecondLayer(t *testing.T) {
	s, _ := sessionLauncher(t)
	if !landlockOn(s.Policy()) {
		t.Skipf("no second layer here: %s", s.Policy().SecondLayer())
	}
	out, res := runSh(t, s, `touch /dev/evener-second-layer 2>&1; echo rc=$?; touch "$TMPDIR/ok" && echo tmp-ok`)
	if res.ExitCode != 0 || strings.Contains(out, "rc=0") || !strings.Contains(out, "tmp-ok") {
		t.Fatalf("exit %d: %q; want the /dev create refused and the scratch writable", res.ExitCode, out)
	}
	if currentBox(s) == nil {
		t.Fatal("the command did not run in the session sandbox")
	}
}

// TestSessionSandboxOutlivesItsThread: the holder is started from whichever
// OS thread the call's goroutine ran on, and Go ends a thread whose locked
// goroutine returns (a root server's per-session cgroup thread does, at
// every session's end). A parent-death signal follows that thread, not
// the server: with one, every call of the session died with another
// session's end (TestHTTPLoad, docs/speed.md). The holder must outlive
// the thread that built it and end only when the server lets it go.
func TestSessionSandboxOutlivesItsThread(t *testing.T) {
	s, _ := sessionLauncher(t)
	done := make(chan struct{})
	tid := 0
	onOwnThread(func() { // never unlocked: the thread ends with f
		defer close(done)
		tid = unix.Gettid()
		if out, res := runSh(t, s, "echo built"); res.ExitCode != 0 || out != "built\n" {
			t.Errorf("first call: %d %q", res.ExitCode, out)
		}
	})
	<-done
	if !waitGone(fmt.Sprintf("/proc/self/task/%d", tid), 5*time.Second) {
		t.Fatal("the thread that built the holder did not end")
	}
	b := currentBox(s)
	if b == nil {
		t.Fatal("no session sandbox was built")
	}
	// A death signal would have reached the holder's bubblewrap by now.
	time.Sleep(200 * time.Millisecond)
	select {
	case <-b.exited:
		t.Fatal("the holder ended with the thread that started it")
	default:
	}
	if out, res := runSh(t, s, "echo again"); res.ExitCode != 0 || out != "again\n" {
		t.Errorf("a call after the thread ended: %d %q", res.ExitCode, out)
	}
	if currentBox(s) != b {
		t.Errorf("the holder was rebuilt: the first one ended")
	}
}

// TestSessionSandboxSlotDiesIdle: an idle slot that dies (one started
// while a fork bomb holds the session's process bound cannot make its
// runtime's threads) is replaced by the spawner: the next call finds a
// slot in the same holder, not a timeout. Every idle slot is killed, three
// times over.
func TestSessionSandboxSlotDiesIdle(t *testing.T) {
	s, _ := sessionLauncher(t)
	if out, res := runSh(t, s, "echo built"); res.ExitCode != 0 || out != "built\n" {
		t.Fatalf("first call: %d %q", res.ExitCode, out)
	}
	b := currentBox(s)
	for round := range 3 {
		var slots []int
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if slots = liveChildren(b.spawner); len(slots) == slotsIdle {
				break
			}
		}
		if len(slots) != slotsIdle {
			t.Fatalf("round %d: the spawner has %d live children, want %d idle slots", round, len(slots), slotsIdle)
		}
		for _, pid := range slots {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil {
				t.Fatalf("kill slot %d: %v", pid, err)
			}
		}
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if !slices.ContainsFunc(liveChildren(b.spawner), func(p int) bool { return slices.Contains(slots, p) }) {
				break
			}
		}
		if out, res := runSh(t, s, fmt.Sprintf("echo after-%d", round)); res.ExitCode != 0 || out != fmt.Sprintf("after-%d\n", round) {
			t.Fatalf("round %d: a call after its idle slots died: %d %q", round, res.ExitCode, out)
		}
	}
	if currentBox(s) != b {
		t.Error("the holder was rebuilt: its spawner did not replace the slots")
	}
}

// TestSessionSandboxNoSlotRebuilt: a holder whose spawner cannot start a
// slot (stopped here, its idle slots killed) fails the call it did not
// take, and the next call gets a new holder instead of the same timeout.
func TestSessionSandboxNoSlotRebuilt(t *testing.T) {
	s, _ := sessionLauncher(t)
	if _, res := runSh(t, s, "true"); res.ExitCode != 0 {
		t.Fatalf("first call: %d", res.ExitCode)
	}
	b := currentBox(s)
	if err := unix.Kill(b.spawner, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Kill(b.spawner, unix.SIGKILL) })
	for _, pid := range liveChildren(b.spawner) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	var out bytes.Buffer
	_, err := s.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c", "echo lost"}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "did not take the call") {
		t.Fatalf("a call with no slot: %v, %q", err, out.String())
	}
	if got, res := runSh(t, s, "echo next"); res.ExitCode != 0 || got != "next\n" {
		t.Fatalf("the next call: %d %q", res.ExitCode, got)
	}
	if currentBox(s) == b {
		t.Error("the next call ran in the holder that took no call")
	}
	if out.Len() != 0 {
		t.Errorf("the call that was not taken wrote %q", out.String())
	}
}

// liveChildren lists pid's children (of every one of its threads) that
// are not zombies.
func liveChildren(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(data)) {
			stat, err := os.ReadFile("/proc/" + f + "/stat")
			if err != nil {
				continue
			}
			if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
				continue
			}
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// waitGone waits until path no longer exists, at most d.
func waitGone(path string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return true
		}
	}
	return false
}

// sbChildEnv makes TestSessionSandboxChild run: the server whose death
// TestSessionSandboxEndsWithServer plays.
const sbChildEnv = "EVENER_SB_TEST_CHILD"

// TestSessionSandboxChild is a server: it builds a session sandbox under
// the directory sbChildEnv names, says its holder's pid and waits to be
// killed.
func TestSessionSandboxChild(t *testing.T) {
	dir := os.Getenv(sbChildEnv)
	if dir == "" {
		t.Skip("the child of TestSessionSandboxEndsWithServer")
	}
	s, _ := sessionLauncherUnder(t, dir)
	if _, res := runSh(t, s, "true"); res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	b := currentBox(s)
	fmt.Printf("holder %d %d\n", b.cmd.Process.Pid, b.spawner)
	time.Sleep(time.Minute)
}

// TestSessionSandboxEndsWithServer: with no parent-death signal
// (TestSessionSandboxOutlivesItsThread), a server killed with SIGKILL
// still takes its holder with it: the spawner's stdin closes.
func TestSessionSandboxEndsWithServer(t *testing.T) {
	exe, dir := childServerSetup(t, sbChildEnv)
	cmd := exec.Command(exe, "-test.run=^TestSessionSandboxChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), sbChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var bwrap, spawner int
	got := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, err := fmt.Sscanf(sc.Text(), "holder %d %d", &bwrap, &spawner); err == nil {
				got <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		got <- fmt.Errorf("the child said no holder pid: %v", sc.Err())
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child built no session sandbox within 60 s")
	}
	for _, pid := range []int{bwrap, spawner} {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Fatalf("pid %d is not alive before the kill: %v", pid, err)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, pid := range []int{bwrap, spawner} {
		// The bwrap was the child's child: reparented to init (or a
		// subreaper), which reaps it; the spawner ends with its stdin.
		if !waitGone(fmt.Sprintf("/proc/%d/stat", pid), 10*time.Second) && !zombie(pid) {
			t.Errorf("pid %d of the holder outlived its server by 10 s", pid)
		}
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(rest, "Z")
}

// TestSessionSandboxEndBeforeAwait: a slot execs its command without
// waiting for the server, so a quick command can end, and the spawner
// report it, before the server has read the slot's hello and awaits it.
// The end is kept for the await (it was lost before: the call then waited
// for ever); an unclaimed one is dropped after earlyKept.
func TestSessionSandboxEndBeforeAwait(t *testing.T) {
	b := &sessionBox{waiters: map[int]chan uint32{}}
	r, w := io.Pipe()
	done := make(chan struct{})
	go func() { b.readReports(bufio.NewReader(r)); close(done) }()
	fmt.Fprintf(w, "42 %d\n", 7<<8) // ended with exit 7, before anyone awaits it
	fmt.Fprintf(w, "43 %d\n", 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.wmu.Lock()
		n := len(b.early)
		b.wmu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the early ends were not kept")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case ws := <-b.await(42):
		if ws != 7<<8 {
			t.Errorf("status %#x, want %#x", ws, 7<<8)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an end reported before its await was lost")
	}
	// Awaited first, reported after: delivered as before.
	ch := b.await(44)
	fmt.Fprintf(w, "44 %d\n", 3<<8)
	select {
	case ws := <-ch:
		if ws != 3<<8 {
			t.Errorf("status %#x, want %#x", ws, 3<<8)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an awaited end was not delivered")
	}
	// 43 was never claimed: once older than earlyKept, the next report
	// drops it.
	b.wmu.Lock()
	e := b.early[43]
	e.at = e.at.Add(-2 * earlyKept)
	b.early[43] = e
	b.wmu.Unlock()
	fmt.Fprintf(w, "45 %d\n", 0)
	w.Close()
	<-done
	b.wmu.Lock()
	_, kept := b.early[43]
	b.wmu.Unlock()
	if kept {
		t.Error("an unclaimed end was kept past earlyKept")
	}
}

// TestSessionSandboxQuickCalls: many short calls, four at a time, each get
// their own exit status and output, none lost or mixed up (the slot does
// not wait for the server, so most of these end before the server has read
// their hello).
func TestSessionSandboxQuickCalls(t *testing.T) {
	s, _ := sessionLauncher(t)
	runSh(t, s, "true")
	const calls, par = 80, 4
	errs := make(chan error, calls)
	sem := make(chan struct{}, par)
	for i := range calls {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			var out bytes.Buffer
			res, err := s.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i%50)}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
			switch {
			case err != nil:
				errs <- fmt.Errorf("call %d: %v", i, err)
			case res.ExitCode != i%50 || out.String() != fmt.Sprintf("%d\n", i):
				errs <- fmt.Errorf("call %d: exit %d, output %q", i, res.ExitCode, out.String())
			default:
				errs <- nil
			}
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
