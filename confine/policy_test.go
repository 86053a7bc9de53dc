package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// usableHost is a host report on which every mode can be enforced.
var usableHost = HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", UserNS: true, Seccomp: true}

// overlayHost is usableHost with a bubblewrap that can mount overlays.
var overlayHost = HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", UserNS: true, Seccomp: true, Overlay: true}

const bwrapHint = "apt-get install bubblewrap"

// fixture is a fake filesystem under t.TempDir: a home, a worktree beside it
// (not under it) and a scratch root. The real HOME is never consulted.
type fixture struct {
	root, home, work, scratch string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{
		root:    root,
		home:    filepath.Join(root, "home"),
		work:    filepath.Join(root, "work"),
		scratch: filepath.Join(root, "scratch"),
	}
	for _, d := range []string{f.home, f.work, f.scratch} {
		mustMkdir(t, d)
	}
	return f
}

// spec is a Spec whose HOME comes from the environment, as in production.
func (f fixture) spec(mode Mode, network Network) Spec {
	return Spec{
		Mode:         mode,
		ModeExplicit: mode != "",
		Network:      network,
		Workdir:      f.work,
		Env:          []string{"HOME=" + f.home, "PATH=/usr/bin:/bin"},
		ScratchRoot:  f.scratch,
	}
}

func (f fixture) resolve(t *testing.T, mode Mode, network Network, host HostReport) *Policy {
	t.Helper()
	p, err := Resolve(f.spec(mode, network), host)
	if err != nil {
		t.Fatalf("Resolve(%s, %s): %v", mode, network, err)
	}
	return p
}

func mustMkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(link))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		In      string
		Want    Mode
		WantErr bool
	}{
		{In: "off", Want: ModeOff},
		{In: "read-only", Want: ModeReadOnly},
		{In: "workspace-write", Want: ModeWorkspaceWrite},
		{In: "restricted", Want: ModeRestricted},
		{In: "", WantErr: true},
		{In: "READ-ONLY", WantErr: true},
		{In: "readonly", WantErr: true},
		{In: "read_only", WantErr: true},
		{In: " off", WantErr: true},
		{In: "on", WantErr: true},
		{In: "danger-full-access", WantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.In, func(t *testing.T) {
			got, err := ParseMode(tt.In)
			if gotErr := err != nil; gotErr != tt.WantErr {
				t.Fatalf("ParseMode(%q) error = %v, want error %v", tt.In, err, tt.WantErr)
			}
			if got != tt.Want {
				t.Errorf("ParseMode(%q) = %q, want %q", tt.In, got, tt.Want)
			}
			if err != nil && !strings.Contains(err.Error(), tt.In) {
				t.Errorf("ParseMode(%q) error %q does not quote the input", tt.In, err)
			}
		})
	}
}

func TestParseNetwork(t *testing.T) {
	tests := []struct {
		In      string
		Want    Network
		WantErr bool
	}{
		{In: "on", Want: NetworkOn},
		{In: "off", Want: NetworkOff},
		{In: "", WantErr: true},
		{In: "ON", WantErr: true},
		{In: "true", WantErr: true},
		{In: "filtered", WantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.In, func(t *testing.T) {
			got, err := ParseNetwork(tt.In)
			if gotErr := err != nil; gotErr != tt.WantErr {
				t.Fatalf("ParseNetwork(%q) error = %v, want error %v", tt.In, err, tt.WantErr)
			}
			if got != tt.Want {
				t.Errorf("ParseNetwork(%q) = %q, want %q", tt.In, got, tt.Want)
			}
		})
	}
}

func TestModeNoWiderThan(t *testing.T) {
	const (
		off = ModeOff
		ro  = ModeReadOnly
		ww  = ModeWorkspaceWrite
		rs  = ModeRestricted
	)
	// The full 4x4 matrix of m.NoWiderThan(base): off > workspace-write >
	// {read-only, restricted}, read-only and restricted incomparable.
	tests := []struct {
		M, Base Mode
		Want    bool
	}{
		{off, off, true}, {ro, off, true}, {ww, off, true}, {rs, off, true},
		{off, ww, false}, {ro, ww, true}, {ww, ww, true}, {rs, ww, true},
		{off, ro, false}, {ro, ro, true}, {ww, ro, false}, {rs, ro, false},
		{off, rs, false}, {ro, rs, false}, {ww, rs, false}, {rs, rs, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.M)+"<="+string(tt.Base), func(t *testing.T) {
			if got := tt.M.NoWiderThan(tt.Base); got != tt.Want {
				t.Errorf("%s.NoWiderThan(%s) = %v, want %v", tt.M, tt.Base, got, tt.Want)
			}
		})
	}
}

