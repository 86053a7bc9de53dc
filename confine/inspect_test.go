package confine

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const gitBin = "/usr/bin/git"

// git runs git in dir with an environment that reads no configuration of
// the real user or system.
func git(t *testing.T, home, dir string, args ...string) string {
	t.Helper()
	if _, err := os.Stat(gitBin); err != nil {
		t.Skipf("needs %s: %v", gitBin, err)
	}
	full := append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", "-c", "advice.detachedHead=false"}, args...)
	cmd := exec.Command(gitBin, full...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LANG=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepo makes dir a repository with one commit.
func gitRepo(t *testing.T, home, dir string) {
	t.Helper()
	mustMkdir(t, dir)
	git(t, home, dir, "init", "-q")
	mustWrite(t, filepath.Join(dir, "README"), "hello\n")
	git(t, home, dir, "add", "README")
	git(t, home, dir, "commit", "-q", "-m", "init")
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func surfacePaths(g GitDir) []string {
	var out []string
	for _, s := range g.Surfaces {
		out = append(out, s.Path)
	}
	return out
}

func kindOf(t *testing.T, p string) PathKind {
	t.Helper()
	k, _ := lstatKind(p)
	return k
}

func TestInspectMainRepo(t *testing.T) {
	f := newFixture(t)
	git(t, f.home, f.work, "init", "-q")
	dotGit := filepath.Join(f.work, ".git")
	if err := os.RemoveAll(filepath.Join(dotGit, "hooks")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"config.worktree", "gitdir", "commondir", "hooks"} {
		if k := kindOf(t, filepath.Join(dotGit, n)); k != PathAbsent {
			t.Fatalf("fixture: %s exists before Inspect", n)
		}
	}
	configBefore := readFile(t, filepath.Join(dotGit, "config"))

	p := f.resolve(t, ModeWorkspaceWrite, NetworkOn, usableHost)
	scratch := t.TempDir()
	l, err := Inspect(p, scratch, f.work)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if l.Scratch != scratch || l.Workdir != f.work {
		t.Errorf("Scratch/Workdir = %s/%s, want %s/%s", l.Scratch, l.Workdir, scratch, f.work)
	}
	if len(l.Git) != 1 {
		t.Fatalf("Git = %+v, want one git dir", l.Git)
	}
	g := l.Git[0]
	want := GitDir{
		Dir: dotGit,
		Surfaces: []Entry{
			{Path: filepath.Join(dotGit, "config"), Kind: PathFile},
			{Path: filepath.Join(dotGit, "config.worktree"), Kind: PathFile},
			{Path: filepath.Join(dotGit, "hooks"), Kind: PathDir},
			{Path: filepath.Join(dotGit, "commondir"), Kind: PathFile},
			{Path: filepath.Join(dotGit, "gitdir"), Kind: PathFile},
		},
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("Git[0] =\n  %+v\nwant\n  %+v", g, want)
	}
	if l.PinAbsentGit != "" || len(l.GitLinks) != 0 {
		t.Errorf("PinAbsentGit/GitLinks = %q/%v for a main repository", l.PinAbsentGit, l.GitLinks)
	}
	// Pre-created surfaces: commondir holds exactly ".\n"; the others are
	// empty; the existing config is untouched.
	if got := readFile(t, filepath.Join(dotGit, "commondir")); got != ".\n" {
		t.Errorf("commondir = %q, want %q", got, ".\n")
	}
	for _, n := range []string{"config.worktree", "gitdir"} {
		if got := readFile(t, filepath.Join(dotGit, n)); got != "" {
			t.Errorf("%s = %q, want empty", n, got)
		}
	}
	if k := kindOf(t, filepath.Join(dotGit, "hooks")); k != PathDir {
		t.Errorf("hooks is kind %d, want a directory", k)
	}
	if got := readFile(t, filepath.Join(dotGit, "config")); got != configBefore {
		t.Errorf("Inspect rewrote .git/config")
	}
	// What was pre-created leaves git working (an empty or wrong commondir
	// would be fatal to it forever after).
	got := git(t, f.home, f.work, "rev-parse", "--git-common-dir")
	if !filepath.IsAbs(got) {
		got = filepath.Join(f.work, got)
	}
	if got != dotGit {
		t.Errorf("git rev-parse --git-common-dir = %q, want %s", got, dotGit)
	}
	git(t, f.home, f.work, "status", "--porcelain")

	// Idempotent: a second spawn sees the same layout and rewrites nothing.
	l2, err := Inspect(p, scratch, f.work)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.Git, l2.Git) {
		t.Errorf("second Inspect differs: %+v vs %+v", l.Git, l2.Git)
	}
	if got := readFile(t, filepath.Join(dotGit, "commondir")); got != ".\n" {
		t.Errorf("commondir after a second Inspect = %q", got)
	}
}

func TestInspectGitByMode(t *testing.T) {
	tests := []struct {
		Mode        Mode
		WantGit     bool // git dirs protected (modes that write)
		WantCreated bool // absent surfaces pre-created on the real filesystem
		WantEmpty   bool // off: no layout at all
	}{
		{Mode: ModeOff, WantEmpty: true},
		{Mode: ModeReadOnly},
		{Mode: ModeWorkspaceWrite, WantGit: true, WantCreated: true},
		{Mode: ModeRestricted, WantGit: true, WantCreated: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.Mode), func(t *testing.T) {
			f := newFixture(t)
			git(t, f.home, f.work, "init", "-q")
			mustMkdir(t, filepath.Join(f.home, ".ssh"))
			p := f.resolve(t, tt.Mode, NetworkOff, usableHost)
			l, err := Inspect(p, t.TempDir(), f.work)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if got := len(l.Git) > 0; got != tt.WantGit {
				t.Errorf("Git = %+v, want git dirs %v", l.Git, tt.WantGit)
			}
			created := kindOf(t, filepath.Join(f.work, ".git", "commondir")) != PathAbsent
			if created != tt.WantCreated {
				t.Errorf("commondir created = %v, want %v (read-only and off must not write)", created, tt.WantCreated)
			}
			if tt.WantEmpty && (len(l.Deny) != 0 || len(l.Sockets) != 0 || len(l.SystemRoots) != 0 || l.ProcReadOnly) {
				t.Errorf("off Layout is not empty: %+v", l)
			}
		})
	}
}

func TestInspectLinkedWorktree(t *testing.T) {
	tests := []struct {
		Name             string
		Mode             Mode
		AddMain          bool // the main repository is an --add-dir write root
		WantBindWritable bool
	}{
		{Name: "main-outside-write-roots", Mode: ModeWorkspaceWrite, WantBindWritable: true},
		{Name: "main-is-add-dir", Mode: ModeWorkspaceWrite, AddMain: true, WantBindWritable: false},
		{Name: "restricted-ignores-add-dir", Mode: ModeRestricted, AddMain: true, WantBindWritable: true},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			main := filepath.Join(f.root, "main")
			gitRepo(t, f.home, main)
			wt := filepath.Join(f.root, "wt")
			git(t, f.home, main, "worktree", "add", "-q", wt)
			common := filepath.Join(main, ".git")
			wtGitDir := filepath.Join(common, "worktrees", "wt")
			commondirBefore := readFile(t, filepath.Join(wtGitDir, "commondir"))
			gitdirBefore := readFile(t, filepath.Join(wtGitDir, "gitdir"))

			s := f.spec(tt.Mode, NetworkOn)
			s.Workdir = wt
			if tt.AddMain {
				s.AddDirs = []string{main}
			}
			p, err := Resolve(s, usableHost)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Inspect(p, t.TempDir(), wt)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if len(l.Git) != 1 {
				t.Fatalf("Git = %+v, want the common dir only", l.Git)
			}
			g := l.Git[0]
			if g.Dir != common {
				t.Errorf("Git[0].Dir = %s, want the common dir %s", g.Dir, common)
			}
			if g.BindWritable != tt.WantBindWritable {
				t.Errorf("BindWritable = %v, want %v", g.BindWritable, tt.WantBindWritable)
			}
			if want := []string{filepath.Join(common, "worktrees"), wtGitDir}; !slices.Equal(g.Chain, want) {
				t.Errorf("Chain = %v, want %v", g.Chain, want)
			}
			surf := surfacePaths(g)
			for _, want := range []string{
				filepath.Join(common, "config"), filepath.Join(common, "hooks"), filepath.Join(common, "commondir"),
				filepath.Join(wtGitDir, "commondir"), filepath.Join(wtGitDir, "gitdir"),
				filepath.Join(wtGitDir, "config.worktree"), filepath.Join(wtGitDir, "hooks"),
			} {
				if !slices.Contains(surf, want) {
					t.Errorf("Surfaces lack %s", want)
				}
			}
			for _, s := range g.Surfaces {
				if k := kindOf(t, s.Path); k != s.Kind {
					t.Errorf("surface %s recorded as kind %d, is %d", s.Path, s.Kind, k)
				}
			}
			if want := []string{filepath.Join(wt, ".git")}; !slices.Equal(l.GitLinks, want) {
				t.Errorf("GitLinks = %v, want %v", l.GitLinks, want)
			}
			if l.PinAbsentGit != "" {
				t.Errorf("PinAbsentGit = %s in a linked worktree", l.PinAbsentGit)
			}
			// The existing redirect files keep their content.
			if got := readFile(t, filepath.Join(wtGitDir, "commondir")); got != commondirBefore {
				t.Errorf("worktree commondir rewritten: %q -> %q", commondirBefore, got)
			}
			if got := readFile(t, filepath.Join(wtGitDir, "gitdir")); got != gitdirBefore {
				t.Errorf("worktree gitdir rewritten: %q -> %q", gitdirBefore, got)
			}
			// And git still works in both trees.
			git(t, f.home, wt, "status", "--porcelain")
			git(t, f.home, main, "status", "--porcelain")
			if got := git(t, f.home, wt, "rev-parse", "--git-common-dir"); filepath.Clean(got) != common {
				t.Errorf("linked worktree's common dir is now %s", got)
			}
		})
	}
}

