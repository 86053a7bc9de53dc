//go:build linux

package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestGrant: an approved directory outside the roots becomes readable
// (restricted) and writable (workspace-write, restricted) for the granted
// access only; the denylist, git metadata and symlink rules still hold
// inside it, and masked or pseudo-filesystem directories are never granted.
func TestGrant(t *testing.T) {
	f := newFileFixture(t)
	for _, mode := range []Mode{ModeWorkspaceWrite, ModeRestricted} {
		fa := f.access(t, mode)
		if mode == ModeRestricted {
			_, _, err := fa.ReadFile("../sibling/f")
			fxCheck(t, "restricted read before grant", err, RuleOutside)
		}
		_, err := fa.WriteFile("../sibling/new.txt", []byte("x"), WriteOptions{})
		fxCheck(t, string(mode)+" write before grant", err, RuleOutside)

		g, err := fa.Grant(f.sib)
		if err != nil {
			t.Fatalf("%s: Grant: %v", mode, err)
		}
		if data, _, err := g.ReadFile("../sibling/f"); err != nil || string(data) != "sibling" {
			t.Errorf("%s: granted read = %q, %v", mode, data, err)
		}
		if _, err := g.WriteFile("../sibling/new.txt", []byte("approved"), WriteOptions{}); err != nil {
			t.Errorf("%s: granted write: %v", mode, err)
		}
		// Only the granted directory: its neighbour stays outside.
		_, err = g.WriteFile("../proj-evil/new.txt", []byte("x"), WriteOptions{})
		fxCheck(t, string(mode)+" neighbour of grant", err, RuleOutside)
		// The original access is unchanged.
		_, err = fa.WriteFile("../sibling/new2.txt", []byte("x"), WriteOptions{})
		fxCheck(t, string(mode)+" original after grant", err, RuleOutside)
		g.Close()
		os.Remove(filepath.Join(f.sib, "new.txt"))

		for _, dir := range []string{filepath.Join(f.home, ".ssh"), "/proc", "/proc/self", f.wt + "/linkdir", "relative", f.sib + "/../x"} {
			if g, err := fa.Grant(dir); err == nil || !errors.Is(err, errNotGrantable) {
				if g != nil {
					g.Close()
				}
				t.Errorf("%s: Grant(%s) = %v, want errNotGrantable", mode, dir, err)
			}
		}
		// A grant of a directory holding a secret still masks the secret.
		g, err = fa.Grant(f.home)
		if err != nil {
			t.Fatalf("%s: Grant(home): %v", mode, err)
		}
		_, _, err = g.ReadFile(filepath.Join(f.home, ".ssh", "id_rsa"))
		fxCheck(t, string(mode)+" secret under grant", err, RuleDenylist)
		_, err = g.WriteFile(filepath.Join(f.home, ".ssh", "authorized_keys"), []byte("x"), WriteOptions{})
		fxCheck(t, string(mode)+" write into masked dir under grant", err, RuleDenylist)
		g.Close()
	}
	for _, mode := range []Mode{ModeReadOnly, ModeOff} {
		if _, err := f.access(t, mode).Grant(f.sib); !errors.Is(err, errNotGrantable) {
			t.Errorf("%s: Grant = %v, want errNotGrantable", mode, err)
		}
	}
}

// TestFileAccessWritesBlocked: restricted with writes blocked reads the
// worktree, writes only the scratch, and grants nothing.
func TestFileAccessWritesBlocked(t *testing.T) {
	f := newFileFixture(t)
	bp, err := f.policy(t, ModeRestricted).BlockWrites()
	if err != nil {
		t.Fatal(err)
	}
	fa, err := NewFileAccess(bp, f.scratch)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	if data, _, err := fa.ReadFile("file.txt"); err != nil || string(data) != "hello" {
		t.Errorf("read in the worktree: %q %v", data, err)
	}
	_, _, err = fa.ReadFile("../sibling/f")
	fxCheck(t, "read outside", err, RuleOutside)
	_, err = fa.WriteFile("new.txt", []byte("x"), WriteOptions{})
	fxCheck(t, "write in the worktree", err, RuleReadOnly)
	fxCheck(t, "remove in the worktree", fa.Remove("file.txt"), RuleReadOnly)
	if _, err := fa.WriteFile(filepath.Join(f.scratch, "ok"), []byte("x"), WriteOptions{}); err != nil {
		t.Errorf("write in the scratch: %v", err)
	}
	if g, err := fa.Grant(f.sib); !errors.Is(err, errNotGrantable) {
		if g != nil {
			g.Close()
		}
		t.Errorf("Grant with writes blocked = %v", err)
	}
}
