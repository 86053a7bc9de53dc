package confine

import (
	"errors"
	"strings"
	"testing"
)

// noUserNSHost is a Linux host where bubblewrap cannot create a user
// namespace, with the Landlock ABI abi.
func noUserNSHost(abi int) HostReport {
	return HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", Seccomp: true, Landlock: abi,
		UserNSError: "setting up uid map: Permission denied", ProcessLimit: ProcessLimitSessionRlimit}
}

func TestParseBackendLandlock(t *testing.T) {
	for in, want := range map[string]Backend{"": BackendAuto, "auto": BackendAuto, "landlock": BackendLandlock, "Landlock": BackendLandlock, "native": BackendNative, "docker": BackendNative} {
		if got, err := ParseBackend(in); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestLandlockUnusableReport: a kernel without Landlock, or with an ABI too
// old for the backend, is reported as such (fake ABI values).
func TestLandlockUnusableReport(t *testing.T) {
	for _, c := range []struct {
		abi  int
		want string
	}{
		{0, "no Landlock"},
		{1, "landlock ABI 1 is too old"},
		{3, "landlock ABI 3 is too old: the landlock backend needs ABI 4"},
		{4, ""},
		{7, ""},
	} {
		got := noUserNSHost(c.abi).LandlockUnusable()
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("ABI %d: LandlockUnusable() = %q, want %q", c.abi, got, c.want)
		}
		err := noUserNSHost(c.abi).CheckBackend(BackendLandlock)
		if (err == nil) != (c.want == "") || err != nil && !errors.Is(err, ErrUnenforceable) {
			t.Errorf("ABI %d: CheckBackend(landlock) = %v", c.abi, err)
		}
	}
	if HostReport(noUserNSHost(7)).CheckBackend(BackendNative) == nil {
		t.Error("an explicit native backend was accepted where bubblewrap cannot create a user namespace")
	}
	h := noUserNSHost(7)
	h.OS = "darwin"
	if !strings.Contains(h.LandlockUnusable(), "Linux-only") {
		t.Errorf("darwin: %q", h.LandlockUnusable())
	}
}

// TestResolveFallsBackToLandlock: the default (auto) picks the landlock
// backend where bubblewrap cannot create a user namespace and Landlock
// ABI 4+ is there, for an unset and an explicit mode; the startup line
// names the backend, why, and every guarantee it does not give. Below ABI
// 4 an unset mode degrades to off and says why landlock could not run
// either; an explicit mode, or an explicit landlock backend, is refused.
func TestResolveFallsBackToLandlock(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		for _, net := range []Network{NetworkOn, NetworkOff} {
			f := newFixture(t)
			spec := f.spec(ModeWorkspaceWrite, net)
			spec.ModeExplicit = explicit
			p, err := Resolve(spec, noUserNSHost(5))
			if err != nil {
				t.Fatalf("explicit=%v: %v", explicit, err)
			}
			if p.Backend() != "landlock" || p.Mode() != ModeWorkspaceWrite || p.Cache() != CachePrivate {
				t.Errorf("explicit=%v: backend %s mode %s cache %s, want landlock workspace-write private", explicit, p.Backend(), p.Mode(), p.Cache())
			}
			line := p.StartupLine()
			for _, want := range []string{"sandbox: landlock enforcing workspace-write", "chosen because bubblewrap cannot create an unprivileged user namespace",
				"landlock ABI 5", "NOT given by this backend", "no PID namespace", "no mount masking", "no private /tmp",
				"no per-session process limit", "signals to the user's other processes not scoped (landlock ABI 5 < 6)", "TCP bind refused"} {
				if !strings.Contains(line, want) {
					t.Errorf("explicit=%v net=%s: startup line %q lacks %q", explicit, net, line, want)
				}
			}
			if strings.Contains(line, "secrets masked") || strings.Contains(line, "second layer") {
				t.Errorf("startup line claims what the landlock backend does not do: %q", line)
			}
			if got := strings.Contains(line, "filtered by port only"); got != (net == NetworkOn) {
				t.Errorf("net=%s: port-only caveat present=%v: %q", net, got, line)
			}
			if !strings.HasPrefix(p.ProcessLimit(), "none") {
				t.Errorf("ProcessLimit() = %q under the landlock backend", p.ProcessLimit())
			}
			// A narrower session keeps the backend.
			q, err := p.Narrow(ModeReadOnly, NetworkOff, nil)
			if err != nil || q.Backend() != "landlock" {
				t.Errorf("Narrow: %v, backend %v", err, q.Backend())
			}
		}
	}
	f := newFixture(t)
	p, err := Resolve(f.spec("", NetworkOn), noUserNSHost(3))
	if err != nil || p.Mode() != ModeOff {
		t.Fatalf("ABI 3, unset mode: %v, mode %v", err, p.Mode())
	}
	if line := p.StartupLine(); !strings.Contains(line, "NOT ENFORCING") || !strings.Contains(line, "nor can the landlock backend: landlock ABI 3 is too old") {
		t.Errorf("ABI 3 off line: %q", line)
	}
	if _, err := Resolve(f.spec(ModeWorkspaceWrite, NetworkOn), noUserNSHost(3)); !errors.Is(err, ErrUnenforceable) || !strings.Contains(err.Error(), "landlock ABI 3") {
		t.Errorf("ABI 3, explicit mode: %v", err)
	}
	spec := f.spec("", NetworkOn)
	spec.Backend = BackendLandlock
	if _, err := Resolve(spec, noUserNSHost(0)); !errors.Is(err, ErrUnenforceable) || !strings.Contains(err.Error(), "no Landlock") {
		t.Errorf("explicit landlock without Landlock: %v", err)
	}
	// An explicit landlock backend where bubblewrap works runs landlock.
	usable := usableHost
	usable.Landlock = 7
	if p, err := Resolve(spec, usable); err != nil || p.Backend() != "landlock" || p.FellBack() != "" {
		t.Errorf("explicit landlock on a bubblewrap host: %v %v", err, p)
	}
	// A missing bubblewrap is an installation to make: no fallback.
	if p, err := Resolve(f.spec("", NetworkOn), HostReport{OS: "linux", Seccomp: true, Landlock: 7, BwrapError: "bubblewrap (bwrap) not found on PATH"}); err != nil || p.Mode() != ModeOff {
		t.Errorf("auto without bubblewrap: %v %v", err, p.Mode())
	}
	// auto where bubblewrap works stays native.
	if p, err := Resolve(f.spec("", NetworkOn), usable); err != nil || p.Backend() != "bwrap" || len(p.LandlockGaps()) != 0 {
		t.Errorf("auto on a bubblewrap host: %v %v", err, p.Backend())
	}
}

