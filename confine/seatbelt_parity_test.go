package confine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The parity test: both backends rendered from the same policy over the same
// filesystem, and asked, path by path, what a spawned process may do.
// bubblewrap's answer is read from the mount plan (the last mount covering a
// path decides), Seatbelt's from the profile (the last matching rule
// decides, on the path the kernel sees). Each row says what the table of
// modes (docs/security.md, "What is enforced") wants in each mode; where the two
// backends legitimately differ the row says so, with each backend's answer
// and the reason, rather than leaving it out.

// verdict is what a spawned process can do to the host's file at a path.
type verdict struct{ R, W bool }

func (v verdict) String() string {
	s := []byte("--")
	if v.R {
		s[0] = 'r'
	}
	if v.W {
		s[1] = 'w'
	}
	return string(s)
}

var (
	rw   = verdict{true, true}
	ro   = verdict{true, false}
	none = verdict{false, false}
)

// bwrapVerdict evaluates a mount plan for a host path: whether the host's
// file is readable and whether a write reaches it. A private tmpfs, a mask,
// /dev and /proc show none of the host's files; an overlay reads them and
// keeps writes private.
func bwrapVerdict(mp MountPlan, path string) verdict {
	var v verdict
	var from string // Dst of the mount v came from
	for _, m := range mp {
		if !Within(path, m.Dst) {
			continue
		}
		switch m.Kind {
		case MountROBind:
			v = verdict{m.Src == m.Dst, false}
		case MountBind, MountDevBind:
			v = verdict{m.Src == m.Dst, m.Src == m.Dst}
		case MountOverlay:
			v = verdict{true, false}
		case MountTmpfs, MountMaskDir, MountMaskFile, MountDev, MountProc:
			v = none
		case MountRemount:
			if m.Dst == from {
				v.W = false
			}
			continue
		case MountSymlink:
			if path == m.Dst {
				continue
			}
			rest := strings.TrimPrefix(path, m.Dst)
			return bwrapVerdict(mp, filepath.Join(filepath.Dir(m.Dst), m.Src)+rest)
		default:
			continue
		}
		from = m.Dst
	}
	return v
}

func seatbeltVerdict(rules []sbRule, path string) verdict {
	c := macCanonical(path)
	return verdict{evalSBPL(rules, opRead, c), evalSBPL(rules, opWrite, c)}
}

// newFixtureUnder is newFixture under parent. The parity fixtures live
// outside /tmp: bubblewrap's private /tmp would hide a HOME or a sibling
// project placed there, which no real HOME is.
func newFixtureUnder(t *testing.T, parent string) fixture {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "evener-parity-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work"), scratch: filepath.Join(root, "scratch")}
	for _, d := range []string{f.home, f.work, f.scratch} {
		mustMkdir(t, d)
	}
	return f
}

// parityFixture is a worktree with a repository and a submodule, a HOME
// with secrets and git config, a sibling project, an extra root holding a
// masked directory, a hook directory and two sessions' scratch.
type parityFixture struct {
	fixture
	addDir, hooks, scratchParent, scratch, other string
	// protected are protected paths (one named through a symlink), state
	// a runner state directory outside the worktree.
	protected []string
	state     string
}

