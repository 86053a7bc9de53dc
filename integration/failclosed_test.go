//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// refusal asserts the run was refused with exit 125, one legible line naming
// the mode, and that the command never ran (it would create marker).
func refusal(t *testing.T, r result, mode, reason, marker string) {
	t.Helper()
	if r.code != 125 {
		t.Errorf("exit %d, want 125 (refused)\n%s", r.code, r)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.HasPrefix(l, "evener-mcp:") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "--sandbox "+mode) || !strings.Contains(lines[0], reason) {
		t.Errorf("want one refusal line naming --sandbox %s and %q, got:\n%s", mode, reason, r.stderr)
	}
	if strings.Contains(r.stderr, "sandbox: bwrap enforcing") {
		t.Errorf("claimed enforcement while refusing:\n%s", r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although the sandbox was refused")
	}
}

// TestFailClosedNoBwrap hides bubblewrap: every explicit mode refuses with
// the install hint; the unset default runs unconfined and says so loudly.
func TestFailClosedNoBwrap(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "PATH=/nonexistent-bin")
		marker := filepath.Join(e.work, "ran")
		for _, mode := range modes {
			r := e.run(t, "exec", "--sandbox", mode, "--", "/bin/touch", marker)
			refusal(t, r, mode, "apt-get install bubblewrap", marker)
		}
		r := e.run(t, "exec", "--", "/bin/touch", marker)
		if r.code != 0 || !strings.Contains(startupLine(r), "NOT ENFORCING") {
			t.Errorf("unset default must degrade loudly:\n%s", r)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the degraded default did not run the command")
		}
		e.extra = append(e.extra, "EVENER_MCP_BWRAP=/nonexistent/bwrap")
		os.Remove(marker)
		refusal(t, e.run(t, "exec", "--sandbox", "workspace-write", "--", "/bin/touch", marker), "workspace-write", "not an executable file", marker)
	})
}

// TestFailClosedNoUserNamespaces breaks the user-namespace probe for real:
// the server runs inside a user namespace whose max_user_namespaces is 0, so
// bubblewrap cannot create its own.
func TestFailClosedNoUserNamespaces(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed")
	}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		marker := filepath.Join(e.work, "ran")
		wrap := func(args ...string) result {
			script := `echo 0 > /proc/sys/user/max_user_namespaces || exit 99; exec "$@"`
			e.prefix = []string{"unshare", "--user", "--map-root-user", "sh", "-c", script, "sh"}
			defer func() { e.prefix = nil }()
			return e.run(t, args...)
		}
		// An explicit native backend: the launch is the probe, and
		// bubblewrap's own reason is in the refusal.
		for _, mode := range modes {
			r := wrap("exec", "--sandbox-backend", "native", "--sandbox", mode, "--", "/bin/touch", marker)
			if r.code == 99 {
				t.Skip("cannot lower max_user_namespaces in a child user namespace here")
			}
			refusal(t, r, mode, "sandbox setup failed", marker)
			if !strings.Contains(r.stderr, "bwrap:") {
				t.Errorf("bubblewrap's own reason is missing:\n%s", r.stderr)
			}
		}
		// The default backend falls back to the landlock backend where the
		// kernel has it (docs/security.md, "The landlock backend"), an
		// explicit mode included, and names it; without Landlock an
		// explicit mode is refused, the unset one runs off.
		landlock := landlockABI() >= 4
		for _, mode := range modes {
			r := wrap("exec", "--sandbox", mode, "--", "/bin/touch", marker)
			if !landlock {
				refusal(t, r, mode, "user namespace", marker)
				continue
			}
			if line := startupLine(r); !strings.Contains(line, "sandbox: landlock enforcing "+mode) || !strings.Contains(line, "user namespace") {
				t.Errorf("--sandbox %s with the default backend must say the landlock backend enforces it, naming the user namespace:\n%s", mode, r)
			}
			_, err := os.Stat(marker)
			if ran := err == nil; ran != (mode != "read-only") {
				t.Errorf("--sandbox %s on the landlock backend: the worktree write ran=%v:\n%s", mode, ran, r)
			}
			os.Remove(marker)
		}
		r := wrap("exec", "--", "/bin/touch", marker)
		want := "NOT ENFORCING"
		if landlock {
			want = "sandbox: landlock enforcing workspace-write"
		}
		if r.code != 0 || !strings.Contains(startupLine(r), want) || !strings.Contains(startupLine(r), "user namespace") {
			t.Errorf("unset default must say %q, naming the user namespace:\n%s", want, r)
		}
		os.Remove(marker)
		r = wrap("probe", "--sandbox", "restricted", "--sandbox-backend", "native")
		if r.code != 125 || !strings.Contains(r.stderr, "backend native requested") {
			t.Errorf("probe with an explicit native backend on a broken host: %s", r)
		}
		r = wrap("probe", "--sandbox", "restricted")
		if landlock && (r.code != 0 || !strings.Contains(r.stderr, "sandbox: landlock enforcing restricted")) ||
			!landlock && (r.code != 125 || !strings.Contains(r.stderr, "--sandbox restricted")) {
			t.Errorf("probe with an explicit mode on a broken host: %s", r)
		}
		r = wrap("probe")
		if landlock && (r.code != 0 || !strings.Contains(r.stderr, "sandbox: landlock enforcing")) ||
			!landlock && (r.code != 1 || !strings.Contains(r.stderr, "NOT ENFORCING")) {
			t.Errorf("probe with the unset default on a broken host must say which backend holds, or exit 1: %s", r)
		}
	})
}