func TestInspectSubmodule(t *testing.T) {
	f := newFixture(t)
	sub := filepath.Join(f.root, "upstream-sub")
	gitRepo(t, f.home, sub)
	gitRepo(t, f.home, f.work)
	git(t, f.home, f.work, "submodule", "add", "-q", sub, "lib")
	git(t, f.home, f.work, "submodule", "add", "-q", sub, "vendor/nested")
	git(t, f.home, f.work, "commit", "-q", "-m", "add submodules")
	common := filepath.Join(f.work, ".git")
	mod := filepath.Join(common, "modules", "lib")
	nested := filepath.Join(common, "modules", "vendor", "nested")
	for _, d := range []string{mod, nested} {
		if kindOf(t, filepath.Join(d, "HEAD")) != PathFile {
			t.Fatalf("fixture: git did not create %s", d)
		}
	}

	p := f.resolve(t, ModeWorkspaceWrite, NetworkOn, usableHost)
	l, err := Inspect(p, t.TempDir(), f.work)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if len(l.Git) != 1 {
		t.Fatalf("Git = %+v, want one common dir", l.Git)
	}
	g := l.Git[0]
	if g.Dir != common || g.BindWritable {
		t.Errorf("Git[0] = %s (BindWritable %v), want %s inside the write root", g.Dir, g.BindWritable, common)
	}
	for _, want := range []string{filepath.Join(common, "modules"), mod, filepath.Join(common, "modules", "vendor"), nested} {
		if !slices.Contains(g.Chain, want) {
			t.Errorf("Chain %v lacks %s", g.Chain, want)
		}
	}
	// Parents come before children, so each is pinned before what it holds.
	for i, c := range g.Chain {
		for _, earlier := range g.Chain[i+1:] {
			if Within(c, earlier) && c != earlier {
				t.Errorf("chain entry %s comes before its parent %s", c, earlier)
			}
		}
	}
	surf := surfacePaths(g)
	for _, d := range []string{mod, nested} {
		for _, n := range gitSurfaces {
			if want := filepath.Join(d, n); !slices.Contains(surf, want) {
				t.Errorf("Surfaces lack %s", want)
			}
		}
		if got := readFile(t, filepath.Join(d, "commondir")); got != ".\n" {
			t.Errorf("%s/commondir = %q, want %q", d, got, ".\n")
		}
	}
	// The submodules still work after their surfaces were pre-created.
	git(t, f.home, filepath.Join(f.work, "lib"), "status", "--porcelain")
	git(t, f.home, filepath.Join(f.work, "vendor", "nested"), "status", "--porcelain")
	git(t, f.home, f.work, "submodule", "status")
}

