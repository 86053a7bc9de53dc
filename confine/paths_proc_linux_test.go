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

// runInSandbox runs script with /bin/sh in a real sandbox of policy p
// (real bubblewrap, the real launcher) and returns its output.
func runInSandbox(t *testing.T, p *Policy, script string) (string, int) {
	t.Helper()
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Run(ctx, Command{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return out.String(), res.ExitCode
}

// TestProcRootOnlyMasked (issue 13 item 10): the sandbox's procfs shows
// none of the files only uid 0 may read (kernel heap and vmalloc layout,
// page allocator state), though a root server's commands are kernel uid 0.
// For an unprivileged server the kernel refuses them anyway; both hold.
func TestProcRootOnlyMasked(t *testing.T) {
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	var present []string
	for _, f := range []string{"/proc/slabinfo", "/proc/vmallocinfo", "/proc/pagetypeinfo", "/proc/timer_list", "/proc/keys", "/proc/program_cpu", "/proc/kallsyms"} {
		if _, err := os.Lstat(f); err == nil {
			present = append(present, f)
		}
	}
	if len(present) == 0 {
		t.Skip("none of the root-only procfs files exists on this kernel")
	}
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixtureUnder(t, "/var/tmp")
			p, err := Resolve(f.spec(mode, NetworkOff), h)
			if err != nil {
				t.Fatal(err)
			}
			// Each file: "name <bytes read>"; a refused open counts 0.
			var script strings.Builder
			for _, pf := range present {
				script.WriteString("printf '%s %s\\n' " + pf + " \"$(head -c 4096 " + pf + " 2>/dev/null | wc -c)\"\n")
			}
			out, code := runInSandbox(t, p, script.String())
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				name, n, _ := strings.Cut(l, " ")
				// kallsyms and keys are world-readable: a user's sandbox
				// sees the user's own view (zero addresses without
				// CAP_SYSLOG, the keys the user may view); a root
				// sandbox gets them masked (empty).
				if (name == "/proc/kallsyms" || name == "/proc/keys") && os.Geteuid() != 0 {
					continue
				}
				if n != "0" {
					t.Errorf("%s: %s bytes readable in the sandbox, want none", name, n)
				}
			}
		})
	}
}
