package confine

import "testing"

// TestPlanWritesBlocked: a restricted policy with writes blocked (the
// delegate floor under a restricted parent) keeps restricted's empty root
// and shows the worktree read-only; its only writable mount is the
// scratch, git metadata included.
func TestPlanWritesBlocked(t *testing.T) {
	for _, c := range planCases(t) {
		if c.p.Mode() != ModeRestricted {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			bp, err := c.p.BlockWrites()
			if err != nil {
				t.Fatal(err)
			}
			mp := Plan(bp, c.l)
			roWork := false
			for _, m := range mp {
				if isWritable(m.Kind) && m.Dst != c.scratch {
					t.Errorf("writes-blocked plan has a writable %s of %s", m.Kind, m.Dst)
				}
				if m.Kind == MountROBind && m.Dst == c.f.work {
					roWork = true
				}
				if m.Kind == MountROBind && m.Src == "/" {
					t.Error("writes-blocked restricted binds the whole root: reads widened")
				}
			}
			if !roWork {
				t.Error("the worktree is not shown read-only")
			}
			if len(bp.WriteRoots()) != 0 {
				t.Errorf("WriteRoots = %v", bp.WriteRoots())
			}
			if _, err := (&Policy{mode: ModeWorkspaceWrite}).BlockWrites(); err == nil {
				t.Error("BlockWrites accepted workspace-write")
			}
		})
	}
}
