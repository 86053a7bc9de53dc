//go:build linux

package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func newSweeper() *gitSweeper { return &gitSweeper{cache: map[string]*dirFacts{}} }

// isRepoShape reports whether git could take dir for a repository (a HEAD
// entry) or find one through its .git entry.
func isRepoShape(dir string) bool {
	for _, p := range []string{filepath.Join(dir, "HEAD"), filepath.Join(dir, ".git")} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	return false
}

func sweepFixture(t *testing.T) fixture {
	t.Helper()
	f := newFixture(t)
	gitRepo(t, f.home, f.work)
	gitRepo(t, f.home, filepath.Join(f.work, "vendor", "lib"))
	gitRepo(t, f.home, filepath.Join(f.work, "vendor", "other"))
	gitRepo(t, f.home, filepath.Join(f.work, "vendor", "keep"))
	mustMkdir(t, filepath.Join(f.work, "src"))
	return f
}

func mustEnd(t *testing.T, tk *sweepTicket) []string {
	t.Helper()
	found := tk.sweep()
	for _, f := range found {
		if strings.Contains(f, "sweep failed") {
			t.Fatalf("sweep failed: %v", found)
		}
	}
	return found
}

// TestSweepSetsAside: every git shape a spawn leaves, moves or changes is
// set aside after it; the user's repositories it only used are not.
func TestSweepSetsAside(t *testing.T) {
	f := sweepFixture(t)
	w := f.work
	sw := newSweeper()
	tk, err := sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	// What a command could leave behind.
	gitRepo(t, f.home, filepath.Join(w, "sub"))
	git(t, f.home, filepath.Join(w, "sub"), "config", "core.fsmonitor", "touch /nonexistent/x")
	mustWrite(t, filepath.Join(w, "sub2", ".git"), "gitdir: ../.git/modules/evil\n")
	git(t, f.home, w, "init", "-q", "--bare", filepath.Join(w, ".git", "modules", "evil"))
	mustMkdir(t, filepath.Join(w, "sub3"))
	if err := os.Symlink("../vendor/lib/.git", filepath.Join(w, "sub3", ".git")); err != nil {
		t.Fatal(err)
	}
	git(t, f.home, w, "init", "-q", "--bare", filepath.Join(w, "bare.git"))
	mustWrite(t, filepath.Join(w, "src", "HEAD"), "ref: refs/heads/main\n")
	mustMkdir(t, filepath.Join(w, "src", "objects"))
	mustMkdir(t, filepath.Join(w, "src", "refs"))
	appendFile(t, filepath.Join(w, "vendor", "lib", ".git", "config"), "[core]\n\tfsmonitor = touch /nonexistent/y\n")
	mustWrite(t, filepath.Join(w, "vendor", "other", ".git", "hooks", "post-checkout"), "#!/bin/sh\n")
	mustWrite(t, filepath.Join(w, ".git", "worktrees", "wt", "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(w, ".git", "worktrees", "wt", "commondir"), "../..\n")
	gitRepo(t, f.home, filepath.Join(w, "hid", "deep", "r"))
	if err := os.Chmod(filepath.Join(w, "hid", "deep"), 0); err != nil {
		t.Fatal(err)
	}
	// What a command may do to the user's repositories without harm.
	git(t, f.home, filepath.Join(w, "vendor", "keep"), "checkout", "-q", "-b", "side")
	mustWrite(t, filepath.Join(w, "vendor", "keep", "x"), "x\n")
	git(t, f.home, filepath.Join(w, "vendor", "keep"), "add", "x")
	git(t, f.home, filepath.Join(w, "vendor", "keep"), "commit", "-qm", "x")
	mustWrite(t, filepath.Join(w, "y"), "y\n")
	git(t, f.home, w, "add", "y")
	git(t, f.home, w, "commit", "-qm", "y")
	mustWrite(t, filepath.Join(w, ".git", "config.worktree"), "") // Inspect's placeholders
	mustWrite(t, filepath.Join(w, ".git", "commondir"), ".\n")

	found := mustEnd(t, tk)
	joined := strings.Join(found, "\n")
	if strings.Contains(joined, f.root) {
		t.Errorf("a host path in the report:\n%s", joined)
	}
	if err := os.Chmod(filepath.Join(w, "hid", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sub", "sub2", "sub3", ".git/modules/evil", "bare.git", "src", "vendor/lib/.git", "vendor/other/.git", ".git/worktrees/wt", "hid/deep/r"} {
		if isRepoShape(filepath.Join(w, d)) {
			t.Errorf("%s is still a repository after the sweep", d)
		}
		if !strings.Contains(joined, d) {
			t.Errorf("%s not reported:\n%s", d, joined)
		}
	}
	if _, err := os.Stat(filepath.Join(w, "sub", ".git"+quarantineSuffix, "config"+quarantineSuffix)); err != nil {
		t.Errorf("the planted repository's config was not set aside: %v", err)
	}
	for _, d := range []string{"vendor/keep/.git", ".git"} {
		if !isRepoShape(filepath.Join(w, d)) {
			t.Errorf("the user's %s was set aside:\n%s", d, joined)
		}
	}
	git(t, f.home, filepath.Join(w, "vendor", "keep"), "log", "--oneline")
	git(t, f.home, w, "status", "--porcelain")

	// Nothing left, nothing more to do; and the walk lists nothing that did
	// not change.
	tk, err = sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	before := sweepListed.Load()
	if found := mustEnd(t, tk); len(found) != 0 {
		t.Errorf("a second sweep set aside %v", found)
	}
	if n := sweepListed.Load() - before; n != 0 {
		t.Errorf("an unchanged tree was listed again (%d directories)", n)
	}
}

// TestSweepBusyPeriod: while a spawn runs, another's start takes no new
// record (what the first planted is not accepted as the user's); once none
// runs, a repository the user made in between is accepted.
func TestSweepBusyPeriod(t *testing.T) {
	f := sweepFixture(t)
	w := f.work
	sw := newSweeper()
	a, err := sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	gitRepo(t, f.home, filepath.Join(w, "planted"))
	b, err := sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	if found := mustEnd(t, b); len(found) != 1 || !strings.HasPrefix(found[0], "planted/.git:") {
		t.Errorf("the later spawn's end did not set aside the earlier one's plant: %v", found)
	}
	if found := mustEnd(t, a); len(found) != 0 {
		t.Errorf("%v", found)
	}
	// Idle: the user clones a repository into the worktree.
	gitRepo(t, f.home, filepath.Join(w, "mine"))
	c, err := sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	if found := mustEnd(t, c); len(found) != 0 || !isRepoShape(filepath.Join(w, "mine")) {
		t.Errorf("the user's own new repository was set aside: %v", found)
	}
}

// TestSweepDepthFailsClosed: a tree too deep to walk refuses the next
// spawn, naming it relative to the worktree, until it is gone.
func TestSweepDepthFailsClosed(t *testing.T) {
	f := sweepFixture(t)
	w := f.work
	sw := newSweeper()
	tk, err := sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(w, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < sweepMaxDepth+5; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = nfd
	}
	unix.Close(fd)
	found := tk.sweep()
	if len(found) != 1 || !strings.Contains(found[0], "deeper than") || strings.Contains(found[0], f.root) {
		t.Errorf("end: %v", found)
	}
	if _, err := sw.begin([]string{w}, w); err == nil || !strings.Contains(err.Error(), "deeper than") || strings.Contains(err.Error(), f.root) {
		t.Errorf("next spawn: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(w, "d")); err != nil {
		t.Fatal(err)
	}
	if tk, err = sw.begin([]string{w}, w); err != nil {
		t.Fatalf("after removal: %v", err)
	}
	mustEnd(t, tk)
}

// TestInspectPinsNested: the user's nested repositories' surfaces and .git
// files are bound read-only, at most a bounded number of them.
func TestInspectPinsNested(t *testing.T) {
	f := sweepFixture(t)
	for i := 0; i < 2*nestedPinDirs; i++ {
		gitRepo(t, f.home, filepath.Join(f.work, "many", fmt.Sprintf("r%02d", i)))
	}
	mustWrite(t, filepath.Join(f.work, "lib", ".git"), "gitdir: ../vendor/lib/.git\n")
	p := f.resolve(t, ModeWorkspaceWrite, NetworkOn, usableHost)
	l, err := Inspect(p, t.TempDir(), f.work)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lib/.git", "many/r00/.git/config", "many/r00/.git/hooks"} {
		if !slices.Contains(l.GitLinks, filepath.Join(f.work, want)) {
			t.Errorf("GitLinks lacks %s: %v", want, l.GitLinks)
		}
	}
	if n := len(l.GitLinks); n > nestedPinDirs*len(gitSurfaces)+nestedPinLinks {
		t.Errorf("%d read-only binds for nested repositories", n)
	}
	if _, err := os.Stat(filepath.Join(f.work, "many", "r00", ".git", "config.worktree")); err == nil {
		t.Errorf("a surface was created in the user's nested repository")
	}
	plan := Plan(p, l).String()
	if !strings.Contains(plan, filepath.Join(f.work, "many", "r00", ".git", "config")) {
		t.Errorf("the plan does not pin the nested config:\n%s", plan)
	}
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	fh, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// benchTree makes width*width directories with a file each, and a
// repository at the top.
func benchTree(b *testing.B, width int) string {
	b.Helper()
	root := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".git", "objects"), 0o755); err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, ".git", "refs", "heads"), 0o755)
	os.WriteFile(filepath.Join(root, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(root, ".git", "config"), nil, 0o644)
	for i := 0; i < width; i++ {
		for j := 0; j < width; j++ {
			d := filepath.Join(root, fmt.Sprintf("d%03d", i), fmt.Sprintf("e%03d", j))
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
			os.WriteFile(filepath.Join(d, "f"), nil, 0o644)
		}
	}
	return root
}

// BenchmarkSweep: the cost a spawn pays (one record walk when none runs,
// one sweep at its end), on a tiny tree and on 10,000 directories; cold is
// the first walk of a session.
func BenchmarkSweep(b *testing.B) {
	for _, c := range []struct {
		name  string
		width int
	}{{"tiny", 2}, {"10k-dirs", 100}} {
		root := benchTree(b, c.width)
		b.Run(c.name+"/spawn", func(b *testing.B) {
			sw := newSweeper()
			tk, err := sw.begin([]string{root}, root)
			if err != nil {
				b.Fatal(err)
			}
			tk.sweep()
			b.ResetTimer()
			for b.Loop() {
				tk, err := sw.begin([]string{root}, root)
				if err != nil {
					b.Fatal(err)
				}
				if found := tk.sweep(); len(found) != 0 {
					b.Fatal(found)
				}
			}
		})
		b.Run(c.name+"/spawn-one-change", func(b *testing.B) {
			sw := newSweeper()
			tk, _ := sw.begin([]string{root}, root)
			tk.sweep()
			f := filepath.Join(root, "d001", "e001", "g")
			b.ResetTimer()
			for b.Loop() {
				tk, _ := sw.begin([]string{root}, root)
				os.WriteFile(f, nil, 0o644)
				os.Remove(f)
				tk.sweep()
			}
		})
		b.Run(c.name+"/cold", func(b *testing.B) {
			for b.Loop() {
				sw := newSweeper()
				tk, err := sw.begin([]string{root}, root)
				if err != nil {
					b.Fatal(err)
				}
				tk.sweep()
			}
		})
	}
}
