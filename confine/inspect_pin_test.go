//go:build linux

package confine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInspectNoPinInUnwritableWorktree: a worktree without a repository
// gets an empty .git pinned, unless this user cannot write it (then
// nothing can be planted there, and bwrap could not make the mount point:
// every spawn used to fail with "Can't mkdir .git"). As root every
// directory is writable, so only the first half runs there.
func TestInspectNoPinInUnwritableWorktree(t *testing.T) {
	f := newFileFixture(t)
	plain := filepath.Join(f.root, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(Spec{Mode: ModeWorkspaceWrite, ModeExplicit: true, Workdir: plain, Env: []string{"HOME=" + f.home, "PATH=/usr/bin:/bin"}}, fileTestHost)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Inspect(p, f.scratch, plain)
	if err != nil || l.PinAbsentGit != filepath.Join(plain, ".git") {
		t.Fatalf("writable worktree: pin %q, %v", l.PinAbsentGit, err)
	}
	if os.Geteuid() == 0 {
		t.Skip("root writes every directory: the unwritable half runs as an unprivileged user (scripts/test.sh)")
	}
	if err := os.Chmod(plain, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(plain, 0o755)
	if l, err = Inspect(p, f.scratch, plain); err != nil || l.PinAbsentGit != "" {
		t.Errorf("unwritable worktree: pin %q, %v", l.PinAbsentGit, err)
	}
}