func TestModeWrites(t *testing.T) {
	tests := []struct {
		Mode Mode
		Want bool
	}{
		{ModeOff, true}, {ModeReadOnly, false}, {ModeWorkspaceWrite, true}, {ModeRestricted, true},
	}
	for _, tt := range tests {
		if got := tt.Mode.Writes(); got != tt.Want {
			t.Errorf("%s.Writes() = %v, want %v", tt.Mode, got, tt.Want)
		}
	}
}

func TestResolveUnusableHost(t *testing.T) {
	// WantReasonHas are the words the reason must hold; the reason itself is
	// HostReport.Unusable's, and the error and the startup line must carry it
	// whole.
	hosts := []struct {
		Name          string
		Host          HostReport
		WantReasonHas []string
	}{
		{
			Name:          "no-bwrap",
			Host:          HostReport{OS: "linux", InstallHint: bwrapHint},
			WantReasonHas: []string{"bwrap", "not found", "install it: " + bwrapHint},
		},
		{
			Name:          "no-userns",
			Host:          HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", Seccomp: true, UserNSError: "setting up uid map: Permission denied"},
			WantReasonHas: []string{"user namespace", "setting up uid map: Permission denied"},
		},
		{
			Name:          "no-seccomp",
			Host:          HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", UserNS: true, SeccompError: "unsupported arch"},
			WantReasonHas: []string{"seccomp", "unsupported arch"},
		},
		{
			Name:          "darwin",
			Host:          HostReport{OS: "darwin"},
			WantReasonHas: []string{"darwin"},
		},
	}
	for _, h := range hosts {
		for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
			t.Run(h.Name+"/explicit-"+string(mode), func(t *testing.T) {
				f := newFixture(t)
				p, err := Resolve(f.spec(mode, NetworkOn), h.Host)
				if err == nil {
					t.Fatalf("Resolve(explicit %s) on an unusable host = %q, want an error", mode, p.StartupLine())
				}
				if !errors.Is(err, ErrUnenforceable) {
					t.Errorf("error %q does not wrap ErrUnenforceable", err)
				}
				reason := h.Host.Unusable()
				for _, want := range append([]string{"--sandbox " + string(mode), reason}, h.WantReasonHas...) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
			})
		}
		t.Run(h.Name+"/unset-degrades", func(t *testing.T) {
			f := newFixture(t)
			p, err := Resolve(f.spec("", NetworkOn), h.Host)
			if err != nil {
				t.Fatalf("Resolve(unset mode) = %v, want a degraded policy", err)
			}
			if p.Mode() != ModeOff {
				t.Errorf("Mode() = %s, want off", p.Mode())
			}
			if p.Degraded() != h.Host.Unusable() {
				t.Errorf("Degraded() = %q, want %q", p.Degraded(), h.Host.Unusable())
			}
			if p.Backend() != "none" || p.Cache() != CacheHost {
				t.Errorf("Backend/Cache = %s/%s, want none/host", p.Backend(), p.Cache())
			}
			line := p.StartupLine()
			for _, want := range append([]string{"NOT ENFORCING", h.Host.Unusable()}, h.WantReasonHas...) {
				if !strings.Contains(line, want) {
					t.Errorf("StartupLine %q does not contain %q", line, want)
				}
			}
		})
		t.Run(h.Name+"/explicit-off", func(t *testing.T) {
			f := newFixture(t)
			p, err := Resolve(f.spec(ModeOff, NetworkOn), h.Host)
			if err != nil {
				t.Fatalf("Resolve(explicit off) = %v, want success on any host", err)
			}
			if p.Mode() != ModeOff || p.Degraded() != "" {
				t.Errorf("Mode/Degraded = %s/%q, want off/\"\"", p.Mode(), p.Degraded())
			}
		})
	}
}

