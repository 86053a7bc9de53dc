//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

type fxWriteCase struct {
	Name string
	Path func(f *fileFixture) string
	Want [4]string // per mode: off, read-only, workspace-write, restricted
	// Check runs after the write, whatever its outcome.
	Check func(t *testing.T, f *fileFixture, mode Mode)
}

func fxOutsideUntouched(t *testing.T, f *fileFixture, _ Mode) {
	t.Helper()
	if got := fxRead(t, filepath.Join(f.outside, "target")); got != "outside-original" {
		t.Errorf("outside target changed: %q", got)
	}
	for _, n := range []string{"nonexistent", "f"} {
		if _, err := os.Lstat(filepath.Join(f.outside, n)); err == nil {
			t.Errorf("outside/%s was created", n)
		}
	}
}

func fxWriteCases() []fxWriteCase {
	D, O, R, G, S, X := RuleDenylist, RuleOutside, RuleReadOnly, RuleGitMetadata, RuleSymlink, wantOK
	return []fxWriteCase{
		{"new worktree file", fxPath("new.txt"), [4]string{X, R, X, X}, nil},
		{"overwrite worktree file", fxPath("file.txt"), [4]string{X, R, X, X}, nil},
		{"nested new with parents", fxPath("n1/n2/new.txt"), [4]string{X, R, X, X}, nil},
		{"sibling", fxPath("../sibling/new"), [4]string{X, R, O, O}, nil},
		{"sibling absolute", func(f *fileFixture) string { return filepath.Join(f.sib, "new") }, [4]string{X, R, O, O}, nil},
		{"prefix sibling", fxPath("../proj-evil/new"), [4]string{X, R, O, O}, nil},
		{"scratch", func(f *fileFixture) string { return filepath.Join(f.scratch, "new") }, [4]string{X, X, X, X}, nil},
		{"add-dir", func(f *fileFixture) string { return filepath.Join(f.add, "new") }, [4]string{X, R, X, O}, nil},
		{".git/config", fxPath(".git/config"), [4]string{X, G, G, G}, nil},
		{".GIT/hooks/x", fxPath(".GIT/hooks/x"), [4]string{X, G, G, G}, nil},
		{"sub/.Git/x", fxPath("sub/.Git/x"), [4]string{X, G, G, G}, nil},
		{"a/../.git/config", fxPath("a/../.git/config"), [4]string{X, G, G, G}, nil},
		{".git//config", fxPath(".git//config"), [4]string{X, G, G, G}, nil},
		{".git. (vfat strips the dot)", fxPath(".git./config"), [4]string{X, G, G, G}, nil},
		{"denylisted", func(f *fileFixture) string { return filepath.Join(f.home, ".ssh", "new") }, [4]string{X, D, D, D}, nil},
		{"through symlink to outside file", fxPath("to-outside"), [4]string{S, R, S, S}, fxOutsideUntouched},
		{"through dangling symlink", fxPath("dangling"), [4]string{S, R, S, S}, fxOutsideUntouched},
		{"through symlinked parent", fxPath("linkdir/f"), [4]string{S, R, S, S}, fxOutsideUntouched},
		{"onto symlink to secret", fxPath("to-secret"), [4]string{S, R, S, S}, func(t *testing.T, f *fileFixture, m Mode) {
			if got := fxRead(t, filepath.Join(f.home, ".ssh", "id_rsa")); got != "SECRET-KEY" {
				t.Errorf("secret changed: %q", got)
			}
		}},
		{"fifo", fxPath("fifo"), [4]string{RuleNotRegular, R, RuleNotRegular, RuleNotRegular}, nil},
		{"directory", fxPath("sub"), [4]string{wantErr, R, wantErr, wantErr}, nil},
		{"worktree itself", fxPath("."), [4]string{wantErr, R, wantErr, wantErr}, nil},
		{"proc", fxPath("/proc/self/x"), [4]string{S, D, D, D}, nil},
		{"dev fd", fxPath("/dev/fd/3"), [4]string{S, D, D, D}, nil},
		{"empty", fxPath(""), [4]string{RuleInvalidPath, RuleInvalidPath, RuleInvalidPath, RuleInvalidPath}, nil},
		{"tilde", fxPath("~/x"), [4]string{RuleInvalidPath, RuleInvalidPath, RuleInvalidPath, RuleInvalidPath}, nil},
		{"hard link to outside", fxPath("hl"), [4]string{X, R, X, X}, func(t *testing.T, f *fileFixture, m Mode) {
			if got := fxRead(t, filepath.Join(f.outside, "hl-target")); got != "hardlinked-original" {
				t.Errorf("write went through the hard link: outside is %q", got)
			}
		}},
	}
}

