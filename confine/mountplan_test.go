package confine

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// planCase is one policy and hand-written Layout whose plan is golden-tested.
type planCase struct {
	name    string
	f       fixture
	scratch string
	p       *Policy
	l       Layout
}

// replacer turns the case's temp paths into stable placeholders.
func (c planCase) replacer() *strings.Replacer {
	return strings.NewReplacer(c.scratch, "<SCRATCH>", c.f.work, "<WORKDIR>", c.f.home, "<HOME>")
}

func (c planCase) render(mp MountPlan) string {
	var b strings.Builder
	b.WriteString("# plan\n")
	b.WriteString(mp.String())
	b.WriteString("# args\n")
	b.WriteString(strings.Join(mp.Args(), "\n"))
	b.WriteString("\n")
	return c.replacer().Replace(b.String())
}

// planCases builds every golden case. Plan does no I/O, so the Layout paths
// need not exist; Resolve does, so the worktree, HOME and add-dirs do.
func planCases(t *testing.T) []planCase {
	t.Helper()
	type def struct {
		name    string
		mode    Mode
		network Network
		host    HostReport
		addDir  bool // HOME/shared-cache as --add-dir
		layout  func(f fixture, scratch string) Layout
	}
	// The pieces every sandboxed layout shares.
	deny := func(f fixture) []Entry {
		return []Entry{
			{Path: filepath.Join(f.home, ".ssh"), Kind: PathDir},
			{Path: filepath.Join(f.home, ".netrc"), Kind: PathFile},
			// ~/.aws is a symlink: masked at its resolved spelling.
			{Path: filepath.Join(f.home, "dotfiles", "aws"), Kind: PathDir},
			{Path: filepath.Join(f.home, ".docker", "config.json"), Kind: PathFile},
			{Path: "/etc/shadow", Kind: PathFile},
		}
	}
	proc := []Entry{{Path: "/proc/kcore", Kind: PathFile}, {Path: "/proc/acpi", Kind: PathDir}}
	sockets := []string{"/run/docker.sock", "/var/run/docker.sock"}
	surfacesOf := func(dir string) []Entry {
		return []Entry{
			{Path: filepath.Join(dir, "config"), Kind: PathFile},
			{Path: filepath.Join(dir, "config.worktree"), Kind: PathFile},
			{Path: filepath.Join(dir, "hooks"), Kind: PathDir},
			{Path: filepath.Join(dir, "commondir"), Kind: PathFile},
			{Path: filepath.Join(dir, "gitdir"), Kind: PathFile},
		}
	}
	mainRepo := func(f fixture) []GitDir {
		g := filepath.Join(f.work, ".git")
		return []GitDir{{Dir: g, Surfaces: surfacesOf(g)}}
	}
	base := func(f fixture, scratch string) Layout {
		return Layout{
			Scratch: scratch, Workdir: f.work, Deny: deny(f), Sockets: sockets,
			Proc: proc, ProcReadOnly: true,
			// Host sockets: masked but where the sandbox sees something
			// else anyway (private /tmp, /run/user, a masked directory, a
			// masked service directory).
			HostSockets: []string{
				"/srv/app/app.sock", filepath.Join(f.work, "dev.sock"), "/tmp/.X11-unix/X0",
				"/run/user/1000/bus", filepath.Join(f.home, ".ssh", "agent.sock"),
				"/run/postgresql/.s.PGSQL.5432", "/run/docker.sock",
			},
			SocketDirs: []string{"/run/postgresql"},
		}
	}
	systemRoots := []Entry{
		{Path: "/usr", Kind: PathDir},
		{Path: "/bin", Kind: PathSymlink, Target: "usr/bin"},
		{Path: "/sbin", Kind: PathSymlink, Target: "usr/sbin"},
		{Path: "/lib", Kind: PathSymlink, Target: "usr/lib"},
		{Path: "/etc", Kind: PathDir},
		{Path: "/opt", Kind: PathDir},
	}
	restricted := func(f fixture, scratch string) Layout {
		l := base(f, scratch)
		// Under restricted HOME is not visible: only system secrets remain.
		l.Deny = []Entry{{Path: "/etc/shadow", Kind: PathFile}, {Path: "/etc/ssh/ssh_host_ed25519_key", Kind: PathFile}}
		l.SystemRoots = systemRoots
		l.GitConfig = []string{filepath.Join(f.home, ".gitconfig"), filepath.Join(f.home, ".config", "git", "config")}
		g := filepath.Join(f.work, ".git")
		mod := filepath.Join(g, "modules", "lib")
		l.Git = []GitDir{{
			Dir:      g,
			Chain:    []string{filepath.Join(g, "modules"), mod},
			Surfaces: append(surfacesOf(g), surfacesOf(mod)...),
		}}
		return l
	}
	defs := []def{
		{name: "read-only", mode: ModeReadOnly, network: NetworkOn, host: usableHost, addDir: true,
			layout: base},
		{name: "read-only-net-off", mode: ModeReadOnly, network: NetworkOff, host: usableHost,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				l.Proc, l.ProcReadOnly = nil, false // a server not started by root
				return l
			}},
		{name: "workspace-write", mode: ModeWorkspaceWrite, network: NetworkOn, host: usableHost, addDir: true,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				l.Git = mainRepo(f)
				return l
			}},
		{name: "workspace-write-net-off", mode: ModeWorkspaceWrite, network: NetworkOff, host: usableHost,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				l.Git = mainRepo(f)
				return l
			}},
		{name: "workspace-write-linked-worktree", mode: ModeWorkspaceWrite, network: NetworkOn, host: usableHost,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				common := filepath.Join(f.home, "src", "main", ".git")
				wt := filepath.Join(common, "worktrees", "work")
				l.Git = []GitDir{{
					Dir:          common,
					BindWritable: true,
					Chain:        []string{filepath.Join(common, "worktrees"), wt},
					Surfaces:     append(surfacesOf(common), surfacesOf(wt)...),
				}}
				l.GitLinks = []string{filepath.Join(f.work, ".git")}
				return l
			}},
		{name: "workspace-write-no-repo", mode: ModeWorkspaceWrite, network: NetworkOn, host: usableHost,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				l.PinAbsentGit = filepath.Join(f.work, ".git")
				return l
			}},
		{name: "workspace-write-overlay", mode: ModeWorkspaceWrite, network: NetworkOn, host: overlayHost,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				l.Git = mainRepo(f)
				l.CacheRoots = []string{filepath.Join(f.home, ".cache"), filepath.Join(f.home, "go", "pkg")}
				return l
			}},
		{name: "restricted", mode: ModeRestricted, network: NetworkOn, host: usableHost, addDir: true,
			layout: restricted},
		{name: "restricted-net-off", mode: ModeRestricted, network: NetworkOff, host: usableHost,
			layout: restricted},
		// Hook directories (docs/hooks.md, "Hooks", "Where it runs"): one
		// holding a masked subtree, one below the private /tmp, one holding
		// a daemon socket.
		{name: "workspace-write-hooks", mode: ModeWorkspaceWrite, network: NetworkOff, host: usableHost, addDir: true,
			layout: func(f fixture, scratch string) Layout {
				l := base(f, scratch)
				l.Git = mainRepo(f)
				l.HookDirs = []string{filepath.Join(f.home, ".config"), "/tmp/evener-hooks", "/opt/evener-hooks"}
				l.Deny = append(l.Deny, Entry{Path: filepath.Join(f.home, ".config", "gh"), Kind: PathDir})
				return l
			}},
		{name: "restricted-hooks", mode: ModeRestricted, network: NetworkOff, host: usableHost,
			layout: func(f fixture, scratch string) Layout {
				l := restricted(f, scratch)
				l.HookDirs = []string{filepath.Join(f.home, ".config"), "/opt/evener-hooks", "/run/containerd"}
				l.Sockets = []string{"/run/docker.sock", "/run/containerd/containerd.sock"}
				l.Deny = append(l.Deny, Entry{Path: filepath.Join(f.home, ".config", "gh"), Kind: PathDir})
				return l
			}},
	}
	var out []planCase
	for _, d := range defs {
		f := newFixture(t)
		s := f.spec(d.mode, d.network)
		if d.addDir {
			add := filepath.Join(f.home, "shared-cache")
			mustMkdir(t, add)
			s.AddDirs = []string{add}
		}
		p, err := Resolve(s, d.host)
		if err != nil {
			t.Fatalf("%s: Resolve: %v", d.name, err)
		}
		if p.Mode() != d.mode || p.Network() != d.network {
			t.Fatalf("%s: resolved %s/%s, want %s/%s", d.name, p.Mode(), p.Network(), d.mode, d.network)
		}
		scratch := filepath.Join(f.scratch, "evener-mcp-1")
		out = append(out, planCase{name: d.name, f: f, scratch: scratch, p: p, l: d.layout(f, scratch)})
	}
	return out
}