func TestInspectUnsafeLayout(t *testing.T) {
	tests := []struct {
		Name            string
		Setup           func(t *testing.T, f fixture)
		WantErrContains string
	}{
		{Name: "dot-git-symlink", Setup: func(t *testing.T, f fixture) {
			real := filepath.Join(f.root, "real")
			mustMkdir(t, real)
			git(t, f.home, real, "init", "-q")
			mustSymlink(t, filepath.Join(real, ".git"), filepath.Join(f.work, ".git"))
		}, WantErrContains: ".git is a symlink"},
		{Name: "config-symlink", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			elsewhere := filepath.Join(f.root, "elsewhere", "config")
			mustWrite(t, elsewhere, "[core]\n\thooksPath = /tmp/evil\n")
			cfg := filepath.Join(f.work, ".git", "config")
			if err := os.Remove(cfg); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, elsewhere, cfg)
		}, WantErrContains: "config is a symlink"},
		{Name: "hooks-symlink", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			hooks := filepath.Join(f.work, ".git", "hooks")
			if err := os.RemoveAll(hooks); err != nil {
				t.Fatal(err)
			}
			mustMkdir(t, filepath.Join(f.root, "evil-hooks"))
			mustSymlink(t, filepath.Join(f.root, "evil-hooks"), hooks)
		}, WantErrContains: "hooks is a symlink"},
		{Name: "dangling-commondir-symlink", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			mustSymlink(t, filepath.Join(f.root, "nowhere"), filepath.Join(f.work, ".git", "commondir"))
		}, WantErrContains: "symlink"},
		{Name: "surface-fifo", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			if err := syscall.Mkfifo(filepath.Join(f.work, ".git", "config.worktree"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, WantErrContains: "not a file or directory"},
		{Name: "worktrees-entry-symlink", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			mustMkdir(t, filepath.Join(f.root, "elsewhere"))
			mustSymlink(t, filepath.Join(f.root, "elsewhere"), filepath.Join(f.work, ".git", "worktrees", "evil"))
		}, WantErrContains: "symlink inside git metadata"},
		{Name: "modules-symlink", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			mustMkdir(t, filepath.Join(f.root, "elsewhere"))
			mustSymlink(t, filepath.Join(f.root, "elsewhere"), filepath.Join(f.work, ".git", "modules"))
		}, WantErrContains: "symlink inside git metadata"},
		{Name: "dot-git-file-not-gitlink", Setup: func(t *testing.T, f fixture) {
			mustWrite(t, filepath.Join(f.work, ".git"), "hello\n")
		}, WantErrContains: "not a gitlink"},
		{Name: "gitlink-to-nothing", Setup: func(t *testing.T, f fixture) {
			mustWrite(t, filepath.Join(f.work, ".git"), "gitdir: "+filepath.Join(f.root, "missing")+"\n")
		}, WantErrContains: "not a directory"},
		{Name: "commondir-to-nothing", Setup: func(t *testing.T, f fixture) {
			git(t, f.home, f.work, "init", "-q")
			mustWrite(t, filepath.Join(f.work, ".git", "commondir"), "../missing\n")
		}, WantErrContains: "common dir"},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			tt.Setup(t, f)
			p := f.resolve(t, ModeWorkspaceWrite, NetworkOn, usableHost)
			_, err := Inspect(p, t.TempDir(), f.work)
			if err == nil {
				t.Fatalf("Inspect succeeded, want an error wrapping ErrUnsafeLayout")
			}
			if !errors.Is(err, ErrUnsafeLayout) {
				t.Errorf("error %q does not wrap ErrUnsafeLayout", err)
			}
			if !strings.Contains(err.Error(), tt.WantErrContains) {
				t.Errorf("error %q does not contain %q", err, tt.WantErrContains)
			}
		})
	}
}