func TestResolveUsableHost(t *testing.T) {
	tests := []struct {
		Name        string
		Mode        Mode
		Explicit    bool
		Network     Network
		Host        HostReport
		WantMode    Mode
		WantNetwork Network
		WantBackend string
		WantCache   CacheStrategy
	}{
		{Name: "unset-defaults-to-workspace-write", Mode: "", Host: usableHost,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOn, WantBackend: "bwrap", WantCache: CachePrivate},
		{Name: "unset-network-defaults-on", Mode: ModeReadOnly, Explicit: true, Host: usableHost,
			WantMode: ModeReadOnly, WantNetwork: NetworkOn, WantBackend: "bwrap", WantCache: CacheNone},
		{Name: "off", Mode: ModeOff, Explicit: true, Network: NetworkOn, Host: usableHost,
			WantMode: ModeOff, WantNetwork: NetworkOn, WantBackend: "none", WantCache: CacheHost},
		{Name: "off-overlay", Mode: ModeOff, Explicit: true, Network: NetworkOff, Host: overlayHost,
			WantMode: ModeOff, WantNetwork: NetworkOff, WantBackend: "none", WantCache: CacheHost},
		{Name: "read-only", Mode: ModeReadOnly, Explicit: true, Network: NetworkOff, Host: usableHost,
			WantMode: ModeReadOnly, WantNetwork: NetworkOff, WantBackend: "bwrap", WantCache: CacheNone},
		{Name: "read-only-overlay", Mode: ModeReadOnly, Explicit: true, Network: NetworkOn, Host: overlayHost,
			WantMode: ModeReadOnly, WantNetwork: NetworkOn, WantBackend: "bwrap", WantCache: CacheNone},
		{Name: "workspace-write", Mode: ModeWorkspaceWrite, Explicit: true, Network: NetworkOn, Host: usableHost,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOn, WantBackend: "bwrap", WantCache: CachePrivate},
		{Name: "workspace-write-overlay", Mode: ModeWorkspaceWrite, Explicit: true, Network: NetworkOff, Host: overlayHost,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOff, WantBackend: "bwrap", WantCache: CacheOverlay},
		{Name: "restricted", Mode: ModeRestricted, Explicit: true, Network: NetworkOn, Host: usableHost,
			WantMode: ModeRestricted, WantNetwork: NetworkOn, WantBackend: "bwrap", WantCache: CachePrivate},
		{Name: "restricted-overlay", Mode: ModeRestricted, Explicit: true, Network: NetworkOff, Host: overlayHost,
			WantMode: ModeRestricted, WantNetwork: NetworkOff, WantBackend: "bwrap", WantCache: CachePrivate},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			s := f.spec(tt.Mode, tt.Network)
			s.ModeExplicit = tt.Explicit
			p, err := Resolve(s, tt.Host)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if p.Mode() != tt.WantMode || p.Network() != tt.WantNetwork || p.Backend() != tt.WantBackend || p.Cache() != tt.WantCache {
				t.Errorf("mode/network/backend/cache = %s/%s/%s/%s, want %s/%s/%s/%s",
					p.Mode(), p.Network(), p.Backend(), p.Cache(),
					tt.WantMode, tt.WantNetwork, tt.WantBackend, tt.WantCache)
			}
			if p.Degraded() != "" {
				t.Errorf("Degraded() = %q on a usable host", p.Degraded())
			}
			if p.Explicit() != tt.Explicit {
				t.Errorf("Explicit() = %v, want %v", p.Explicit(), tt.Explicit)
			}
			if p.Home() != f.home || p.Workdir() != f.work {
				t.Errorf("Home/Workdir = %s/%s, want %s/%s", p.Home(), p.Workdir(), f.home, f.work)
			}
			if p.Limits() != DefaultLimits {
				t.Errorf("Limits() = %+v, want DefaultLimits", p.Limits())
			}
		})
	}
}