// TestFailClosedBackend: the --sandbox-backend values (docs/reference.md, "Command line").
func TestFailClosedBackend(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		marker := filepath.Join(e.work, "ran")
		r := e.run(t, "exec", "--sandbox-backend", "microvm", "--", "/bin/touch", marker)
		if r.code != 125 || !strings.Contains(r.stderr, "microvm") {
			t.Errorf("microvm must fail loudly: %s", r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("ran without the requested microvm")
		}
		r = e.run(t, "exec", "--sandbox-backend", "none", "--", "/bin/sh", "-c", "cat $HOME/notes.txt")
		if r.code != 0 || !strings.Contains(r.stdout, "home file") || !strings.Contains(startupLine(r), "off") {
			t.Errorf("backend none is sandbox off: %s", r)
		}
		r = e.run(t, "exec", "--sandbox-backend", "native", "--sandbox", "read-only", "--", "true")
		if r.code != 0 || !strings.Contains(startupLine(r), "enforcing read-only") {
			t.Errorf("backend native: %s", r)
		}
		r = e.run(t, "exec", "--sandbox-backend", "none", "--sandbox", "restricted", "--", "true")
		if r.code != 2 {
			t.Errorf("backend none with a sandbox mode is a contradiction: %s", r)
		}
	})
}

// TestBadFlags: one legible line and exit 2.
func TestBadFlags(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	for _, args := range [][]string{
		{"exec", "--sandbox", "strict", "--", "true"},
		{"exec", "--sandbox-net", "maybe", "--", "true"},
		{"exec", "--no-such-flag", "--", "true"},
		{"exec", "--config", "/nonexistent.toml", "--", "true"},
		{"exec", "--sandbox", "workspace-write"},
		{"frobnicate"},
	} {
		r := e.run(t, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, r.code, r)
		}
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 0 && args[0] == "exec" {
			t.Errorf("%v: %d lines of error, want one:\n%s", args, n+1, r.stderr)
		}
	}
}

// TestProbeReport: probe prints the host report and resolved policy.
func TestProbeReport(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		r := e.run(t, "probe", "--json", "--sandbox", "restricted", "--sandbox-net", "off")
		if r.code != 0 {
			t.Fatalf("probe: %s", r)
		}
		var rep struct {
			Host struct {
				Bwrap  string `json:"bwrap"`
				UserNS bool   `json:"userns"`
			} `json:"host"`
			Policy struct {
				Mode    string `json:"mode"`
				Network string `json:"network"`
			} `json:"policy"`
			MountPlan []struct{ Kind, Dst string } `json:"mount_plan"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("probe --json: %v\n%s", err, r.stdout)
		}
		if rep.Host.Bwrap == "" || !rep.Host.UserNS || rep.Policy.Mode != "restricted" || rep.Policy.Network != "off" || len(rep.MountPlan) == 0 {
			t.Errorf("probe report: %+v", rep)
		}
	})
}