func TestInspectSymlinkTargetUntouched(t *testing.T) {
	// Refusing a symlinked surface must not first write through it.
	f := newFixture(t)
	git(t, f.home, f.work, "init", "-q")
	target := filepath.Join(f.root, "elsewhere", "commondir-target")
	mustMkdir(t, filepath.Dir(target))
	mustSymlink(t, target, filepath.Join(f.work, ".git", "commondir"))
	p := f.resolve(t, ModeWorkspaceWrite, NetworkOn, usableHost)
	if _, err := Inspect(p, t.TempDir(), f.work); !errors.Is(err, ErrUnsafeLayout) {
		t.Fatalf("Inspect = %v, want ErrUnsafeLayout", err)
	}
	if k := kindOf(t, target); k != PathAbsent {
		t.Errorf("Inspect created %s through a symlinked surface", target)
	}
}

func TestInspectNoRepo(t *testing.T) {
	tests := []struct {
		Name  string
		Setup func(t *testing.T, f fixture)
	}{
		{Name: "nothing", Setup: func(*testing.T, fixture) {}},
		// An empty .git (the pin a previous sandbox left behind) is not a
		// repository: it is pinned again, not protected as one.
		{Name: "empty-dot-git-left-by-a-pin", Setup: func(t *testing.T, f fixture) {
			mustMkdir(t, filepath.Join(f.work, ".git"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			for d := filepath.Dir(f.work); ; d = filepath.Dir(d) {
				if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
					t.Skipf("%s/.git exists: the worktree is inside a repository", d)
				}
				if d == "/" {
					break
				}
			}
			tt.Setup(t, f)
			for _, mode := range []Mode{ModeWorkspaceWrite, ModeRestricted} {
				p := f.resolve(t, mode, NetworkOn, usableHost)
				l, err := Inspect(p, t.TempDir(), f.work)
				if err != nil {
					t.Fatalf("%s: Inspect: %v", mode, err)
				}
				if want := filepath.Join(f.work, ".git"); l.PinAbsentGit != want {
					t.Errorf("%s: PinAbsentGit = %q, want %q", mode, l.PinAbsentGit, want)
				}
				if len(l.Git) != 0 || len(l.GitLinks) != 0 {
					t.Errorf("%s: Git/GitLinks = %+v/%v with no repository", mode, l.Git, l.GitLinks)
				}
			}
			if tt.Name == "nothing" {
				if k := kindOf(t, filepath.Join(f.work, ".git")); k != PathAbsent {
					t.Errorf("Inspect created .git itself (kind %d): only the mount may", k)
				}
			}
			// read-only pins nothing: it writes nowhere.
			p := f.resolve(t, ModeReadOnly, NetworkOn, usableHost)
			l, err := Inspect(p, t.TempDir(), f.work)
			if err != nil {
				t.Fatal(err)
			}
			if l.PinAbsentGit != "" {
				t.Errorf("read-only: PinAbsentGit = %q", l.PinAbsentGit)
			}
		})
	}
}

func TestInspectRepoAboveWorktree(t *testing.T) {
	// A worktree that is a subdirectory of a repository is protected by
	// that repository's git dir, as git itself would find it.
	f := newFixture(t)
	repo := filepath.Join(f.root, "repo")
	gitRepo(t, f.home, repo)
	sub := filepath.Join(repo, "pkg", "a")
	mustMkdir(t, sub)
	s := f.spec(ModeWorkspaceWrite, NetworkOn)
	s.Workdir = sub
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Inspect(p, t.TempDir(), sub)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Git) != 1 || l.Git[0].Dir != filepath.Join(repo, ".git") || !l.Git[0].BindWritable {
		t.Errorf("Git = %+v, want %s/.git bound writable (outside the write root %s)", l.Git, repo, sub)
	}
	if l.PinAbsentGit != "" {
		t.Errorf("PinAbsentGit = %q inside a repository", l.PinAbsentGit)
	}
}