func TestResolveSpecErrors(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		Name            string
		Edit            func(*testing.T, *Spec)
		WantErrContains string
	}{
		{Name: "bad-mode", Edit: func(t *testing.T, s *Spec) { s.Mode = "sandboxed" }, WantErrContains: "unknown sandbox mode"},
		{Name: "bad-network", Edit: func(t *testing.T, s *Spec) { s.Network = "filtered" }, WantErrContains: "unknown --sandbox-net"},
		{Name: "no-home", Edit: func(t *testing.T, s *Spec) { s.Env = []string{"PATH=/usr/bin"} }, WantErrContains: "HOME"},
		{Name: "relative-home", Edit: func(t *testing.T, s *Spec) { s.Env = []string{"HOME=home"} }, WantErrContains: "HOME"},
		{Name: "relative-extra-deny", Edit: func(t *testing.T, s *Spec) { s.ExtraDeny = []string{"secrets"} }, WantErrContains: "not absolute"},
		{Name: "missing-workdir", Edit: func(t *testing.T, s *Spec) { s.Workdir = filepath.Join(f.root, "absent") }, WantErrContains: "workdir"},
		{Name: "workdir-is-file", Edit: func(t *testing.T, s *Spec) {
			p := filepath.Join(f.root, "file")
			mustWrite(t, p, "x")
			s.Workdir = p
		}, WantErrContains: "not a directory"},
		{Name: "missing-add-dir", Edit: func(t *testing.T, s *Spec) { s.AddDirs = []string{filepath.Join(f.root, "absent")} }, WantErrContains: "--add-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			s := f.spec(ModeWorkspaceWrite, NetworkOn)
			tt.Edit(t, &s)
			p, err := Resolve(s, usableHost)
			if err == nil {
				t.Fatalf("Resolve = %q, want an error containing %q", p.StartupLine(), tt.WantErrContains)
			}
			if !strings.Contains(err.Error(), tt.WantErrContains) {
				t.Errorf("error %q does not contain %q", err, tt.WantErrContains)
			}
		})
	}
}

func TestResolveSpecHomeWins(t *testing.T) {
	f := newFixture(t)
	s := f.spec(ModeReadOnly, NetworkOn)
	other := filepath.Join(f.root, "other-home")
	mustMkdir(t, other)
	s.Home = other
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if p.Home() != other {
		t.Errorf("Home() = %s, want Spec.Home %s", p.Home(), other)
	}
	if !slices.Contains(p.Denylist(), filepath.Join(other, ".ssh")) {
		t.Errorf("Denylist() is not resolved against Spec.Home: %v", p.Denylist())
	}
}

func TestResolveWorkdirCanonical(t *testing.T) {
	f := newFixture(t)
	link := filepath.Join(f.root, "link-to-work")
	mustSymlink(t, f.work, link)
	s := f.spec(ModeWorkspaceWrite, NetworkOn)
	s.Workdir = link
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workdir() != f.work {
		t.Errorf("Workdir() = %s, want the resolved %s", p.Workdir(), f.work)
	}
	if got := p.WriteRoots(); !slices.Equal(got, []string{f.work}) {
		t.Errorf("WriteRoots() = %v, want [%s]", got, f.work)
	}
}

func TestResolveWorkdirSharedTree(t *testing.T) {
	tests := []struct {
		Name    string
		Mode    Mode
		Workdir func(t *testing.T, f fixture) string
		WantErr bool
	}{
		{Name: "home/read-only", Mode: ModeReadOnly, Workdir: func(t *testing.T, f fixture) string { return f.home }, WantErr: true},
		{Name: "home/workspace-write", Mode: ModeWorkspaceWrite, Workdir: func(t *testing.T, f fixture) string { return f.home }, WantErr: true},
		{Name: "home/restricted", Mode: ModeRestricted, Workdir: func(t *testing.T, f fixture) string { return f.home }, WantErr: true},
		{Name: "home/off", Mode: ModeOff, Workdir: func(t *testing.T, f fixture) string { return f.home }},
		{Name: "above-home/workspace-write", Mode: ModeWorkspaceWrite, Workdir: func(t *testing.T, f fixture) string { return f.root }, WantErr: true},
		{Name: "home-via-symlink/workspace-write", Mode: ModeWorkspaceWrite, Workdir: func(t *testing.T, f fixture) string {
			l := filepath.Join(f.work, "h")
			mustSymlink(t, f.home, l)
			return l
		}, WantErr: true},
		{Name: "under-home/workspace-write", Mode: ModeWorkspaceWrite, Workdir: func(t *testing.T, f fixture) string {
			d := filepath.Join(f.home, "src", "proj")
			mustMkdir(t, d)
			return d
		}},
		{Name: "tmp/restricted", Mode: ModeRestricted, Workdir: func(*testing.T, fixture) string { return "/tmp" }, WantErr: true},
		{Name: "root/read-only", Mode: ModeReadOnly, Workdir: func(*testing.T, fixture) string { return "/" }, WantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			s := f.spec(tt.Mode, NetworkOn)
			s.Workdir = tt.Workdir(t, f)
			p, err := Resolve(s, usableHost)
			if gotErr := err != nil; gotErr != tt.WantErr {
				t.Fatalf("Resolve(workdir %s, %s) error = %v, want error %v", s.Workdir, tt.Mode, err, tt.WantErr)
			}
			if err != nil {
				if !errors.Is(err, errSharedTree) {
					t.Errorf("error %q does not wrap errSharedTree", err)
				}
				return
			}
			if p.Mode() != tt.Mode {
				t.Errorf("Mode() = %s, want %s", p.Mode(), tt.Mode)
			}
		})
	}
}

