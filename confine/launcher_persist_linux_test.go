package confine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeptScratch: a launcher told to keep its scratch leaves it on Close;
// ReopenLauncherUnder reopens it only where CheckScratch holds (a real
// directory of this user, mode 0700, with a scratch's name, directly in
// the parent); RemoveScratch removes only such a one.
func TestKeptScratch(t *testing.T) {
	f := newFileFixture(t)
	p := f.policy(t, ModeWorkspaceWrite)
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o700); err != nil { // as the server's own scratch parent is
		t.Fatal(err)
	}
	l, err := NewLauncherUnder(p, nil, parent)
	if err != nil {
		t.Fatal(err)
	}
	dir := l.Scratch()
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.KeepScratch()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "marker")); err != nil {
		t.Fatalf("a kept scratch was removed: %v", err)
	}
	r, err := ReopenLauncherUnder(p, nil, parent, dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if r.Scratch() != dir {
		t.Errorf("reopened scratch %s, want %s", r.Scratch(), dir)
	}

	// What a forged record could name instead.
	other := t.TempDir()
	target := filepath.Join(parent, "evener-mcp-77")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "evener-mcp-78")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(parent, "evener-mcp-79")
	if err := os.Mkdir(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(parent, "mine")
	if err := os.Mkdir(named, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{link, named, filepath.Join(parent, "evener-mcp-80"), other, filepath.Join(target, "..", "evener-mcp-77x"), parent, "evener-mcp-1", filepath.Join(f.wt, "evener-mcp-1")} {
		if _, err := ReopenLauncherUnder(p, nil, parent, bad); err == nil {
			t.Errorf("reopened %s", bad)
		}
		if err := RemoveScratch(parent, bad); err == nil {
			t.Errorf("removed %s", bad)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the symbolic link's target went: %v", err)
	}
	// A scratch its sandbox made 0755 (chmod $TMPDIR) is still this user's,
	// in this user's private parent: its mode is set back and it is removed,
	// read-only directories a command left in it included.
	if err := os.MkdirAll(filepath.Join(wide, "ro", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wide, "ro", "deep", "f"), []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(wide, "ro", "deep"), filepath.Join(wide, "ro")} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckScratch(parent, wide); err != nil {
		t.Errorf("a scratch chmod'ed 0755 by its sandbox: %v", err)
	}
	if fi, err := os.Stat(wide); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mode not restored: %v %v", fi.Mode(), err)
	}
	if err := os.Chmod(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RemoveScratch(parent, wide); err != nil {
		t.Errorf("remove a scratch chmod'ed 0755: %v", err)
	}
	if _, err := os.Lstat(wide); !os.IsNotExist(err) {
		t.Errorf("the 0755 scratch is still there: %v", err)
	}
	if err := RemoveScratch(parent, wide); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removing it again: %v, want not-exist", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(target, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := CheckScratch(parent, target); err == nil {
			t.Errorf("accepted a scratch owned by another user")
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close without KeepScratch left the scratch: %v", err)
	}
}

// TestRehost: a policy measured against a host that can no longer enforce
// its mode is refused, not degraded; off stays off; a usable host keeps
// the mode.
func TestRehost(t *testing.T) {
	f := newFileFixture(t)
	p := f.policy(t, ModeWorkspaceWrite)
	if _, err := p.Rehost(HostReport{OS: "linux", BwrapError: "bubblewrap (bwrap) not found on PATH"}); !errors.Is(err, ErrUnenforceable) || !strings.Contains(err.Error(), "workspace-write") {
		t.Errorf("rehost without bubblewrap: %v", err)
	}
	q, err := p.Rehost(fileTestHost)
	if err != nil || q.Mode() != ModeWorkspaceWrite {
		t.Errorf("rehost on a usable host: %v %v", q, err)
	}
	off := f.policy(t, ModeOff)
	if q, err := off.Rehost(HostReport{OS: "linux"}); err != nil || q.Mode() != ModeOff {
		t.Errorf("rehost of off: %v %v", q, err)
	}
}