func TestPlanGolden(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got := c.render(Plan(c.p, c.l))
			if strings.Contains(got, c.f.root) {
				t.Fatalf("rendered plan still holds the temp root %s:\n%s", c.f.root, got)
			}
			golden := filepath.Join("testdata", "plan-"+c.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./confine -run TestPlanGolden -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s (rerun with -update if the change is intended)\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

func isMask(k MountKind) bool { return k == MountMaskFile || k == MountMaskDir }

func isWritable(k MountKind) bool {
	return k == MountBind || k == MountDevBind || k == MountOverlay
}

func TestPlanMasksLast(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			mp := Plan(c.p, c.l)
			lastOther := -1
			for i, m := range mp {
				if !isMask(m.Kind) && m.Kind != MountRemount {
					lastOther = i
				}
			}
			found := 0
			for _, d := range c.l.Deny {
				i := slices.IndexFunc(mp, func(m Mount) bool { return m.Dst == d.Path && isMask(m.Kind) })
				if i < 0 {
					t.Errorf("denylist entry %s is not masked", d.Path)
					continue
				}
				found++
				if i <= lastOther {
					t.Errorf("mask of %s (#%d) comes before %s %s (#%d): a later mount could re-expose it",
						d.Path, i, mp[lastOther].Kind, mp[lastOther].Dst, lastOther)
				}
				want := MountMaskFile
				if d.Kind == PathDir {
					want = MountMaskDir
				}
				if mp[i].Kind != want {
					t.Errorf("%s (kind %d) masked as %s, want %s", d.Path, d.Kind, mp[i].Kind, want)
				}
			}
			if found != len(c.l.Deny) {
				t.Errorf("masked %d of %d denylist entries", found, len(c.l.Deny))
			}
			// The rendered argv keeps that order: every deny mask's target
			// appears after the last non-mask operation.
			args := mp.Args()
			for _, d := range c.l.Deny {
				at := slices.Index(args, d.Path)
				for j := at + 1; j < len(args); j++ {
					if args[j] == "--bind" || args[j] == "--tmp-overlay" || args[j] == "--symlink" || args[j] == "--dir" {
						t.Errorf("argv has %s after the mask of %s", args[j], d.Path)
					}
				}
			}
		})
	}
}