func TestResolveAddDir(t *testing.T) {
	tests := []struct {
		Name         string
		Dir          func(t *testing.T, f fixture) string
		WantErr      bool
		WantSharedTE bool // the error wraps errSharedTree
	}{
		{Name: "home", Dir: func(t *testing.T, f fixture) string { return f.home }, WantErr: true, WantSharedTE: true},
		{Name: "above-home", Dir: func(t *testing.T, f fixture) string { return f.root }, WantErr: true, WantSharedTE: true},
		{Name: "root", Dir: func(*testing.T, fixture) string { return "/" }, WantErr: true, WantSharedTE: true},
		{Name: "tmp", Dir: func(*testing.T, fixture) string { return "/tmp" }, WantErr: true, WantSharedTE: true},
		{Name: "var-tmp", Dir: func(*testing.T, fixture) string { return "/var/tmp" }, WantErr: true, WantSharedTE: true},
		{Name: "worktree", Dir: func(t *testing.T, f fixture) string { return f.work }, WantErr: true, WantSharedTE: true},
		{Name: "symlink-to-home", Dir: func(t *testing.T, f fixture) string {
			l := filepath.Join(f.root, "links", "h")
			mustSymlink(t, f.home, l)
			return l
		}, WantErr: true, WantSharedTE: true},
		{Name: "home-dotdot", Dir: func(t *testing.T, f fixture) string { return f.home + "/x/.." }, WantErr: true, WantSharedTE: true},
		{Name: "missing", Dir: func(t *testing.T, f fixture) string { return filepath.Join(f.root, "missing") }, WantErr: true},
		{Name: "under-home", Dir: func(t *testing.T, f fixture) string {
			d := filepath.Join(f.home, "shared-cache")
			mustMkdir(t, d)
			return d
		}},
		{Name: "sibling", Dir: func(t *testing.T, f fixture) string {
			d := filepath.Join(f.root, "sibling")
			mustMkdir(t, d)
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			mustMkdir(t, filepath.Join(f.home, "x"))
			s := f.spec(ModeWorkspaceWrite, NetworkOn)
			dir := tt.Dir(t, f)
			s.AddDirs = []string{dir, dir} // a repeated root is kept once
			p, err := Resolve(s, usableHost)
			if gotErr := err != nil; gotErr != tt.WantErr {
				t.Fatalf("Resolve(--add-dir %s) error = %v, want error %v", dir, err, tt.WantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "--add-dir") {
					t.Errorf("error %q does not name --add-dir", err)
				}
				if tt.WantSharedTE && !errors.Is(err, errSharedTree) {
					t.Errorf("error %q does not wrap errSharedTree", err)
				}
				return
			}
			if got := p.AddDirs(); !slices.Equal(got, []string{dir}) {
				t.Errorf("AddDirs() = %v, want [%s]", got, dir)
			}
		})
	}
}