func TestFileWriteByMode(t *testing.T) {
	for i, mode := range modeCols {
		for _, c := range fxWriteCases() {
			f := newFileFixture(t)
			fa := f.access(t, mode)
			what := fmt.Sprintf("%s/%s", mode, c.Name)
			p := c.Path(f)
			created, err := fa.WriteFile(p, []byte("NEW"), WriteOptions{CreateParents: true})
			fxCheck(t, what, err, c.Want[i])
			if err == nil {
				abs, _, rerr := fa.Resolve(p)
				if rerr != nil {
					t.Fatal(rerr)
				}
				if got := fxRead(t, abs); got != "NEW" {
					t.Errorf("%s: file holds %q", what, got)
				}
				_ = created
			}
			if c.Check != nil {
				c.Check(t, f, mode)
			}
			if l := fxLeftovers(t, f.root); len(l) > 0 {
				t.Errorf("%s: leftover temp files %v", what, l)
			}
		}
	}
}

func TestFileWriteCreatedAndParents(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeWorkspaceWrite)
	created, err := fa.WriteFile("file.txt", []byte("x"), WriteOptions{})
	if err != nil || created {
		t.Fatalf("overwrite: created=%v err=%v", created, err)
	}
	created, err = fa.WriteFile("brand-new", []byte("x"), WriteOptions{})
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	_, err = fa.WriteFile("p1/p2/f", []byte("x"), WriteOptions{})
	fxCheck(t, "missing parents", err, wantNotExist)
	if _, err := os.Lstat(filepath.Join(f.wt, "p1")); err == nil {
		t.Fatal("a parent was created without CreateParents")
	}
	if _, err = fa.WriteFile("p1/p2/f", []byte("deep"), WriteOptions{CreateParents: true}); err != nil {
		t.Fatal(err)
	}
	if got := fxRead(t, filepath.Join(f.wt, "p1", "p2", "f")); got != "deep" {
		t.Fatalf("got %q", got)
	}
	// A parent that cannot be created (a file in the way) leaves no
	// directory behind.
	_, err = fa.WriteFile("q1/q2/q3", []byte("x"), WriteOptions{CreateParents: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fa.WriteFile("q1/q2/q3/deeper/x", []byte("x"), WriteOptions{CreateParents: true})
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("wrote under a file: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(f.wt, "q1/q2/q3")); err != nil {
		t.Fatal(err)
	}
	// Parents made before a later component fails are removed again.
	_, err = fa.WriteFile("zz1/zz2/"+strings.Repeat("n", 300)+"/x", []byte("x"), WriteOptions{CreateParents: true})
	if !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("want ENAMETOOLONG, got %v", err)
	}
	if _, err := os.Lstat(filepath.Join(f.wt, "zz1")); err == nil {
		t.Fatal("created parents were left behind")
	}
	// CreateParents never creates through a symlinked component.
	_, err = fa.WriteFile("linkdir/newdir/f", []byte("x"), WriteOptions{CreateParents: true})
	fxCheck(t, "parents through symlink", err, RuleSymlink)
	if _, err := os.Lstat(filepath.Join(f.outside, "newdir")); err == nil {
		t.Fatal("a directory was created through a symlink")
	}
	if l := fxLeftovers(t, f.root); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}
}

