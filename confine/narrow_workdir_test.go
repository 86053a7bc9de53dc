//go:build linux

package confine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNarrowWorkdir: a client's roots may narrow the worktree to a
// directory inside it, never to its parent, a sibling, or through a symlink
// that leaves it; the launcher accepts only narrower policies.
func TestNarrowWorkdir(t *testing.T) {
	f := newFileFixture(t)
	p := f.policy(t, ModeWorkspaceWrite)
	sub := filepath.Join(f.wt, "sub")
	q, err := p.NarrowWorkdir(sub)
	if err != nil || q.Workdir() != sub {
		t.Fatalf("NarrowWorkdir(sub) = %v, %v", q, err)
	}
	if q, err := p.NarrowWorkdir(f.wt); err != nil || q.Workdir() != f.wt {
		t.Errorf("NarrowWorkdir(same) = %v, %v", q, err)
	}
	for _, bad := range []string{filepath.Dir(f.wt), f.sib, f.evil, filepath.Join(f.wt, "linkdir"), "rel", filepath.Join(f.wt, "file.txt"), filepath.Join(f.wt, "missing")} {
		if q, err := p.NarrowWorkdir(bad); err == nil {
			t.Errorf("NarrowWorkdir(%s) = %s, want refusal", bad, q.Workdir())
		}
	}
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Narrow(q); err != nil {
		t.Fatalf("Launcher.Narrow(sub): %v", err)
	}
	if s.Policy().Workdir() != sub {
		t.Errorf("launcher workdir = %s", s.Policy().Workdir())
	}
	// Back to the wider worktree: refused.
	if err := s.Narrow(p); err == nil {
		t.Error("Launcher.Narrow back to the wider worktree succeeded")
	}
	ro, _ := p.Narrow(ModeReadOnly, NetworkOff, nil)
	if err := s.Narrow(ro); err == nil {
		t.Error("Launcher.Narrow to a policy with the wider worktree succeeded")
	}
	roSub, _ := q.Narrow(ModeReadOnly, NetworkOff, nil)
	if err := s.Narrow(roSub); err != nil {
		t.Errorf("Launcher.Narrow(read-only sub): %v", err)
	}
	if err := s.Narrow(q); err == nil {
		t.Error("Launcher.Narrow from read-only back to workspace-write succeeded")
	}
	_ = os.Remove(s.Scratch())
}