func TestStartupLine(t *testing.T) {
	tests := []struct {
		Mode    Mode
		Network Network
		Host    HostReport
		Want    string
	}{
		{ModeOff, NetworkOn, usableHost, "sandbox: off (requested): commands run with your full user access"},
		{ModeOff, NetworkOff, usableHost, "sandbox: off (requested): commands run with your full user access"},
		{ModeReadOnly, NetworkOn, usableHost, "sandbox: bwrap enforcing read-only (network on via allowlist proxies, secrets masked, cache none)"},
		{ModeReadOnly, NetworkOff, usableHost, "sandbox: bwrap enforcing read-only (network off, secrets masked, cache none)"},
		{ModeWorkspaceWrite, NetworkOn, usableHost, "sandbox: bwrap enforcing workspace-write (network on via allowlist proxies, secrets masked, cache private)"},
		{ModeWorkspaceWrite, NetworkOff, usableHost, "sandbox: bwrap enforcing workspace-write (network off, secrets masked, cache private)"},
		{ModeWorkspaceWrite, NetworkOn, overlayHost, "sandbox: bwrap enforcing workspace-write (network on via allowlist proxies, secrets masked, cache shared-read/private-write)"},
		{ModeWorkspaceWrite, NetworkOff, overlayHost, "sandbox: bwrap enforcing workspace-write (network off, secrets masked, cache shared-read/private-write)"},
		{ModeRestricted, NetworkOn, usableHost, "sandbox: bwrap enforcing restricted (network on via allowlist proxies, secrets masked, cache private)"},
		{ModeRestricted, NetworkOff, overlayHost, "sandbox: bwrap enforcing restricted (network off, secrets masked, cache private)"},
	}
	for _, tt := range tests {
		name := string(tt.Mode) + "/net-" + string(tt.Network)
		if tt.Host.Overlay {
			name += "/overlay"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			got := f.resolve(t, tt.Mode, tt.Network, tt.Host).StartupLine()
			if got != tt.Want {
				t.Errorf("StartupLine() =\n  %q\nwant\n  %q", got, tt.Want)
			}
			// Never overstate, whatever the exact wording becomes.
			if tt.Mode == ModeOff {
				if strings.Contains(got, "enforcing") || strings.Contains(got, "network off") {
					t.Errorf("off StartupLine %q claims enforcement", got)
				}
				return
			}
			if tt.Network == NetworkOn && strings.Contains(got, "network off") {
				t.Errorf("StartupLine %q says network off while it is on", got)
			}
			if tt.Network == NetworkOff && !strings.Contains(got, "network off") {
				t.Errorf("StartupLine %q does not say network off", got)
			}
			if !strings.Contains(got, "enforcing "+string(tt.Mode)+" ") {
				t.Errorf("StartupLine %q does not name the mode", got)
			}
		})
	}
}

func TestPolicyWriteRoots(t *testing.T) {
	tests := []struct {
		Mode Mode
		Want func(f fixture, add string) []string
	}{
		{ModeOff, func(fixture, string) []string { return nil }},
		{ModeReadOnly, func(fixture, string) []string { return nil }},
		{ModeWorkspaceWrite, func(f fixture, add string) []string { return []string{f.work, add} }},
		{ModeRestricted, func(f fixture, add string) []string { return []string{f.work} }},
	}
	for _, tt := range tests {
		t.Run(string(tt.Mode), func(t *testing.T) {
			f := newFixture(t)
			add := filepath.Join(f.root, "extra")
			mustMkdir(t, add)
			s := f.spec(tt.Mode, NetworkOn)
			s.AddDirs = []string{add}
			p, err := Resolve(s, usableHost)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.WriteRoots(), tt.Want(f, add); !slices.Equal(got, want) {
				t.Errorf("WriteRoots() = %v, want %v", got, want)
			}
		})
	}
}

func TestPolicyAccessorsCopy(t *testing.T) {
	f := newFixture(t)
	add := filepath.Join(f.root, "extra")
	mustMkdir(t, add)
	s := f.spec(ModeWorkspaceWrite, NetworkOn)
	s.AddDirs = []string{add}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	p.Denylist()[0] = "/clobbered"
	p.AddDirs()[0] = "/clobbered"
	p.WriteRoots()[1] = "/clobbered"
	p.Env()[0] = "HOME=/clobbered"
	if slices.Contains(p.Denylist(), "/clobbered") || slices.Contains(p.AddDirs(), "/clobbered") ||
		slices.Contains(p.WriteRoots(), "/clobbered") || slices.Contains(p.Env(), "HOME=/clobbered") {
		t.Error("an accessor returned the policy's own slice: a caller can widen an immutable policy")
	}
	// The spec's slices are not aliased either.
	s.Env[0] = "HOME=/clobbered"
	if slices.Contains(p.Env(), "HOME=/clobbered") {
		t.Error("Resolve kept the caller's Env slice")
	}
}

func TestResolveExtraDeny(t *testing.T) {
	f := newFixture(t)
	s := f.spec(ModeReadOnly, NetworkOn)
	s.ExtraDeny = []string{"/srv/secrets/", "/opt/x/../vault"}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/srv/secrets", "/opt/vault", filepath.Join(f.home, ".ssh")} {
		if !slices.Contains(p.Denylist(), want) {
			t.Errorf("Denylist() lacks %s", want)
		}
	}
}