func newParityFixture(t *testing.T) parityFixture {
	t.Helper()
	pf := parityFixture{fixture: newFixtureUnder(t, "/var/tmp")}
	f := pf.fixture
	for _, d := range []string{
		"work/.git/hooks", "work/.git/objects", "work/.git/refs/heads",
		"work/.git/modules/lib/hooks", "work/.git/modules/lib/objects",
		"home/.ssh", "home/dotfiles/aws", "home/.config/gh", "home/.config/git", "home/.config/app",
		"sibling", "hooks", "scratch/evener-mcp-1", "scratch/evener-mcp-2",
		"work/keep/prot", "work/d", "agent-state",
	} {
		mustMkdir(t, filepath.Join(f.root, d))
	}
	for _, p := range []string{
		"work/file.txt", "work/.git/HEAD", "work/.git/config", "work/.git/modules/lib/HEAD", "work/.git/modules/lib/config",
		"home/.ssh/id_rsa", "home/dotfiles/aws/credentials", "home/.gitconfig", "home/.config/git/config",
		"home/.config/git/ignore", "home/.config/gh/hosts.yml", "home/.config/app/settings", "home/notes.txt",
		"home/.bashrc", "sibling/x", "scratch/evener-mcp-2/x",
		"work/keep/prot/f", "work/keep/other", "work/Makefile", "work/d/c.txt",
	} {
		mustWrite(t, filepath.Join(f.root, p), "x\n")
	}
	mustSymlink(t, filepath.Join(f.home, "dotfiles", "aws"), filepath.Join(f.home, ".aws"))
	hook := filepath.Join(f.root, "hooks", "check")
	mustWrite(t, hook, "#!/bin/sh\n")
	if err := os.Chmod(hook, 0o755); err != nil {
		t.Fatal(err)
	}
	pf.addDir = filepath.Join(f.home, ".config")
	pf.hooks = filepath.Dir(hook)
	pf.scratchParent = filepath.Join(f.root, "scratch")
	pf.scratch = filepath.Join(pf.scratchParent, "evener-mcp-1")
	pf.other = filepath.Join(pf.scratchParent, "evener-mcp-2")
	mustSymlink(t, "d", filepath.Join(f.work, "ln2"))
	pf.protected = []string{filepath.Join(f.work, "keep", "prot"), filepath.Join(f.work, "Makefile"), filepath.Join(f.work, "ln2", "c.txt")}
	pf.state = filepath.Join(f.root, "agent-state")
	return pf
}