func denyPaths(l Layout) []string {
	var out []string
	for _, e := range l.Deny {
		out = append(out, e.Path)
	}
	return out
}

func TestInspectDeny(t *testing.T) {
	f := newFixture(t)
	dot := filepath.Join(f.home, "dotfiles")
	// ~/.ssh is a symlink to a dotfiles directory.
	mustWrite(t, filepath.Join(dot, "ssh", "id_ed25519"), "KEY")
	mustSymlink(t, filepath.Join(dot, "ssh"), filepath.Join(f.home, ".ssh"))
	// ~/.config is a symlink: ~/.config/gh is reached through a linked parent.
	mustMkdir(t, filepath.Join(dot, "config", "gh"))
	mustSymlink(t, filepath.Join(dot, "config"), filepath.Join(f.home, ".config"))
	mustWrite(t, filepath.Join(f.home, ".netrc"), "machine x login y password z\n")
	mustWrite(t, filepath.Join(f.home, ".docker", "config.json"), "{}")
	// ~/.kube is a dangling symlink: nothing to mask.
	mustSymlink(t, filepath.Join(f.root, "gone"), filepath.Join(f.home, ".kube"))
	// ~/.aws and the rest are absent.

	s := f.spec(ModeWorkspaceWrite, NetworkOn)
	s.ExtraDeny = []string{filepath.Join(f.root, "absent-extra"), filepath.Join(f.root, "vault")}
	mustMkdir(t, filepath.Join(f.root, "vault"))
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Inspect(p, t.TempDir(), f.work)
	if err != nil {
		t.Fatal(err)
	}
	wantHas := []Entry{
		{Path: filepath.Join(dot, "ssh"), Kind: PathDir},
		{Path: filepath.Join(dot, "config", "gh"), Kind: PathDir},
		{Path: filepath.Join(f.home, ".netrc"), Kind: PathFile},
		{Path: filepath.Join(f.home, ".docker", "config.json"), Kind: PathFile},
		{Path: filepath.Join(f.root, "vault"), Kind: PathDir},
	}
	for _, w := range wantHas {
		if !slices.Contains(l.Deny, w) {
			t.Errorf("Deny lacks %+v: %v", w, denyPaths(l))
		}
	}
	for _, d := range l.Deny {
		if !Within(d.Path, f.root) {
			continue // host secrets (/etc/shadow for a root server)
		}
		if Within(d.Path, filepath.Join(f.home, ".aws")) || Within(d.Path, filepath.Join(f.home, ".kube")) ||
			d.Path == filepath.Join(f.root, "absent-extra") {
			t.Errorf("Deny holds an absent entry %s", d.Path)
		}
	}
	seen := map[string]bool{}
	for _, d := range l.Deny {
		if seen[d.Path] {
			t.Errorf("Deny lists %s twice", d.Path)
		}
		seen[d.Path] = true
		if d.Kind != PathDir && d.Kind != PathFile && d.Kind != PathOther {
			t.Errorf("Deny entry %s has kind %d: a mask must land on the real thing", d.Path, d.Kind)
		}
		if r, err := filepath.EvalSymlinks(d.Path); err != nil || r != d.Path {
			t.Errorf("Deny entry %s is not its real location (%s, %v)", d.Path, r, err)
		}
	}
	for _, sock := range l.Sockets {
		if kindOf(t, sock) == PathAbsent {
			t.Errorf("Sockets lists absent %s", sock)
		}
	}
	// The plan built from it masks the real locations last.
	mp := Plan(p, l)
	for _, w := range wantHas {
		i := slices.IndexFunc(mp, func(m Mount) bool { return m.Dst == w.Path })
		if i < 0 || !isMask(mp[i].Kind) {
			t.Errorf("plan does not mask %s", w.Path)
		}
	}
}

