package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seatbeltHost is a macOS host on which every mode can be enforced.
var seatbeltHost = HostReport{OS: "darwin", SandboxExec: SeatbeltExec}

// newSBFixture is newFixture rooted directly under /tmp on every OS, so a
// golden file reads the same on Linux (/tmp/x, twin /private/tmp/x) and on
// a Mac (/private/tmp/x, twin /tmp/x).
func newSBFixture(t *testing.T) fixture {
	t.Helper()
	return newFixtureUnder(t, "/tmp")
}

// sbReplacer maps the fixture's root, under each of its spellings, to
// <ROOT>: the /tmp spelling is the token on every OS.
func sbReplacer(f fixture) *strings.Replacer {
	base := "/tmp/" + filepath.Base(f.root)
	return strings.NewReplacer(
		dataVolume+"/private"+base, dataVolume+"/private<ROOT>",
		dataVolume+base, dataVolume+"<ROOT>",
		"/private"+base, "/private<ROOT>",
		base, "<ROOT>",
	)
}

type sbCase struct {
	name string
	f    fixture
	p    *Policy
	l    SeatbeltLayout
}

// sbCases builds every golden case: a policy resolved for a macOS host and
// a hand-written layout (SeatbeltProfile does no I/O).
func sbCases(t *testing.T) []sbCase {
	t.Helper()
	type def struct {
		name    string
		mode    Mode
		network Network
		addDir  bool
		protect bool // protected paths and a runner state directory
		layout  func(f fixture, scratch string) SeatbeltLayout
	}
	proxy := &SeatbeltProxy{HTTPPort: 49152, SOCKSPort: 49153}
	deny := func(f fixture) []string {
		return []string{
			filepath.Join(f.home, ".ssh"), filepath.Join(f.home, ".aws"), filepath.Join(f.home, "dotfiles", "aws"),
			filepath.Join(f.home, ".netrc"), "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key",
		}
	}
	base := func(f fixture, scratch string) SeatbeltLayout {
		return SeatbeltLayout{Scratch: scratch, Deny: deny(f), Proxy: proxy}
	}
	mainRepo := func(f fixture, scratch string) SeatbeltLayout {
		l := base(f, scratch)
		l.Git = []SeatbeltGitDir{{Dir: filepath.Join(f.work, ".git"), Grant: GitCovered,
			Sub: []string{filepath.Join(f.work, ".git", "modules", "lib")}}}
		return l
	}
	restricted := func(f fixture, scratch string) SeatbeltLayout {
		l := mainRepo(f, scratch)
		l.Toolchain = []string{"/Applications/Xcode.app", seatbeltCommandLineTools}
		l.GitConfig = []string{filepath.Join(f.home, ".gitconfig"), filepath.Join(f.home, "dotfiles", "gitconfig"), filepath.Join(f.home, ".config", "git", "config")}
		l.Exe = "/opt/evener/bin/evener-mcp"
		return l
	}
	withProtect := func(lay func(f fixture, scratch string) SeatbeltLayout) func(f fixture, scratch string) SeatbeltLayout {
		return func(f fixture, s string) SeatbeltLayout {
			l := lay(f, s)
			l.Protect = []string{filepath.Join(f.work, "Makefile"), filepath.Join(f.work, "a", "b", "prot"),
				filepath.Join(f.work, "d", "c.txt"), filepath.Join(f.work, "ln2", "c.txt")}
			l.StateRW = []string{filepath.Join(f.root, "agent-state")}
			return l
		}
	}
	defs := []def{
		{name: "read-only-protect", mode: ModeReadOnly, network: NetworkOff, protect: true, layout: withProtect(func(f fixture, s string) SeatbeltLayout {
			l := base(f, s)
			l.Proxy = nil
			return l
		})},
		{name: "workspace-write-protect", mode: ModeWorkspaceWrite, network: NetworkOn, protect: true, layout: withProtect(mainRepo)},
		{name: "restricted-protect", mode: ModeRestricted, network: NetworkOn, protect: true, layout: withProtect(restricted)},
		{name: "read-only", mode: ModeReadOnly, network: NetworkOn, addDir: true, layout: base},
		{name: "read-only-net-off", mode: ModeReadOnly, network: NetworkOff, layout: func(f fixture, s string) SeatbeltLayout {
			l := base(f, s)
			l.Proxy = nil
			return l
		}},
		{name: "workspace-write", mode: ModeWorkspaceWrite, network: NetworkOn, addDir: true, layout: mainRepo},
		{name: "workspace-write-net-off", mode: ModeWorkspaceWrite, network: NetworkOff, layout: mainRepo},
		{name: "workspace-write-linked-worktree", mode: ModeWorkspaceWrite, network: NetworkOn,
			layout: func(f fixture, s string) SeatbeltLayout {
				l := base(f, s)
				common := filepath.Join(f.home, "src", "main", ".git")
				own := filepath.Join(common, "worktrees", "work")
				l.Git = []SeatbeltGitDir{{Dir: common, Grant: GitNamed, Own: own, Sub: []string{own}}}
				l.GitLinks = []string{filepath.Join(f.work, ".git")}
				return l
			}},
		{name: "workspace-write-submodule", mode: ModeWorkspaceWrite, network: NetworkOn,
			layout: func(f fixture, s string) SeatbeltLayout {
				l := base(f, s)
				l.Git = []SeatbeltGitDir{{Dir: filepath.Join(f.home, "super", ".git", "modules", "work"), Grant: GitWhole}}
				l.GitLinks = []string{filepath.Join(f.work, ".git")}
				return l
			}},
		{name: "workspace-write-no-repo", mode: ModeWorkspaceWrite, network: NetworkOn,
			layout: func(f fixture, s string) SeatbeltLayout {
				l := base(f, s)
				l.PinAbsentGit = filepath.Join(f.work, ".git")
				return l
			}},
		{name: "workspace-write-scratch-parent", mode: ModeWorkspaceWrite, network: NetworkOff,
			layout: func(f fixture, s string) SeatbeltLayout {
				l := mainRepo(f, s)
				l.Proxy = nil
				l.ScratchParent = filepath.Dir(s)
				return l
			}},
		{name: "restricted", mode: ModeRestricted, network: NetworkOn, addDir: true, layout: restricted},
		{name: "restricted-net-off", mode: ModeRestricted, network: NetworkOff, layout: func(f fixture, s string) SeatbeltLayout {
			l := restricted(f, s)
			l.Proxy = nil
			return l
		}},
		// An MCP server behind this one with network = "host", in a
		// session whose own network is off: every network operation.
		{name: "restricted-server-host-network", mode: ModeRestricted, network: NetworkOff, layout: func(f fixture, s string) SeatbeltLayout {
			l := restricted(f, s)
			l.Proxy = nil
			l.Network = NetworkHost
			return l
		}},
		{name: "restricted-hooks", mode: ModeRestricted, network: NetworkOff, layout: func(f fixture, s string) SeatbeltLayout {
			l := restricted(f, s)
			l.Proxy = nil
			l.HookDirs = []string{filepath.Join(f.home, ".config", "hooks"), "/opt/evener-hooks"}
			l.Deny = append(l.Deny, filepath.Join(f.home, ".config", "hooks", "gh"))
			return l
		}},
	}
	var out []sbCase
	for _, d := range defs {
		f := newSBFixture(t)
		s := f.spec(d.mode, d.network)
		if d.addDir {
			add := filepath.Join(f.home, "shared-cache")
			mustMkdir(t, add)
			s.AddDirs = []string{add}
		}
		if d.protect {
			state := filepath.Join(f.root, "agent-state")
			mustMkdir(t, state)
			s.StateRW = []string{state}
			s.Protected = []string{filepath.Join(f.work, "Makefile"), filepath.Join(f.work, "a", "b", "prot"), filepath.Join(f.work, "ln2", "c.txt")}
		}
		p, err := Resolve(s, seatbeltHost)
		if err != nil {
			t.Fatalf("%s: Resolve: %v", d.name, err)
		}
		if p.Mode() != d.mode || p.Network() != d.network || p.Backend() != "seatbelt" {
			t.Fatalf("%s: resolved %s/%s/%s, want %s/%s/seatbelt", d.name, p.Mode(), p.Network(), p.Backend(), d.mode, d.network)
		}
		scratch := filepath.Join(f.scratch, "evener-mcp-1")
		out = append(out, sbCase{name: d.name, f: f, p: p, l: d.layout(f, scratch)})
	}
	return out
}