func TestPlanRestrictedNoRootBind(t *testing.T) {
	for _, c := range planCases(t) {
		if c.p.Mode() != ModeRestricted {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			mp := Plan(c.p, c.l)
			for _, m := range mp {
				if (m.Kind == MountROBind || m.Kind == MountBind || m.Kind == MountDevBind) && (m.Src == "/" || m.Dst == "/") {
					t.Errorf("restricted plan binds the host root: %+v", m)
				}
			}
			args := strings.Join(mp.Args(), "\x00")
			for _, bad := range []string{"--ro-bind\x00/\x00/", "--bind\x00/\x00/", "--dev-bind\x00/\x00/"} {
				if strings.Contains("\x00"+args+"\x00", "\x00"+bad+"\x00") {
					t.Errorf("restricted argv contains %q", strings.ReplaceAll(bad, "\x00", " "))
				}
			}
			if mp[0].Kind != MountTmpfs || mp[0].Dst != "/" {
				t.Errorf("restricted plan starts with %+v, want an empty tmpfs root", mp[0])
			}
			// Restricted reads the system roots, never /proc of the host nor HOME as
			// a whole.
			for _, m := range mp {
				if m.Dst == c.f.home || m.Src == c.f.home {
					t.Errorf("restricted plan mounts HOME: %+v", m)
				}
			}
		})
	}
}

