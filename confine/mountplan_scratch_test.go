package confine

import (
	"path/filepath"
	"testing"
)

// TestPlanScratchParentHidden: with a server-private scratch parent (HTTP
// sessions), every read-anywhere plan covers the parent with an empty tmpfs
// right before binding the session's own scratch, so sibling sessions'
// scratch and bridge sockets are out of sight; restricted, whose root is
// empty, has nothing to cover.
func TestPlanScratchParentHidden(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			l := c.l
			l.ScratchParent = filepath.Dir(c.scratch)
			mp := Plan(c.p, l)
			cover, bind := -1, -1
			for i, m := range mp {
				if m.Kind == MountTmpfs && m.Dst == l.ScratchParent {
					cover = i
				}
				if m.Dst == c.scratch && m.Kind == MountBind {
					bind = i
				}
			}
			if bind < 0 {
				t.Fatal("no scratch bind")
			}
			switch {
			case c.p.Mode() == ModeRestricted && cover >= 0:
				t.Errorf("restricted plan covers the scratch parent (its root is empty already)")
			case c.p.Mode() != ModeRestricted && cover < 0:
				t.Errorf("the scratch parent is not covered")
			case c.p.Mode() != ModeRestricted && cover > bind:
				t.Errorf("the scratch parent is covered after the scratch bind (it would hide the scratch)")
			}
		})
	}
}