func TestNarrow(t *testing.T) {
	tests := []struct {
		Name        string
		Base        Mode
		BaseNetwork Network
		Host        HostReport
		Mode        Mode
		Network     Network
		Deny        []string
		WantMode    Mode
		WantNetwork Network
		WantCache   CacheStrategy
		WantBackend string
		WantErr     bool
		WantErrIs   error
	}{
		// Narrowings.
		{Name: "ww->ro", Base: ModeWorkspaceWrite, Host: usableHost, Mode: ModeReadOnly,
			WantMode: ModeReadOnly, WantNetwork: NetworkOn, WantCache: CacheNone, WantBackend: "bwrap"},
		{Name: "ww->restricted", Base: ModeWorkspaceWrite, Host: overlayHost, Mode: ModeRestricted,
			WantMode: ModeRestricted, WantNetwork: NetworkOn, WantCache: CachePrivate, WantBackend: "bwrap"},
		{Name: "ww->ww", Base: ModeWorkspaceWrite, Host: overlayHost, Mode: ModeWorkspaceWrite,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOn, WantCache: CacheOverlay, WantBackend: "bwrap"},
		{Name: "ww->unchanged", Base: ModeWorkspaceWrite, Host: usableHost, Mode: "",
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOn, WantCache: CachePrivate, WantBackend: "bwrap"},
		{Name: "ro->ro", Base: ModeReadOnly, Host: usableHost, Mode: ModeReadOnly,
			WantMode: ModeReadOnly, WantNetwork: NetworkOn, WantCache: CacheNone, WantBackend: "bwrap"},
		{Name: "restricted->restricted", Base: ModeRestricted, Host: usableHost, Mode: ModeRestricted,
			WantMode: ModeRestricted, WantNetwork: NetworkOn, WantCache: CachePrivate, WantBackend: "bwrap"},
		{Name: "off->ro", Base: ModeOff, Host: usableHost, Mode: ModeReadOnly,
			WantMode: ModeReadOnly, WantNetwork: NetworkOn, WantCache: CacheNone, WantBackend: "bwrap"},
		{Name: "off->restricted", Base: ModeOff, Host: usableHost, Mode: ModeRestricted,
			WantMode: ModeRestricted, WantNetwork: NetworkOn, WantCache: CachePrivate, WantBackend: "bwrap"},
		// The cache of a mode narrowed into must be the one Resolve would
		// give that mode on this host: never "host" under a sandbox.
		{Name: "off->ww", Base: ModeOff, Host: usableHost, Mode: ModeWorkspaceWrite,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOn, WantCache: CachePrivate, WantBackend: "bwrap"},
		{Name: "off->ww/overlay", Base: ModeOff, Host: overlayHost, Mode: ModeWorkspaceWrite,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOn, WantCache: CacheOverlay, WantBackend: "bwrap"},
		// Network.
		{Name: "net-on->off", Base: ModeWorkspaceWrite, Host: usableHost, Network: NetworkOff,
			WantMode: ModeWorkspaceWrite, WantNetwork: NetworkOff, WantCache: CachePrivate, WantBackend: "bwrap"},
		{Name: "net-off->off", Base: ModeRestricted, BaseNetwork: NetworkOff, Host: usableHost, Network: NetworkOff,
			WantMode: ModeRestricted, WantNetwork: NetworkOff, WantCache: CachePrivate, WantBackend: "bwrap"},
		{Name: "net-off->unchanged", Base: ModeReadOnly, BaseNetwork: NetworkOff, Host: usableHost,
			WantMode: ModeReadOnly, WantNetwork: NetworkOff, WantCache: CacheNone, WantBackend: "bwrap"},
		// "It refuses anything that would widen p."
		{Name: "net-off->on", Base: ModeReadOnly, BaseNetwork: NetworkOff, Host: usableHost, Network: NetworkOn, WantErr: true},
		// Widenings.
		{Name: "ww->off", Base: ModeWorkspaceWrite, Host: usableHost, Mode: ModeOff, WantErr: true},
		{Name: "ro->ww", Base: ModeReadOnly, Host: usableHost, Mode: ModeWorkspaceWrite, WantErr: true},
		{Name: "ro->restricted", Base: ModeReadOnly, Host: usableHost, Mode: ModeRestricted, WantErr: true},
		{Name: "ro->off", Base: ModeReadOnly, Host: usableHost, Mode: ModeOff, WantErr: true},
		{Name: "restricted->ro", Base: ModeRestricted, Host: usableHost, Mode: ModeReadOnly, WantErr: true},
		{Name: "restricted->ww", Base: ModeRestricted, Host: usableHost, Mode: ModeWorkspaceWrite, WantErr: true},
		{Name: "restricted->off", Base: ModeRestricted, Host: usableHost, Mode: ModeOff, WantErr: true},
		// Nonsense is never a narrowing.
		{Name: "ww->bogus", Base: ModeWorkspaceWrite, Host: usableHost, Mode: "bogus", WantErr: true},
		{Name: "off->bogus", Base: ModeOff, Host: usableHost, Mode: "bogus", WantErr: true},
		// Off on a host that cannot enforce: narrowing into a sandbox is
		// refused as Resolve refuses it.
		{Name: "off->ro/unusable", Base: ModeOff, Host: HostReport{OS: "linux", InstallHint: bwrapHint}, Mode: ModeReadOnly,
			WantErr: true, WantErrIs: ErrUnenforceable},
		// Deny paths.
		{Name: "relative-deny", Base: ModeWorkspaceWrite, Host: usableHost, Deny: []string{"rel/path"}, WantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			bn := tt.BaseNetwork
			if bn == "" {
				bn = NetworkOn
			}
			p := f.resolve(t, tt.Base, bn, tt.Host)
			before := p.StartupLine()
			beforeDeny := p.Denylist()
			beforeRoots := p.WriteRoots()

			q, err := p.Narrow(tt.Mode, tt.Network, tt.Deny)
			if gotErr := err != nil; gotErr != tt.WantErr {
				got := "<nil>"
				if q != nil {
					got = q.StartupLine()
				}
				t.Fatalf("Narrow(%q, %q, %v) = %s, %v; want error %v", tt.Mode, tt.Network, tt.Deny, got, err, tt.WantErr)
			}
			if tt.WantErrIs != nil && !errors.Is(err, tt.WantErrIs) {
				t.Errorf("error %q does not wrap %v", err, tt.WantErrIs)
			}
			// Immutability: the original is untouched, whatever happened.
			if p.StartupLine() != before || !slices.Equal(p.Denylist(), beforeDeny) || !slices.Equal(p.WriteRoots(), beforeRoots) {
				t.Errorf("Narrow changed the original policy: %q -> %q", before, p.StartupLine())
			}
			if p.Mode() != tt.Base || p.Network() != bn {
				t.Errorf("original is now %s/%s, want %s/%s", p.Mode(), p.Network(), tt.Base, bn)
			}
			if err != nil {
				return
			}
			if q == p {
				t.Fatal("Narrow returned the receiver, not a copy")
			}
			if q.Mode() != tt.WantMode || q.Network() != tt.WantNetwork || q.Cache() != tt.WantCache || q.Backend() != tt.WantBackend {
				t.Errorf("narrowed mode/network/cache/backend = %s/%s/%s/%s, want %s/%s/%s/%s",
					q.Mode(), q.Network(), q.Cache(), q.Backend(), tt.WantMode, tt.WantNetwork, tt.WantCache, tt.WantBackend)
			}
		})
	}
}