func TestPlanReadOnlyWritesOnlyScratch(t *testing.T) {
	for _, c := range planCases(t) {
		if c.p.Mode() != ModeReadOnly {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			// Even a layout carrying git dirs and caches (as a stale or
			// mistaken Inspect could) gets no writable mount in read-only.
			l := c.l
			l.Git = []GitDir{{Dir: filepath.Join(c.f.work, ".git"), BindWritable: true, Chain: []string{filepath.Join(c.f.work, ".git", "worktrees")}}}
			l.GitLinks = []string{filepath.Join(c.f.work, "sub", ".git")}
			for _, lay := range []Layout{c.l, l} {
				mp := Plan(c.p, lay)
				n := 0
				for _, m := range mp {
					if isWritable(m.Kind) {
						if m.Dst != c.scratch {
							t.Errorf("read-only plan has a writable %s of %s", m.Kind, m.Dst)
						}
						n++
					}
				}
				if n != 1 {
					t.Errorf("read-only plan has %d writable mounts, want exactly the scratch", n)
				}
				args := mp.Args()
				for i, a := range args {
					if (a == "--bind" || a == "--dev-bind") && (i+2 >= len(args) || args[i+2] != c.scratch) {
						t.Errorf("read-only argv has %s at %d not targeting the scratch", a, i)
					}
				}
				// The worktree stays visible (read-only) over the private /tmp.
				if !slices.ContainsFunc(mp, func(m Mount) bool { return m.Kind == MountROBind && m.Dst == c.f.work }) {
					t.Error("read-only plan does not show the worktree")
				}
			}
		})
	}
}

func TestPlanGitSurfacesReadOnly(t *testing.T) {
	for _, c := range planCases(t) {
		if !c.p.Mode().Writes() || len(c.l.Git) == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			mp := Plan(c.p, c.l)
			rootBind := slices.IndexFunc(mp, func(m Mount) bool { return m.Kind == MountBind && m.Dst == c.f.work })
			if rootBind < 0 {
				t.Fatalf("no write-root bind of %s", c.f.work)
			}
			for _, g := range c.l.Git {
				gi := slices.IndexFunc(mp, func(m Mount) bool { return m.Kind == MountBind && m.Dst == g.Dir })
				if gi < 0 {
					t.Errorf("git dir %s is not pinned by a bind", g.Dir)
				}
				for _, s := range g.Surfaces {
					si := slices.IndexFunc(mp, func(m Mount) bool { return m.Dst == s.Path })
					if si < 0 {
						t.Errorf("surface %s is not mounted", s.Path)
						continue
					}
					if mp[si].Kind != MountROBind || mp[si].Src != s.Path {
						t.Errorf("surface %s is mounted as %s <- %s, want ro-bind of itself", s.Path, mp[si].Kind, mp[si].Src)
					}
					// After every writable mount at or above it, or the
					// writable one would cover it.
					for j, m := range mp {
						if isWritable(m.Kind) && Within(s.Path, m.Dst) && j > si {
							t.Errorf("surface %s (#%d) is covered by the later %s of %s (#%d)", s.Path, si, m.Kind, m.Dst, j)
						}
					}
					if si < rootBind || si < gi {
						t.Errorf("surface %s (#%d) comes before the write-root bind (#%d) or its git dir bind (#%d)", s.Path, si, rootBind, gi)
					}
				}
				for _, ch := range g.Chain {
					ci := slices.IndexFunc(mp, func(m Mount) bool { return m.Kind == MountBind && m.Dst == ch })
					if ci < 0 || ci < gi {
						t.Errorf("chain dir %s is not pinned after its git dir (#%d at %d)", ch, gi, ci)
					}
				}
			}
			for _, gl := range c.l.GitLinks {
				if !slices.ContainsFunc(mp, func(m Mount) bool { return m.Kind == MountROBind && m.Dst == gl }) {
					t.Errorf("gitlink %s is not pinned read-only", gl)
				}
			}
		})
	}
}

