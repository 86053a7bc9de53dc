package tools

import (
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/session"
)

// TestDenialViolationAction: a path refused before any operation is
// recorded as a write for a tool that writes and as a read otherwise
// (docs/observability.md, "Violations").
func TestDenialViolationAction(t *testing.T) {
	for tool, want := range map[string]string{"write_file": "file-write", "apply_patch": "file-write", "read_file": "file-read", "grep": "file-read"} {
		rec := session.Recorder{Violations: &session.Violations{}}
		d := Deps{Audit: rec}
		res := d.failure(tool, &confine.Denial{Op: "resolve", Path: "~/.bashrc", Base: ".bashrc", Rule: confine.RuleInvalidPath, Mode: confine.ModeWorkspaceWrite})
		if den, ok := DenialOf(res); !ok || den.Rule != confine.RuleInvalidPath {
			t.Fatalf("%s: not a denial: %+v", tool, res)
		}
		got := rec.Violations.List()
		if len(got) != 1 || got[0].Action != want || got[0].Target != ".bashrc" || got[0].Tool != tool {
			t.Errorf("%s: recorded %+v, want %s .bashrc", tool, got, want)
		}
	}
}