func TestNarrowDenyIsCopied(t *testing.T) {
	f := newFixture(t)
	p := f.resolve(t, ModeWorkspaceWrite, NetworkOn, usableHost)
	before := p.Denylist()
	q, err := p.Narrow(ModeReadOnly, NetworkOff, []string{"/srv/x/", "/srv/y"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Denylist(), before) {
		t.Errorf("original denylist changed: %d -> %d entries", len(before), len(p.Denylist()))
	}
	got := q.Denylist()
	if len(got) != len(before)+2 || !slices.Contains(got, "/srv/x") || !slices.Contains(got, "/srv/y") {
		t.Errorf("narrowed denylist = %v, want the original plus /srv/x and /srv/y", got)
	}
	// Narrowing the copy again does not reach back into the original.
	r, err := q.Narrow("", "", []string{"/srv/z"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(q.Denylist(), "/srv/z") || slices.Contains(p.Denylist(), "/srv/z") || !slices.Contains(r.Denylist(), "/srv/z") {
		t.Error("narrowed policies share a denylist backing array")
	}
}

func TestNarrowFromOffKeepsWorkdirGuard(t *testing.T) {
	// Resolve refuses HOME as the worktree of a sandboxed mode ("binding the
	// home directory writable would unmask nothing but expose everything");
	// a policy resolved as off must not reach that through Narrow.
	for _, mode := range []Mode{ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			s := f.spec(ModeOff, NetworkOn)
			s.Workdir = f.home
			p, err := Resolve(s, usableHost)
			if err != nil {
				t.Fatal(err)
			}
			q, err := p.Narrow(mode, "", nil)
			if err == nil {
				t.Fatalf("Narrow(off -> %s) with HOME as the worktree succeeded; WriteRoots = %v", mode, q.WriteRoots())
			}
		})
	}
}