// TestPlanHookDirs: every hook directory is bound read-only, after the
// private /tmp, before every writable mount and every deny mask; never
// writable. In restricted mode a daemon socket inside one is masked after
// it; the others are not shown at all.
func TestPlanHookDirs(t *testing.T) {
	n := 0
	for _, c := range planCases(t) {
		if len(c.l.HookDirs) == 0 {
			continue
		}
		n++
		t.Run(c.name, func(t *testing.T) {
			mp := Plan(c.p, c.l)
			tmp := slices.IndexFunc(mp, func(m Mount) bool { return m.Kind == MountTmpfs && m.Dst == "/tmp" })
			for _, d := range c.l.HookDirs {
				i := slices.IndexFunc(mp, func(m Mount) bool { return m.Dst == d })
				if i < 0 || mp[i].Kind != MountROBind || mp[i].Src != d {
					t.Errorf("hook dir %s is not bound read-only to itself", d)
					continue
				}
				if i < tmp {
					t.Errorf("hook dir %s (#%d) is bound before the private /tmp (#%d) covers it", d, i, tmp)
				}
				for j, m := range mp {
					if j < i && (isMask(m.Kind) && Within(m.Dst, d) || isWritable(m.Kind)) {
						t.Errorf("%s of %s (#%d) comes before the hook dir %s (#%d)", m.Kind, m.Dst, j, d, i)
					}
					if isWritable(m.Kind) && m.Dst == d {
						t.Errorf("hook dir %s is mounted writable", d)
					}
				}
			}
			if c.p.Mode() == ModeRestricted {
				for _, s := range c.l.Sockets {
					masked := slices.ContainsFunc(mp, func(m Mount) bool { return m.Dst == s && m.Kind == MountMaskFile })
					if inside := underAny(s, c.l.HookDirs); masked != inside {
						t.Errorf("socket %s: masked %v, inside a hook dir %v", s, masked, inside)
					}
				}
			}
		})
	}
	if n < 2 {
		t.Fatalf("%d plan cases carry hook directories, want at least two", n)
	}
}

func TestPlanPinAbsentGit(t *testing.T) {
	for _, c := range planCases(t) {
		if c.l.PinAbsentGit == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			mp := Plan(c.p, c.l)
			pi := slices.IndexFunc(mp, func(m Mount) bool { return m.Dst == c.l.PinAbsentGit })
			wi := slices.IndexFunc(mp, func(m Mount) bool { return m.Kind == MountBind && m.Dst == c.f.work })
			if pi < 0 || mp[pi].Kind != MountMaskDir || pi < wi {
				t.Errorf("absent .git pinned at #%d (%v), worktree bound at #%d: want an empty dir after the bind", pi, mp[pi].Kind, wi)
			}
		})
	}
}

func TestPlanDeterministic(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			a, b := Plan(c.p, c.l), Plan(c.p, c.l)
			if !reflect.DeepEqual(a, b) {
				t.Error("two Plan calls on the same inputs differ")
			}
			if !slices.Equal(a.Args(), b.Args()) || a.String() != b.String() {
				t.Error("two renderings of the same plan differ")
			}
		})
	}
}

func TestPlanModeOff(t *testing.T) {
	// Mode off never reaches Plan in the launcher; if it does, the plan
	// must not claim a root view it never builds.
	f := newFixture(t)
	p := f.resolve(t, ModeOff, NetworkOn, usableHost)
	mp := Plan(p, Layout{Workdir: f.work})
	for _, m := range mp {
		if m.Dst == "/" {
			t.Errorf("off plan mounts the root: %+v", m)
		}
	}
}

