//go:build linux

package confine

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// sessionLauncher is a workspace-write, network-off launcher whose eligible
// commands run in the session sandbox (SessionSandboxEnv).
func sessionLauncher(t *testing.T) (*Launcher, fixture) {
	t.Helper()
	t.Setenv(SessionSandboxEnv, "1")
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	f := newFixtureUnder(t, "/var/tmp")
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
	s.sb.mu.Lock()
	first := s.sb.box
	s.sb.mu.Unlock()
	if first == nil {
		t.Fatal("no session sandbox was built")
	}
	out2, res2 := runSh(t, s, `env`)
	if res2.ExitCode != 0 || strings.Contains(out2, SessionSandboxEnv) {
		t.Errorf("env: exit %d, %q", res2.ExitCode, out2)
	}
	s.sb.mu.Lock()
	again := s.sb.box
	s.sb.mu.Unlock()
	if again != first {
		t.Error("an unchanged plan built a new holder")
	}
	t.Logf("%s", out)
}
