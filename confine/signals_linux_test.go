//go:build linux

package confine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sigChildEnv makes TestSignalsDefaultChild run: a server started with
// SIGINT and SIGHUP ignored.
const sigChildEnv = "EVENER_SIG_TEST_CHILD"

// TestSignalsDefaultChild says whether it was started with SIGINT and
// SIGHUP ignored, then what a command sees of them in the session sandbox
// and in a bubblewrap of its own.
func TestSignalsDefaultChild(t *testing.T) {
	dir := os.Getenv(sigChildEnv)
	if dir == "" {
		t.Skip("the child of TestSignalsDefault")
	}
	fmt.Printf("server-ignores %v %v\n", signal.Ignored(syscall.SIGINT), signal.Ignored(syscall.SIGHUP))
	s, _ := sessionLauncherUnder(t, dir)
	for _, where := range []string{"session", "per-call"} {
		if where == "per-call" {
			t.Setenv(SessionSandboxEnv, "0")
		}
		out, res := runSh(t, s, "grep '^SigIgn:' /proc/self/status")
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d: %q", where, res.ExitCode, out)
		}
		fmt.Printf("%s %s", where, out)
	}
	// The server itself still ignores them.
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
	time.Sleep(100 * time.Millisecond)
	fmt.Println("server survived")
}

// TestSignalsDefault: a server started with SIGINT and SIGHUP ignored (in
// the background of a non-interactive shell, or under nohup) starts its
// commands with both at their default, in the session sandbox and per
// call; the server itself still ignores them (a SIGINT sent to it does not
// end it). C-c in a terminal depends on it (terminal's TestInterrupt).
func TestSignalsDefault(t *testing.T) {
	exe, dir := childServerSetup(t, sigChildEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// trap '' leaves the signals ignored, and exec keeps them so.
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", `trap '' INT HUP; exec "$0" -test.run='^TestSignalsDefaultChild$' -test.count=1 -test.v`, exe)
	cmd.Env = append(os.Environ(), sigChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	seen := map[string]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			seen[k] = strings.TrimSpace(v)
		}
	}
	if seen["server-ignores"] != "true true" {
		t.Fatalf("the child was not started with SIGINT and SIGHUP ignored (%q): this test would prove nothing\n%s", seen["server-ignores"], out)
	}
	if seen["server"] != "survived" {
		t.Errorf("the server was ended by a SIGINT or SIGHUP it was started ignoring\n%s", out)
	}
	for _, where := range []string{"session", "per-call"} {
		v := strings.TrimPrefix(seen[where], "SigIgn:")
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			t.Fatalf("%s: no SigIgn line (%q)\n%s", where, seen[where], out)
		}
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
			if mask&(1<<(uint(sig)-1)) != 0 {
				t.Errorf("%s: a command starts with %v ignored (SigIgn %016x)", where, sig, mask)
			}
		}
	}
}