// parseArgs reads a plan's bwrap argv back, checking every operand: paths
// absolute and clean (a symlink's target excepted), numbers numeric.
func parseArgs(t *testing.T, args []string) int {
	t.Helper()
	arity := map[string]int{
		"--ro-bind": 2, "--bind": 2, "--dev-bind": 2, "--symlink": 2,
		"--tmpfs": 1, "--remount-ro": 1, "--dev": 1, "--proc": 1, "--dir": 1,
		"--overlay-src": 1, "--tmp-overlay": 1, "--size": 1, "--perms": 1,
	}
	ops := 0
	for i := 0; i < len(args); {
		flagName := args[i]
		n, ok := arity[flagName]
		if !ok {
			t.Errorf("argv[%d] = %q: not a known bwrap filesystem option", i, flagName)
			return ops
		}
		if i+n >= len(args) {
			t.Errorf("%s at argv[%d] lacks its %d operand(s)", flagName, i, n)
			return ops
		}
		for j := 1; j <= n; j++ {
			v := args[i+j]
			switch {
			case flagName == "--size":
				if x, err := strconv.ParseInt(v, 10, 64); err != nil || x <= 0 {
					t.Errorf("--size %q is not a positive integer", v)
				}
			case flagName == "--perms":
				if _, err := strconv.ParseUint(v, 8, 32); err != nil || len(v) != 4 {
					t.Errorf("--perms %q is not a 4-digit octal mode", v)
				}
			case flagName == "--symlink" && j == 1:
				if v == "" {
					t.Errorf("--symlink with an empty target")
				}
			default:
				if !filepath.IsAbs(v) || filepath.Clean(v) != v {
					t.Errorf("%s operand %q is not a clean absolute path", flagName, v)
				}
			}
		}
		if flagName != "--size" && flagName != "--perms" && flagName != "--overlay-src" {
			ops++
		}
		i += n + 1
	}
	return ops
}

func TestPlanArgs(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			mp := Plan(c.p, c.l)
			args := mp.Args()
			for i, a := range args {
				if a == "" {
					t.Errorf("argv[%d] is empty", i)
				}
			}
			if ops := parseArgs(t, args); ops != len(mp) {
				t.Errorf("argv holds %d mount operations, plan has %d", ops, len(mp))
			}
			for _, m := range mp {
				if !filepath.IsAbs(m.Dst) {
					t.Errorf("mount %+v has a relative destination", m)
				}
				if m.Src != "" && m.Kind != MountSymlink && !filepath.IsAbs(m.Src) {
					t.Errorf("mount %+v has a relative source", m)
				}
				if m.Why == "" {
					t.Errorf("mount %+v does not say why", m)
				}
			}
		})
	}
}

func TestPlanArgsRendering(t *testing.T) {
	tests := []struct {
		Mount Mount
		Want  []string
	}{
		{Mount{Kind: MountROBind, Src: "/a", Dst: "/b"}, []string{"--ro-bind", "/a", "/b"}},
		{Mount{Kind: MountBind, Src: "/a", Dst: "/a"}, []string{"--bind", "/a", "/a"}},
		{Mount{Kind: MountDevBind, Src: "/dev/null", Dst: "/x"}, []string{"--dev-bind", "/dev/null", "/x"}},
		{Mount{Kind: MountTmpfs, Dst: "/tmp"}, []string{"--tmpfs", "/tmp"}},
		{Mount{Kind: MountTmpfs, Dst: "/tmp", Size: 1024}, []string{"--size", "1024", "--tmpfs", "/tmp"}},
		{Mount{Kind: MountRemount, Dst: "/proc"}, []string{"--remount-ro", "/proc"}},
		{Mount{Kind: MountDev, Dst: "/dev"}, []string{"--dev", "/dev"}},
		{Mount{Kind: MountProc, Dst: "/proc"}, []string{"--proc", "/proc"}},
		{Mount{Kind: MountDir, Dst: "/d"}, []string{"--dir", "/d"}},
		{Mount{Kind: MountSymlink, Src: "usr/bin", Dst: "/bin"}, []string{"--symlink", "usr/bin", "/bin"}},
		{Mount{Kind: MountOverlay, Src: "/c", Dst: "/c"}, []string{"--overlay-src", "/c", "--tmp-overlay", "/c"}},
		{Mount{Kind: MountMaskFile, Dst: "/s"}, []string{"--ro-bind", "/dev/null", "/s"}},
		{Mount{Kind: MountMaskDir, Dst: "/d"}, []string{"--perms", "0000", "--size", "4096", "--tmpfs", "/d"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.Mount.Kind), func(t *testing.T) {
			if got := (MountPlan{tt.Mount}).Args(); !slices.Equal(got, tt.Want) {
				t.Errorf("Args() = %q, want %q", got, tt.Want)
			}
		})
	}
	t.Run("unknown-kind-panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("Args() of an unknown kind did not panic")
			}
		}()
		_ = MountPlan{{Kind: "bogus", Dst: "/x"}}.Args()
	})
}