func TestInspectRestricted(t *testing.T) {
	tests := []struct {
		Name          string
		Setup         func(t *testing.T, f fixture)
		WantGitConfig []string // relative to HOME
	}{
		{Name: "gitconfig", Setup: func(t *testing.T, f fixture) {
			mustWrite(t, filepath.Join(f.home, ".gitconfig"), "[user]\n")
		}, WantGitConfig: []string{".gitconfig"}},
		{Name: "gitconfig-and-xdg", Setup: func(t *testing.T, f fixture) {
			mustWrite(t, filepath.Join(f.home, ".gitconfig"), "[user]\n")
			mustWrite(t, filepath.Join(f.home, ".config", "git", "config"), "[core]\n")
		}, WantGitConfig: []string{".config/git/config", ".gitconfig"}},
		{Name: "no-gitconfig", Setup: func(*testing.T, fixture) {}},
		{Name: "gitconfig-into-masked-dir", Setup: func(t *testing.T, f fixture) {
			mustWrite(t, filepath.Join(f.home, ".ssh", "id_ed25519"), "KEY")
			mustSymlink(t, filepath.Join(f.home, ".ssh", "id_ed25519"), filepath.Join(f.home, ".gitconfig"))
		}},
		{Name: "gitconfig-into-masked-dir-real-spelling", Setup: func(t *testing.T, f fixture) {
			// ~/.ssh -> ~/dotfiles/ssh, ~/.gitconfig -> ~/dotfiles/ssh/id_ed25519:
			// the key is on the denylist under its resolved spelling, so a
			// grant of ~/.gitconfig would read it.
			dot := filepath.Join(f.home, "dotfiles")
			mustWrite(t, filepath.Join(dot, "ssh", "id_ed25519"), "KEY")
			mustSymlink(t, filepath.Join(dot, "ssh"), filepath.Join(f.home, ".ssh"))
			mustSymlink(t, filepath.Join(dot, "ssh", "id_ed25519"), filepath.Join(f.home, ".gitconfig"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			// The worktree lies under HOME; the rest of HOME stays invisible.
			wt := filepath.Join(f.home, "src", "proj")
			mustMkdir(t, wt)
			mustMkdir(t, filepath.Join(f.home, ".aws"))
			mustWrite(t, filepath.Join(f.home, ".netrc"), "x")
			tt.Setup(t, f)
			s := f.spec(ModeRestricted, NetworkOff)
			s.Workdir = wt
			secret := filepath.Join(wt, "secret.env")
			mustWrite(t, secret, "TOKEN=x")
			s.ExtraDeny = []string{secret}
			p, err := Resolve(s, usableHost)
			if err != nil {
				t.Fatal(err)
			}
			l, err := Inspect(p, t.TempDir(), wt)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			for _, d := range l.Deny {
				if Within(d.Path, f.home) && !Within(d.Path, wt) {
					t.Errorf("restricted Deny holds %s under the invisible HOME", d.Path)
				}
			}
			// A masked path inside a visible root is still masked.
			if !slices.Contains(l.Deny, Entry{Path: secret, Kind: PathFile}) {
				t.Errorf("Deny lacks %s inside the worktree: %v", secret, denyPaths(l))
			}
			if len(l.Sockets) != 0 {
				t.Errorf("restricted Sockets = %v: /run is not visible", l.Sockets)
			}
			for _, r := range systemReadRoots {
				k, target := lstatKind(r)
				want := Entry{Path: r, Kind: k, Target: target}
				has := slices.Contains(l.SystemRoots, want)
				if (k == PathDir || k == PathSymlink) != has {
					t.Errorf("SystemRoots %v: %s (kind %d) present = %v", l.SystemRoots, r, k, has)
				}
			}
			if !slices.Contains(l.SystemRoots, Entry{Path: "/usr", Kind: PathDir}) {
				t.Errorf("SystemRoots lack /usr: %v", l.SystemRoots)
			}
			var want []string
			for _, w := range tt.WantGitConfig {
				want = append(want, filepath.Join(f.home, w))
			}
			if !slices.Equal(l.GitConfig, want) {
				t.Errorf("GitConfig = %v, want %v", l.GitConfig, want)
			}
		})
	}
}

func TestInspectProcMasks(t *testing.T) {
	tests := []struct {
		Name    string
		Root    bool
		WantRO  bool
		WantAny bool
	}{
		{Name: "root-server", Root: true, WantRO: true, WantAny: true},
		{Name: "user-server", Root: false},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			h := usableHost
			h.RunAsRoot = tt.Root
			p := f.resolve(t, ModeReadOnly, NetworkOn, h)
			l, err := Inspect(p, t.TempDir(), f.work)
			if err != nil {
				t.Fatal(err)
			}
			if l.ProcReadOnly != tt.WantRO {
				t.Errorf("ProcReadOnly = %v, want %v", l.ProcReadOnly, tt.WantRO)
			}
			if got := len(l.Proc) > 0; got != tt.WantAny {
				t.Errorf("Proc = %v, want entries %v", l.Proc, tt.WantAny)
			}
			for _, e := range l.Proc {
				if !slices.Contains(procMasks, e.Path) || kindOf(t, e.Path) != e.Kind {
					t.Errorf("Proc entry %+v is not a present procMasks entry", e)
				}
			}
		})
	}
}

