// Package sandboxtest is the fixture the packages above confine share in
// their tests (as net/http/httptest is for net/http): a temporary host
// (a HOME with a secret, a worktree beside it, a scratch root), a policy
// resolved over it, and a launcher on that policy. Nothing is mocked: a
// live policy is resolved against this host's probe and its launcher runs
// real bubblewrap.
//
// One skip rule: a test that needs a sandbox this host cannot run is
// skipped with "no sandbox here: <reason>" (Live); mode off needs none.
//
// confine's own tests cannot import this package (it imports confine);
// they keep the one fixture this one mirrors (newFixtureUnder and
// livePolicy in confine's tests): the same layout, the same skip rule.
package sandboxtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
)

// Usable is a host report on which every mode resolves, for tests of a
// policy alone (no probe, nothing started).
var Usable = confine.HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", UserNS: true, Seccomp: true}

// SecretContent is what Host.Secret holds.
const SecretContent = "SECRET-KEY\n"

// Host is a fresh host layout, symlink-resolved: Home and Work are
// siblings (the worktree is not under HOME), Scratch is the scratch root.
type Host struct {
	Root    string // holds the rest; removed when the test ends
	Home    string // Root/home
	Work    string // Root/work
	Scratch string // Root/scratch
	Secret  string // Home/.ssh/id_rsa, mode 0600, holding SecretContent
}

// NewHost makes a Host under /var/tmp: outside /tmp, which bubblewrap
// replaces with a private one (it would hide a HOME placed there, which no
// real HOME is), and reachable by the unprivileged user scripts/test.sh
// runs the packages as.
func NewHost(t testing.TB) Host {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "evener-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Root: root, Home: filepath.Join(root, "home"), Work: filepath.Join(root, "work"), Scratch: filepath.Join(root, "scratch")}
	h.Secret = filepath.Join(h.Home, ".ssh", "id_rsa")
	for _, d := range []string{h.Home, h.Work, h.Scratch, filepath.Dir(h.Secret)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(h.Secret, []byte(SecretContent), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// Env is a sandbox's environment on h: HOME and a plain PATH.
func (h Host) Env() []string {
	return []string{"HOME=" + h.Home, "PATH=/usr/local/bin:/usr/bin:/bin"}
}

// Spec is a Spec of mode, network off, over h: the worktree, its scratch
// root, and HOME from the environment, as in production.
func (h Host) Spec(mode confine.Mode) confine.Spec {
	return confine.Spec{Mode: mode, ModeExplicit: true, Network: confine.NetworkOff,
		Workdir: h.Work, Env: h.Env(), ScratchRoot: h.Scratch}
}

var (
	probeOnce sync.Once
	probed    confine.HostReport
)

// Live is this host's report (probed once per test binary), the test
// skipped with "no sandbox here: <reason>" when mode needs a sandbox this
// host cannot run.
func Live(t testing.TB, mode confine.Mode) confine.HostReport {
	t.Helper()
	probeOnce.Do(func() { probed = confine.Probe(confine.ProbeFull, os.Environ()) })
	if mode != confine.ModeOff && probed.Unusable() != "" {
		t.Skipf("no sandbox here: %s", probed.Unusable())
	}
	return probed
}

// Resolve resolves spec against host, failing the test on an error.
func Resolve(t testing.TB, spec confine.Spec, host confine.HostReport) *confine.Policy {
	t.Helper()
	p, err := confine.Resolve(spec, host)
	if err != nil {
		t.Fatalf("resolve %s: %v", spec.Mode, err)
	}
	return p
}

// Launcher opens a launcher on p, closed when the test ends.
func Launcher(t testing.TB, p *confine.Policy) *confine.Launcher {
	t.Helper()
	l, err := confine.NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