func TestSeatbeltGolden(t *testing.T) {
	for _, c := range sbCases(t) {
		t.Run(c.name, func(t *testing.T) {
			prof, err := SeatbeltProfile(c.p, c.l)
			if err != nil {
				t.Fatal(err)
			}
			got := sbReplacer(c.f).Replace(prof)
			if strings.Contains(got, filepath.Base(c.f.root)) {
				t.Fatalf("rendered profile still holds the temp root %s:\n%s", c.f.root, got)
			}
			golden := filepath.Join("testdata", "seatbelt", c.name+".sb")
			if *update {
				mustMkdir(t, filepath.Dir(golden))
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./confine -run TestSeatbeltGolden -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s (rerun with -update if the change is intended)\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestSeatbeltProfileParses: every profile is one well-formed list of
// rules the evaluator understands, and every path in it is absolute and
// clean. Two renderings are identical.
func TestSeatbeltProfileParses(t *testing.T) {
	for _, c := range sbCases(t) {
		t.Run(c.name, func(t *testing.T) {
			prof, err := SeatbeltProfile(c.p, c.l)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := SeatbeltProfile(c.p, c.l)
			if prof != again {
				t.Fatal("two renderings of the same inputs differ")
			}
			rules, err := parseSBPL(prof)
			if err != nil {
				t.Fatalf("%v\n%s", err, prof)
			}
			if len(rules) < 10 || rules[0].action != "version" {
				t.Fatalf("profile parsed into %d rules, first %+v", len(rules), rules[0])
			}
			for _, r := range rules {
				for _, f := range r.filters {
					if (f.kind == "literal" || f.kind == "subpath") && (!filepath.IsAbs(f.arg) || filepath.Clean(f.arg) != f.arg) {
						t.Errorf("%s filter %q is not a clean absolute path", f.kind, f.arg)
					}
				}
			}
		})
	}
}

func TestSeatbeltModeOffHasNoProfile(t *testing.T) {
	f := newSBFixture(t)
	p, err := Resolve(f.spec(ModeOff, NetworkOn), seatbeltHost)
	if err != nil {
		t.Fatal(err)
	}
	if prof, err := SeatbeltProfile(p, SeatbeltLayout{}); prof != "" || err != nil {
		t.Fatalf("mode off: profile %q, %v; want none", prof, err)
	}
}

func TestSeatbeltNetworkOnNeedsPorts(t *testing.T) {
	f := newSBFixture(t)
	p, err := Resolve(f.spec(ModeWorkspaceWrite, NetworkOn), seatbeltHost)
	if err != nil {
		t.Fatal(err)
	}
	for _, px := range []*SeatbeltProxy{nil, {HTTPPort: 0, SOCKSPort: 1080}, {HTTPPort: 3128, SOCKSPort: 70000}} {
		if _, err := SeatbeltProfile(p, SeatbeltLayout{Scratch: f.scratch, Proxy: px}); !errors.Is(err, ErrSandboxSetup) {
			t.Errorf("proxy %+v: err %v, want ErrSandboxSetup", px, err)
		}
	}
	// With the network off, the ports are ignored and no TCP is allowed.
	off, _ := p.Narrow("", NetworkOff, nil)
	prof, err := SeatbeltProfile(off, SeatbeltLayout{Scratch: f.scratch, Proxy: &SeatbeltProxy{HTTPPort: 1, SOCKSPort: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(prof, "remote ip") || !strings.Contains(prof, "(deny network*)") {
		t.Errorf("network off profile allows TCP or lacks the network denial:\n%s", prof)
	}
}

func TestSBString(t *testing.T) {
	tests := []struct {
		In, Want string
		WantErr  bool
	}{
		{In: "/a/b", Want: `"/a/b"`},
		{In: `/a "quoted" dir`, Want: `"/a \"quoted\" dir"`},
		{In: `/back\slash`, Want: `"/back\\slash"`},
		{In: `/a\"b`, Want: `"/a\\\"b"`},
		{In: "/ünï cödé/日本", Want: `"/ünï cödé/日本"`},
		{In: "/a)(allow default)(b", Want: `"/a)(allow default)(b"`},
		{In: "/new\nline", WantErr: true},
		{In: "/tab\there", WantErr: true},
		{In: "/del\x7f", WantErr: true},
		{In: "/nul\x00", WantErr: true},
		{In: "/bad\xffutf8", WantErr: true},
	}
	for _, tt := range tests {
		got, err := sbString(tt.In)
		if tt.WantErr {
			if !errors.Is(err, errSeatbeltPath) {
				t.Errorf("sbString(%q) = %q, %v; want errSeatbeltPath", tt.In, got, err)
			}
			continue
		}
		if err != nil || got != tt.Want {
			t.Errorf("sbString(%q) = %q, %v; want %q", tt.In, got, err, tt.Want)
		}
		// What the evaluator reads back is the input.
		toks, err := tokenizeSBPL(got)
		if err != nil || len(toks) != 1 || !toks[0].str || toks[0].text != tt.In {
			t.Errorf("sbString(%q) reads back as %+v, %v", tt.In, toks, err)
		}
	}
}

// TestSeatbeltHostilePath: a worktree whose name carries SBPL syntax is
// quoted, and one no string can carry fails the profile (and so the
// spawn) instead of being written in.
func TestSeatbeltHostilePath(t *testing.T) {
	f := newSBFixture(t)
	for _, name := range []string{`wt") (allow file-write* (subpath "/`, `wt\`} {
		wt := filepath.Join(f.root, name)
		mustMkdir(t, wt)
		s := f.spec(ModeWorkspaceWrite, NetworkOff)
		s.Workdir = wt
		p, err := Resolve(s, seatbeltHost)
		if err != nil {
			t.Fatal(err)
		}
		prof, err := SeatbeltProfile(p, SeatbeltLayout{Scratch: f.scratch})
		if err != nil {
			t.Fatal(err)
		}
		rules, err := parseSBPL(prof)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			for _, fl := range r.filters {
				if fl.arg == "/" && r.action == "allow" {
					t.Errorf("%q smuggled a grant of /: %+v", name, r)
				}
			}
		}
		if v := evalSBPL(rules, opWrite, wt+"/x"); !v {
			t.Errorf("%q: the worktree is not writable", name)
		}
	}
	bad := filepath.Join(f.root, "wt\nnewline")
	mustMkdir(t, bad)
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Workdir = bad
	p, err := Resolve(s, seatbeltHost)
	if err != nil {
		t.Fatal(err)
	}
	if prof, err := SeatbeltProfile(p, SeatbeltLayout{Scratch: f.scratch}); !errors.Is(err, errSeatbeltPath) {
		t.Fatalf("a newline in the worktree gave %v and\n%s", err, prof)
	}
}

func TestTwins(t *testing.T) {
	tests := []struct {
		In   string
		Want []string
	}{
		{"/tmp", []string{"/tmp", "/private/tmp"}},
		{"/tmp/x", []string{"/tmp/x", "/private/tmp/x"}},
		{"/private/var/folders/a/T", []string{"/private/var/folders/a/T", "/var/folders/a/T"}},
		{"/etc/ssh/k", []string{"/etc/ssh/k", "/private/etc/ssh/k"}},
		{"/private", []string{"/private"}},
		{"/tmpfoo/x", []string{"/tmpfoo/x"}},
		{"/Users/me", []string{"/Users/me"}},
	}
	for _, tt := range tests {
		if got := twins(tt.In); !slices.Equal(got, tt.Want) {
			t.Errorf("twins(%q) = %q, want %q", tt.In, got, tt.Want)
		}
	}
}

// TestSeatbeltGlobalGitConfigFileExact: the global git config grant is
// file-exact: literal filters only, and nothing in the profile grants a read
// of HOME or ~/.config, or any directory above a config file beyond its
// metadata.
func TestSeatbeltGlobalGitConfigFileExact(t *testing.T) {
	for _, c := range sbCases(t) {
		if c.p.Mode() != ModeRestricted {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			prof, _ := SeatbeltProfile(c.p, c.l)
			rules, err := parseSBPL(prof)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rules {
				if r.action != "allow" || !slices.Contains(r.ops, "file-read*") {
					continue
				}
				for _, f := range r.filters {
					if f.kind == "subpath" && (Within(c.f.home, f.arg) || slices.Contains(c.l.GitConfig, f.arg)) &&
						!underAny(f.arg, c.l.HookDirs) {
						t.Errorf("restricted grants a read of the subtree %s", f.arg)
					}
					if f.kind == "regex" {
						t.Errorf("restricted grants a read by pattern %s", f.arg)
					}
				}
			}
			for _, g := range c.l.GitConfig {
				if !evalSBPL(rules, opRead, g) {
					t.Errorf("global git config %s is not readable", g)
				}
				if evalSBPL(rules, opWrite, g) {
					t.Errorf("global git config %s is writable", g)
				}
				if evalSBPL(rules, opRead, filepath.Join(filepath.Dir(g), "sibling")) {
					t.Errorf("a sibling of %s is readable", g)
				}
			}
		})
	}
}

func TestDeveloperToolchain(t *testing.T) {
	f := newFixture(t)
	app := filepath.Join(f.root, "Applications", "Xcode.app")
	dev := filepath.Join(app, "Contents", "Developer")
	mustMkdir(t, dev)
	mustMkdir(t, filepath.Join(f.home, ".ssh", "xcode"))
	mustSymlink(t, app, filepath.Join(f.root, "links", "Xcode.app"))
	p := f.resolve(t, ModeRestricted, NetworkOff, seatbeltHost)
	tests := []struct {
		Name, Selected string
		Want           []string
	}{
		{"widened to the app bundle", dev + "\n", []string{app}},
		{"a link: both spellings", filepath.Join(f.root, "links", "Xcode.app", "Contents", "Developer"), []string{filepath.Join(f.root, "links", "Xcode.app"), app}},
		{"HOME refused", f.home, nil},
		{"above HOME refused", f.root, nil},
		{"the worktree refused", f.work, nil},
		{"a temp root refused", "/tmp", nil},
		{"too shallow", "/opt", nil},
		{"under a masked path", filepath.Join(f.home, ".ssh", "xcode"), nil},
		{"absent contributes nothing", filepath.Join(f.root, "nope"), nil},
		{"relative ignored", "Applications/Xcode.app", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			got := DeveloperToolchain(p, tt.Selected)
			// CommandLineTools is judged too, and exists on a Mac only.
			got = slices.DeleteFunc(got, func(s string) bool { return s == seatbeltCommandLineTools })
			if !slices.Equal(got, tt.Want) {
				t.Errorf("DeveloperToolchain(%q) = %q, want %q", tt.Selected, got, tt.Want)
			}
		})
	}
}

func TestDeveloperPath(t *testing.T) {
	const dev = "/Applications/Xcode.app/Contents/Developer"
	const bin = dev + "/usr/bin"
	tests := []struct{ Path, Dev, Want string }{
		{"/opt/homebrew/bin:/usr/bin:/bin", dev, "/opt/homebrew/bin:" + bin + ":/usr/bin:/bin"},
		{"/bin:/usr/bin", dev, bin + ":/bin:/usr/bin"},
		{"/usr/sbin", dev, bin + ":/usr/sbin"},
		{"/opt/x/bin", dev, "/opt/x/bin:" + bin},
		{bin + ":/usr/bin", dev, bin + ":/usr/bin"},
		{"/usr/bin", "", "/usr/bin"},
	}
	for _, tt := range tests {
		if got := DeveloperPath(tt.Path, tt.Dev); got != tt.Want {
			t.Errorf("DeveloperPath(%q, %q) = %q, want %q", tt.Path, tt.Dev, got, tt.Want)
		}
	}
}

func TestWidenToApp(t *testing.T) {
	for in, want := range map[string]string{
		"/Applications/Xcode.app/Contents/Developer":      "/Applications/Xcode.app",
		"/Applications/Xcode-beta.app/Contents/Developer": "/Applications/Xcode-beta.app",
		"/Library/Developer/CommandLineTools":             "/Library/Developer/CommandLineTools",
		"/x/.app/y":                                       "/x/.app/y",
	} {
		if got := widenToApp(in); got != want {
			t.Errorf("widenToApp(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSeatbeltPolicy: on a Mac with sandbox-exec every mode resolves to the
// seatbelt backend with private caches (no overlay there), and a Mac
// without it refuses an explicit mode naming the reason.
func TestSeatbeltPolicy(t *testing.T) {
	f := newFixture(t)
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		p := f.resolve(t, mode, NetworkOn, seatbeltHost)
		want := CachePrivate
		if mode == ModeReadOnly {
			want = CacheNone
		}
		if p.Backend() != "seatbelt" || p.Cache() != want || !strings.HasPrefix(p.StartupLine(), "sandbox: seatbelt enforcing "+string(mode)) {
			t.Errorf("%s: backend %s, cache %s, line %q", mode, p.Backend(), p.Cache(), p.StartupLine())
		}
	}
	noExec := HostReport{OS: "darwin", SandboxExecError: "sandbox-exec could not run a profile: killed"}
	if _, err := Resolve(f.spec(ModeRestricted, NetworkOff), noExec); !errors.Is(err, ErrUnenforceable) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("explicit restricted without sandbox-exec: %v", err)
	}
	if p := f.resolve(t, ModeOff, NetworkOn, seatbeltHost); p.Backend() != "none" {
		t.Errorf("off: backend %s", p.Backend())
	}
}

// TestSharedTreeGuardFirmlink: the data volume's spelling of HOME, of a path
// above it or of the worktree is the same shared tree (stripped of its
// /System/Volumes/Data alias before the check), so a DEVELOPER_DIR naming it
// cannot gut restricted mode.
func TestSharedTreeGuardFirmlink(t *testing.T) {
	f := newFixture(t)
	for _, c := range []string{dataVolume + f.home, dataVolume + f.root, dataVolume + f.work, dataVolume + "/tmp"} {
		if err := sharedTreeGuard(c, f.home, f.work, []string{"/tmp"}); !errors.Is(err, errSharedTree) {
			t.Errorf("sharedTreeGuard(%s) = %v, want errSharedTree", c, err)
		}
	}
	if err := sharedTreeGuard(dataVolume+"/Applications/Xcode.app", f.home, f.work, nil); err != nil {
		t.Errorf("an application bundle on the data volume is refused: %v", err)
	}
}