func TestInspectOverlayCacheRoots(t *testing.T) {
	// The policy announces "cache shared-read/private-write" on an overlay
	// host; Layout.CacheRoots is what makes Plan serve it. A root at, above or
	// inside the worktree, holding or inside another write root or the scratch,
	// at or above HOME or a temp root, or not a directory, is never overlaid.
	tests := []struct {
		Name      string
		Setup     func(t *testing.T, f fixture, s *Spec) // may edit the spec
		Scratch   func(f fixture) string                 // default: a separate temp dir
		Host      HostReport
		WantRoots []string // relative to the fixture root
	}{
		{Name: "home-cache", Host: overlayHost, Setup: func(t *testing.T, f fixture, _ *Spec) {
			mustMkdir(t, filepath.Join(f.home, ".cache", "go-build"))
		}, WantRoots: []string{"home/.cache"}},
		{Name: "private-strategy-serves-none", Host: usableHost, Setup: func(t *testing.T, f fixture, _ *Spec) {
			mustMkdir(t, filepath.Join(f.home, ".cache", "go-build"))
		}},
		{Name: "absent-cache", Host: overlayHost, Setup: func(*testing.T, fixture, *Spec) {}},
		{Name: "cache-is-a-file", Host: overlayHost, Setup: func(t *testing.T, f fixture, _ *Spec) {
			mustWrite(t, filepath.Join(f.home, ".cache"), "x")
		}},
		{Name: "nested-served-by-outer", Host: overlayHost, Setup: func(t *testing.T, f fixture, s *Spec) {
			mustMkdir(t, filepath.Join(f.home, ".cache", "go-build"))
			s.Env = append(s.Env, "GOCACHE="+filepath.Join(f.home, ".cache", "go-build"))
		}, WantRoots: []string{"home/.cache"}},
		{Name: "gopath-pkg", Host: overlayHost, Setup: func(t *testing.T, f fixture, s *Spec) {
			mustMkdir(t, filepath.Join(f.root, "gopath", "pkg", "mod"))
			s.Env = append(s.Env, "GOPATH="+filepath.Join(f.root, "gopath"))
		}, WantRoots: []string{"gopath/pkg"}},
		{Name: "xdg-cache-inside-worktree", Host: overlayHost, Setup: func(t *testing.T, f fixture, s *Spec) {
			mustMkdir(t, filepath.Join(f.work, ".cache"))
			s.Env = append(s.Env, "XDG_CACHE_HOME="+filepath.Join(f.work, ".cache"))
		}},
		{Name: "xdg-cache-is-home", Host: overlayHost, Setup: func(_ *testing.T, f fixture, s *Spec) {
			s.Env = append(s.Env, "XDG_CACHE_HOME="+f.home)
		}},
		{Name: "cache-holds-the-worktree", Host: overlayHost, Setup: func(t *testing.T, f fixture, s *Spec) {
			wt := filepath.Join(f.home, ".cache", "proj")
			mustMkdir(t, wt)
			s.Workdir = wt
		}},
		{Name: "cache-is-an-add-dir", Host: overlayHost, Setup: func(t *testing.T, f fixture, s *Spec) {
			mustMkdir(t, filepath.Join(f.home, ".cache"))
			s.AddDirs = []string{filepath.Join(f.home, ".cache")}
		}},
		{Name: "cache-holds-the-scratch", Host: overlayHost, Setup: func(t *testing.T, f fixture, _ *Spec) {
			mustMkdir(t, filepath.Join(f.home, ".cache", "scratch"))
		}, Scratch: func(f fixture) string { return filepath.Join(f.home, ".cache", "scratch") }},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			f := newFixture(t)
			s := f.spec(ModeWorkspaceWrite, NetworkOn)
			tt.Setup(t, f, &s)
			p, err := Resolve(s, tt.Host)
			if err != nil {
				t.Fatal(err)
			}
			scratch := t.TempDir()
			if tt.Scratch != nil {
				scratch = tt.Scratch(f)
			}
			l, err := Inspect(p, scratch, p.Workdir())
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, w := range tt.WantRoots {
				want = append(want, filepath.Join(f.root, w))
			}
			if !slices.Equal(l.CacheRoots, want) {
				t.Errorf("CacheRoots = %v, want %v (StartupLine %q)", l.CacheRoots, want, p.StartupLine())
			}
			for _, c := range l.CacheRoots {
				for _, w := range append(p.WriteRoots(), scratch) {
					if Within(c, w) || Within(w, c) {
						t.Errorf("overlay %s overlaps the persistent root %s", c, w)
					}
				}
			}
		})
	}
}