func (pf parityFixture) policy(t *testing.T, mode Mode) *Policy {
	t.Helper()
	s := pf.spec(mode, NetworkOn)
	s.AddDirs = []string{pf.addDir}
	s.HookPaths = []string{filepath.Join(pf.hooks, "check")}
	s.Protected = pf.protected
	s.StateRW = []string{pf.state}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// render builds both backends for p over the fixture, as the launchers do
// at a spawn.
func renderBoth(t *testing.T, p *Policy, scratch, scratchParent string) (MountPlan, []sbRule, string) {
	t.Helper()
	l, err := Inspect(p, scratch, p.Workdir())
	if err != nil {
		t.Fatal(err)
	}
	l.ScratchParent = scratchParent
	sl, err := InspectSeatbelt(p, scratch, nil, &SeatbeltProxy{HTTPPort: 40001, SOCKSPort: 40002}, "")
	if err != nil {
		t.Fatal(err)
	}
	sl.ScratchParent = scratchParent
	prof, err := SeatbeltProfile(p, sl)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseSBPL(prof)
	if err != nil {
		t.Fatal(err)
	}
	return Plan(p, l), rules, prof
}

// difference is a documented divergence: each backend's answer and why.
type difference struct {
	bwrap, seatbelt verdict
	why             string
}

type parityRow struct {
	name string
	path string
	want map[Mode]verdict
	diff map[Mode]difference
}

func all(v verdict) map[Mode]verdict {
	return map[Mode]verdict{ModeReadOnly: v, ModeWorkspaceWrite: v, ModeRestricted: v}
}

func byMode(r, w, rs verdict) map[Mode]verdict {
	return map[Mode]verdict{ModeReadOnly: r, ModeWorkspaceWrite: w, ModeRestricted: rs}
}

const (
	whyPrivateTmp = "bubblewrap gives a private /tmp (host sockets live there); Seatbelt reads the host's /tmp and writes nowhere in it (it denies every Unix socket connect but the scratch's instead)"
	whyNewGitDir  = "a git dir created during the session: bubblewrap pins surfaces it found at spawn (a new submodule's config is writable until the next spawn); Seatbelt denies them by pattern from the start"
	whyNamed      = "Seatbelt denies shell startup files and the global git config by name even inside a write root; bubblewrap leaves them as writable as the --add-dir that holds them"
	whySharedGit  = "inside a linked worktree's shared common dir bubblewrap binds the whole directory writable (surfaces re-bound read-only); Seatbelt names the granted entries, so the main worktree's HEAD, ORIG_HEAD, index and info stay read-only"
)

// parityRows is the table, shared with the live suite.
func parityRows(pf parityFixture) []parityRow {
	f := pf.fixture
	home := f.home
	rows := []parityRow{
		{name: "worktree file", path: filepath.Join(f.work, "file.txt"), want: byMode(ro, rw, rw)},
		{name: "sibling project", path: filepath.Join(f.root, "sibling", "x"), want: byMode(ro, ro, none)},
		{name: "HOME file", path: filepath.Join(home, "notes.txt"), want: byMode(ro, ro, none)},
		{name: "~/.bashrc", path: filepath.Join(home, ".bashrc"), want: byMode(ro, ro, none)},
		{name: "~/.ssh/id_rsa", path: filepath.Join(home, ".ssh", "id_rsa"), want: all(none)},
		{name: "~/.aws through its link", path: filepath.Join(home, "dotfiles", "aws", "credentials"), want: all(none)},
		{name: ".git/config", path: filepath.Join(f.work, ".git", "config"), want: all(ro)},
		{name: ".git/hooks/x", path: filepath.Join(f.work, ".git", "hooks", "pre-commit"), want: all(ro)},
		{name: ".git/config.worktree (absent)", path: filepath.Join(f.work, ".git", "config.worktree"), want: all(ro)},
		{name: ".git/commondir (absent)", path: filepath.Join(f.work, ".git", "commondir"), want: all(ro)},
		{name: ".git/objects/x", path: filepath.Join(f.work, ".git", "objects", "x"), want: byMode(ro, rw, rw)},
		{name: ".git/HEAD", path: filepath.Join(f.work, ".git", "HEAD"), want: byMode(ro, rw, rw)},
		{name: ".git/refs/heads/main", path: filepath.Join(f.work, ".git", "refs", "heads", "main"), want: byMode(ro, rw, rw)},
		{name: "submodule config", path: filepath.Join(f.work, ".git", "modules", "lib", "config"), want: all(ro)},
		{name: "submodule hooks", path: filepath.Join(f.work, ".git", "modules", "lib", "hooks", "x"), want: all(ro)},
		{name: "submodule objects", path: filepath.Join(f.work, ".git", "modules", "lib", "objects", "x"), want: byMode(ro, rw, rw)},
		{name: "new submodule config", path: filepath.Join(f.work, ".git", "modules", "new", "config"), want: byMode(ro, ro, ro),
			diff: map[Mode]difference{
				ModeWorkspaceWrite: {rw, ro, whyNewGitDir},
				ModeRestricted:     {rw, ro, whyNewGitDir},
			}},
		{name: "new linked worktree gitdir", path: filepath.Join(f.work, ".git", "worktrees", "x", "gitdir"), want: byMode(ro, ro, ro),
			diff: map[Mode]difference{
				ModeWorkspaceWrite: {rw, ro, whyNewGitDir},
				ModeRestricted:     {rw, ro, whyNewGitDir},
			}},
		{name: "scratch", path: filepath.Join(pf.scratch, "x"), want: all(rw)},
		{name: "another session's scratch", path: filepath.Join(pf.other, "x"), want: all(none)},
		{name: "/tmp/x", path: "/tmp/evener-parity-absent/x", want: all(none),
			diff: map[Mode]difference{
				ModeReadOnly:       {none, ro, whyPrivateTmp},
				ModeWorkspaceWrite: {none, ro, whyPrivateTmp},
			}},
		{name: "/usr/bin/git", path: "/usr/bin/git", want: all(ro)},
		{name: "/etc/passwd", path: "/etc/passwd", want: all(ro)},
		{name: "add-dir file", path: filepath.Join(pf.addDir, "app", "settings"), want: byMode(ro, rw, none)},
		{name: "masked dir inside the add-dir", path: filepath.Join(pf.addDir, "gh", "hosts.yml"), want: all(none)},
		{name: "~/.gitconfig", path: filepath.Join(home, ".gitconfig"), want: all(ro)},
		{name: "XDG git config inside the add-dir", path: filepath.Join(pf.addDir, "git", "config"), want: all(ro),
			diff: map[Mode]difference{ModeWorkspaceWrite: {rw, ro, whyNamed}}},
		{name: "a sibling of the global git config", path: filepath.Join(pf.addDir, "git", "ignore"), want: byMode(ro, rw, none)},
		{name: "hook directory", path: filepath.Join(pf.hooks, "check"), want: all(ro)},
		{name: "protected dir's file", path: filepath.Join(f.work, "keep", "prot", "f"), want: all(ro)},
		{name: "new file in the protected dir", path: filepath.Join(f.work, "keep", "prot", "new"), want: all(ro)},
		{name: "protected file", path: filepath.Join(f.work, "Makefile"), want: all(ro)},
		{name: "protected through a symlink", path: filepath.Join(f.work, "d", "c.txt"), want: all(ro)},
		{name: "beside the protected dir", path: filepath.Join(f.work, "keep", "other"), want: byMode(ro, rw, rw)},
		{name: "runner state directory", path: filepath.Join(pf.state, "x"), want: all(rw)},
	}
	// Masked where this user could read it (a root server); for anyone
	// else file permissions already refuse it and no mask is planned, which
	// this table of mounts cannot see.
	if k, _ := lstatKind("/etc/shadow"); k == PathFile && reachableWithoutCaps("/etc/shadow", false) {
		rows = append(rows, parityRow{name: "/etc/shadow", path: "/etc/shadow", want: all(none)})
	}
	return rows
}

// expected returns what each backend should answer for r in mode.
func (r parityRow) expected(t *testing.T, mode Mode) (bwrap, seatbelt verdict) {
	t.Helper()
	want, ok := r.want[mode]
	if !ok {
		t.Fatalf("row %q has no verdict for %s", r.name, mode)
	}
	if d, ok := r.diff[mode]; ok {
		if d.bwrap == d.seatbelt || d.why == "" {
			t.Errorf("%s: a difference that is none, or has no reason", r.name)
		}
		return d.bwrap, d.seatbelt
	}
	return want, want
}

func TestSeatbeltParity(t *testing.T) {
	pf := newParityFixture(t)
	rows := parityRows(pf)
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			p := pf.policy(t, mode)
			plan, rules, prof := renderBoth(t, p, pf.scratch, pf.scratchParent)
			failed := false
			for _, r := range rows {
				wantB, wantS := r.expected(t, mode)
				gotB, gotS := bwrapVerdict(plan, r.path), seatbeltVerdict(rules, r.path)
				if gotB != wantB || gotS != wantS {
					failed = true
					t.Errorf("%-36s bwrap %s (want %s)  seatbelt %s (want %s)", r.name, gotB, wantB, gotS, wantS)
				}
			}
			checkRenameParity(t, plan, rules)
			if failed {
				t.Logf("plan:\n%s\nprofile:\n%s", plan, prof)
			}
		})
	}
}