func TestFileWriteKeepsMode(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeWorkspaceWrite)
	script := filepath.Join(f.wt, "run.sh")
	fxWrite(t, script, "#!/bin/sh\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := fa.WriteFile("run.sh", []byte("#!/bin/sh\necho hi\n"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(script); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode after overwrite: %v", fi.Mode())
	}
	if _, err := fa.WriteFile("fresh", []byte("x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(f.wt, "fresh")); fi.Mode().Perm() != 0o644 {
		t.Fatalf("new file mode: %v", fi.Mode())
	}
	if _, err := fa.WriteFile("fresh", []byte("x"), WriteOptions{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(f.wt, "fresh")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("explicit mode: %v", fi.Mode())
	}
	// setuid is not carried onto new content.
	if err := os.Chmod(script, 0o4755); err != nil {
		t.Fatal(err)
	}
	if _, err := fa.WriteFile("run.sh", []byte("x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(script); fi.Mode() != 0o755 {
		t.Fatalf("setuid kept: %v", fi.Mode())
	}
}

func TestFileWriteHardLinkReplaced(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeRestricted)
	if _, err := fa.WriteFile("hl", []byte("replaced"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := fxRead(t, filepath.Join(f.outside, "hl-target")); got != "hardlinked-original" {
		t.Fatalf("outside file changed: %q", got)
	}
	if got := fxRead(t, filepath.Join(f.wt, "hl")); got != "replaced" {
		t.Fatalf("worktree name holds %q", got)
	}
	fi, _ := os.Stat(filepath.Join(f.outside, "hl-target"))
	if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
		t.Fatalf("outside nlink = %d, want 1 (the link was replaced)", n)
	}
}

// TestFileWriteFailureLeavesNoTemp fills a tiny tmpfs so the write itself
// fails after the temp file exists (root only: it mounts).
func TestFileWriteFailureLeavesNoTemp(t *testing.T) {
	f := newFileFixture(t)
	mnt := filepath.Join(f.wt, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	fxWrite(t, filepath.Join(mnt, "keep"), "original")
	fa := f.access(t, ModeWorkspaceWrite)
	big := make([]byte, 1<<20)
	_, err := fa.WriteFile("small/keep", big, WriteOptions{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("want ENOSPC, got %v", err)
	}
	if got := fxRead(t, filepath.Join(mnt, "keep")); got != "original" {
		t.Fatalf("target changed: %q", got)
	}
	if l := fxLeftovers(t, mnt); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}
	// A staged write that cannot fit leaves nothing either.
	st := fa.NewStage()
	if err := st.Write("small/other", big, WriteOptions{}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("stage: want ENOSPC, got %v", err)
	}
	st.Abort()
	if l := fxLeftovers(t, mnt); len(l) > 0 {
		t.Fatalf("stage fxLeftovers %v", l)
	}
}

func TestFileWriteTooLarge(t *testing.T) {
	f := newFileFixture(t)
	fa, err := NewFileAccessWith(f.policy(t, ModeWorkspaceWrite), f.scratch, FileAccessOptions{MaxWriteBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	_, err = fa.WriteFile("x", make([]byte, 11), WriteOptions{})
	fxCheck(t, "too large", err, RuleTooLarge)
}

func TestFileRemove(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeWorkspaceWrite)
	if err := fa.Remove("file.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(f.wt, "file.txt")); err == nil {
		t.Fatal("not removed")
	}
	fxCheck(t, "remove missing", fa.Remove("file.txt"), wantNotExist)
	fxCheck(t, "remove symlink", fa.Remove("to-outside"), RuleSymlink)
	fxCheck(t, "remove through symlinked dir", fa.Remove("linkdir/target"), RuleSymlink)
	fxCheck(t, "remove git", fa.Remove(".git/config"), RuleGitMetadata)
	fxCheck(t, "remove dir", fa.Remove("sub"), wantErr)
	fxCheck(t, "remove sibling", fa.Remove("../sibling/f"), RuleOutside)
	fxCheck(t, "remove secret", fa.Remove(filepath.Join(f.home, ".ssh", "id_rsa")), RuleDenylist)
	fxOutsideUntouched(t, f, ModeWorkspaceWrite)
	if _, err := os.Lstat(filepath.Join(f.wt, "to-outside")); err != nil {
		t.Fatal("symlink removed")
	}
	ro := f.access(t, ModeReadOnly)
	fxCheck(t, "read-only remove", ro.Remove("sub/a.txt"), RuleReadOnly)
}

func TestFileRename(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeRestricted)
	if err := fa.Rename("sub/a.txt", "moved.txt"); err != nil {
		t.Fatal(err)
	}
	if got := fxRead(t, filepath.Join(f.wt, "moved.txt")); got != "a" {
		t.Fatalf("moved holds %q", got)
	}
	err := fa.Rename("moved.txt", "file.txt")
	fxCheck(t, "rename onto existing", err, wantErr)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("want EEXIST, got %v", err)
	}
	if fxRead(t, filepath.Join(f.wt, "file.txt")) != "hello" || fxRead(t, filepath.Join(f.wt, "moved.txt")) != "a" {
		t.Fatal("NOREPLACE rename changed a file")
	}
	fxCheck(t, "rename into .git", fa.Rename("moved.txt", ".git/hooks/pre-commit"), RuleGitMetadata)
	fxCheck(t, "rename out of .git", fa.Rename(".git/config", "c"), RuleGitMetadata)
	fxCheck(t, "rename symlink", fa.Rename("to-outside", "x"), RuleSymlink)
	fxCheck(t, "rename onto symlink", fa.Rename("moved.txt", "dangling"), RuleSymlink)
	fxCheck(t, "rename into symlinked dir", fa.Rename("moved.txt", "linkdir/m"), RuleSymlink)
	fxCheck(t, "rename outside", fa.Rename("moved.txt", "../sibling/m"), RuleOutside)
	fxCheck(t, "rename to scratch", fa.Rename("moved.txt", filepath.Join(f.scratch, "m")), wantAny)
	fxOutsideUntouched(t, f, ModeRestricted)
}