func TestCacheOverlayEnv(t *testing.T) {
	// Under the overlay strategy every cache variable lands either in a
	// served overlay or in the scratch: never on a persistent host path.
	f := newFixture(t)
	mustMkdir(t, filepath.Join(f.home, ".cache", "go-build"))
	s := f.spec(ModeWorkspaceWrite, NetworkOn)
	p, err := Resolve(s, overlayHost)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	l, err := Inspect(p, scratch, f.work)
	if err != nil {
		t.Fatal(err)
	}
	env := overlayCacheEnv(p, scratch, l.CacheRoots)
	defaults := cacheDefaults(p.Env(), p.Home())
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "npm_config_cache", "CARGO_HOME"} {
		v, redirected := env[k]
		if !redirected {
			if !underAny(defaults[k], l.CacheRoots) {
				t.Errorf("%s stays at %s, which no overlay serves", k, defaults[k])
			}
			continue
		}
		if !Within(filepath.SplitList(v)[0], scratch) {
			t.Errorf("%s=%s is redirected outside the scratch", k, v)
		}
	}
	if _, ok := env["GOCACHE"]; ok {
		t.Errorf("GOCACHE redirected although %s/.cache is served", f.home)
	}
	if v, ok := env["GOPATH"]; env["GOMODCACHE"] != "" && (!ok || !Within(filepath.SplitList(v)[0], scratch)) {
		t.Errorf("GOMODCACHE redirected but GOPATH = %q: sumdb heads go under the first GOPATH entry", v)
	}
}

// Guard against a fixture accident: none of these tests may touch the real
// HOME. newFixture's home is under t.TempDir, and git runs with it.
func TestInspectFixtureHomeIsTemp(t *testing.T) {
	f := newFixture(t)
	real, _ := os.UserHomeDir()
	if real != "" && (Within(f.home, real) || Within(real, f.home)) {
		t.Fatalf("fixture HOME %s overlaps the real HOME %s", f.home, real)
	}
	out := git(t, f.home, f.root, "config", "--global", "--list", "--show-origin")
	if bytes.Contains([]byte(out), []byte(real+"/")) && real != "" {
		t.Errorf("git read the real HOME's config: %s", out)
	}
}