// checkRenameParity: a mount point cannot be renamed under bubblewrap
// (EBUSY), which is what pins a protected path in place. Wherever its
// parent is writable (so a rename could otherwise happen), Seatbelt must
// refuse file-write-unlink on it.
func checkRenameParity(t *testing.T, plan MountPlan, rules []sbRule) {
	t.Helper()
	n := 0
	for _, m := range plan {
		switch m.Kind {
		case MountBind, MountROBind, MountMaskDir, MountMaskFile:
		default:
			continue
		}
		if !bwrapVerdict(plan, filepath.Dir(m.Dst)).W || m.Dst == "/" {
			continue
		}
		n++
		if evalSBPL(rules, opUnlink, macCanonical(m.Dst)) {
			t.Errorf("bubblewrap pins %s (%s), Seatbelt lets it be renamed", m.Dst, m.Why)
		}
		// A hard link to it would fail across bubblewrap's mounts (EXDEV).
		if evalSBPL(rules, opLink, macCanonical(m.Dst)) {
			t.Errorf("bubblewrap pins %s (%s), Seatbelt lets it be hard-linked", m.Dst, m.Why)
		}
	}
	t.Logf("%d pinned paths checked for renames", n)
}

// TestSeatbeltParityLinkedWorktree: a linked worktree whose common git dir
// lies outside every write root.
func TestSeatbeltParityLinkedWorktree(t *testing.T) {
	f := newFixtureUnder(t, "/var/tmp")
	common := filepath.Join(f.home, "src", "main", ".git")
	own := filepath.Join(common, "worktrees", "wt")
	wt := filepath.Join(f.home, "src", "wt")
	for _, d := range []string{filepath.Join(common, "hooks"), filepath.Join(common, "objects"), filepath.Join(common, "refs", "heads"), filepath.Join(common, "info"), own, wt} {
		mustMkdir(t, d)
	}
	for p, c := range map[string]string{
		filepath.Join(common, "HEAD"): "ref: refs/heads/main\n", filepath.Join(common, "config"): "",
		filepath.Join(own, "HEAD"): "ref: refs/heads/wt\n", filepath.Join(own, "commondir"): "../..\n",
		filepath.Join(own, "gitdir"): wt + "/.git\n", filepath.Join(wt, ".git"): "gitdir: " + own + "\n",
		filepath.Join(wt, "file"): "x",
	} {
		mustWrite(t, p, c)
	}
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Workdir = wt
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(f.scratch, "evener-mcp-1")
	mustMkdir(t, scratch)
	plan, rules, prof := renderBoth(t, p, scratch, "")
	rows := []struct {
		name     string
		path     string
		bwrap, s verdict
	}{
		{"worktree file", filepath.Join(wt, "file"), rw, rw},
		{"gitlink", filepath.Join(wt, ".git"), ro, ro},
		{"common objects", filepath.Join(common, "objects", "ab"), rw, rw},
		{"common refs", filepath.Join(common, "refs", "heads", "wt"), rw, rw},
		{"common packed-refs", filepath.Join(common, "packed-refs"), rw, rw},
		{"common packed-refs.lock", filepath.Join(common, "packed-refs.lock"), rw, rw},
		{"common logs", filepath.Join(common, "logs", "refs", "heads", "wt"), rw, rw},
		{"common rr-cache", filepath.Join(common, "rr-cache", "x"), rw, rw},
		{"common config", filepath.Join(common, "config"), ro, ro},
		{"common hooks", filepath.Join(common, "hooks", "post-checkout"), ro, ro},
		{"own HEAD", filepath.Join(own, "HEAD"), rw, rw},
		{"own index", filepath.Join(own, "index"), rw, rw},
		{"own config.worktree", filepath.Join(own, "config.worktree"), ro, ro},
		{"own commondir", filepath.Join(own, "commondir"), ro, ro},
		{"own gitdir", filepath.Join(own, "gitdir"), ro, ro},
		// Documented (whySharedGit): the main worktree's own metadata.
		{"main HEAD", filepath.Join(common, "HEAD"), rw, ro},
		{"main ORIG_HEAD", filepath.Join(common, "ORIG_HEAD"), rw, ro},
		{"main index", filepath.Join(common, "index"), rw, ro},
		{"main info/exclude", filepath.Join(common, "info", "exclude"), rw, ro},
		{"the main worktree", filepath.Join(f.home, "src", "main", "file"), ro, ro},
	}
	for _, r := range rows {
		gotB, gotS := bwrapVerdict(plan, r.path), seatbeltVerdict(rules, r.path)
		if gotB != r.bwrap || gotS != r.s {
			t.Errorf("%-24s bwrap %s (want %s)  seatbelt %s (want %s)", r.name, gotB, r.bwrap, gotS, r.s)
		}
	}
	checkRenameParity(t, plan, rules)
	if t.Failed() {
		t.Logf("%s\nplan:\n%s\nprofile:\n%s", whySharedGit, plan, prof)
	}
}

// TestSeatbeltDenialsEverySpelling: every path the profile denies is
// denied however a process names it: as given, through /private, and
// through the data volume's firmlink.
func TestSeatbeltDenialsEverySpelling(t *testing.T) {
	for _, c := range sbCases(t) {
		t.Run(c.name, func(t *testing.T) {
			prof, _ := SeatbeltProfile(c.p, c.l)
			rules, err := parseSBPL(prof)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range c.l.Deny {
				for _, s := range append(twins(d), dataVolume+d) {
					for _, op := range []string{opRead, opWrite, opUnlink} {
						if evalSBPL(rules, op, s) || evalSBPL(rules, op, s+"/inner") {
							t.Errorf("%s allowed on the masked %s (spelled %s)", op, d, s)
						}
					}
				}
			}
		})
	}
}