// TestBackendGuarantees: per backend, which guarantee holds and by which
// mechanism, read from the host report (fake ABI values).
func TestBackendGuarantees(t *testing.T) {
	find := func(gs []Guarantee, what string) Guarantee {
		for _, g := range gs {
			if strings.HasPrefix(g.What, what) {
				return g
			}
		}
		t.Fatalf("no row %q in %v", what, gs)
		return Guarantee{}
	}
	g := BackendGuarantees(noUserNSHost(7))
	if r := find(g[BackendNative], "secrets unreadable"); r.Mechanism != "" || r.Why != "backend unusable here" || !strings.Contains(BackendUnusable(noUserNSHost(7), BackendNative), "user namespace") {
		t.Errorf("native on a host without user namespaces: %+v", r)
	}
	ll := g[BackendLandlock]
	for what, mech := range map[string]string{
		"writes only beneath":                          "landlock",
		"secrets unreadable":                           "landlock",
		"UDP, raw and SCTP":                            "seccomp",
		"host Unix sockets":                            "seccomp",
		"host processes cannot be signalled or traced": "landlock (scopes, ptrace)",
		"file size":                                    "rlimit",
		"no capabilities":                              "capabilities (dropped, no_new_privs)",
	} {
		if r := find(ll, what); r.Mechanism != mech {
			t.Errorf("landlock ABI 7: %q by %q, want %q", what, r.Mechanism, mech)
		}
	}
	for _, what := range []string{"host processes hidden", "private /tmp", "process count per session"} {
		if r := find(ll, what); r.Mechanism != "" || r.Why == "" {
			t.Errorf("landlock: %q claimed: %+v", what, r)
		}
	}
	if r := find(BackendGuarantees(noUserNSHost(5))[BackendLandlock], "host processes cannot be signalled"); r.Mechanism != "" || !strings.Contains(r.Why, "ABI 5 < 6") {
		t.Errorf("ABI 5 signals: %+v", r)
	}
	for _, r := range BackendGuarantees(noUserNSHost(3))[BackendLandlock] {
		if r.Mechanism != "" || r.Why != "backend unusable here" {
			t.Errorf("ABI 3: row %+v holds", r)
		}
	}
	if why := BackendUnusable(noUserNSHost(3), BackendLandlock); !strings.Contains(why, "landlock ABI 3 is too old") {
		t.Errorf("ABI 3: %q", why)
	}
	ok := usableHost
	ok.Landlock, ok.ProcessLimit = 7, ProcessLimitSessionCgroup
	n := BackendGuarantees(ok)[BackendNative]
	if r := find(n, "writes only beneath"); r.Mechanism != "mount + landlock" {
		t.Errorf("native writes: %+v", r)
	}
	if r := find(n, "process count per session"); r.Mechanism != "pids cgroup" {
		t.Errorf("native procs: %+v", r)
	}
	if len(BackendGuarantees(HostReport{OS: "darwin"})) != 0 {
		t.Error("darwin has Linux backends")
	}
}

// TestLandlockBackendRefusesProtectedInRoot: a protected path inside a
// write root cannot be kept read-only without a mount, so the landlock
// backend is refused for it (explicitly) and not chosen by the default.
func TestLandlockBackendRefusesProtectedInRoot(t *testing.T) {
	f := newFixture(t)
	mustMkdir(t, f.work+"/ci")
	spec := f.spec(ModeWorkspaceWrite, NetworkOff)
	spec.Protected = []string{f.work + "/ci"}
	spec.Backend = BackendLandlock
	if _, err := Resolve(spec, noUserNSHost(7)); !errors.Is(err, ErrUnenforceable) || !strings.Contains(err.Error(), "protected path") {
		t.Errorf("explicit landlock with a protected path in the worktree: %v", err)
	}
	spec.Backend, spec.Mode, spec.ModeExplicit = "", "", false
	p, err := Resolve(spec, noUserNSHost(7))
	if err != nil || p.Mode() != ModeOff || !strings.Contains(p.StartupLine(), "nor can the landlock backend: a protected path") {
		t.Errorf("auto with a protected path in the worktree: %v %q", err, p.StartupLine())
	}
	// Read-only has no write root: the protected path stays unwritable.
	spec.Mode, spec.ModeExplicit = ModeReadOnly, true
	if p, err := Resolve(spec, noUserNSHost(7)); err != nil || p.Backend() != "landlock" {
		t.Errorf("read-only with a protected path: %v", err)
	}
}
