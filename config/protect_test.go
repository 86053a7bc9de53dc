package config

import (
	"path/filepath"
	"testing"
)

// TestProtectLayers: protected_paths accumulate over every layer, the
// project file included (relative to the worktree there), and --protect;
// runner_state_dirs come from trusted layers and --state-rw only, the
// project file's ignored with a warning.
func TestProtectLayers(t *testing.T) {
	runCases(t, []loadCase{
		{
			name:    "every layer adds protected paths; only trusted ones add runner state",
			global:  "protected_paths = [\"@ROOT@/g\"]\nrunner_state_dirs = [\"@HOME@/.agent\"]\n",
			configs: []string{"protected_paths = [\"rel\"]\nrunner_state_dirs = [\"st\"]\n"},
			project: "protected_paths = [\".github/workflows\", \"@ROOT@/abs\"]\nrunner_state_dirs = [\"@ROOT@/evil\"]\n",
			flags:   Flags{Protect: []string{"@ROOT@/flag"}, StateRW: []string{"@ROOT@/flagstate"}},
			check: func(t *testing.T, e *testEnv, c *Config) {
				equalSlice(t, "Protected", c.Spec.Protected, []string{
					filepath.Join(e.root, "g"), filepath.Join(e.root, "cfg0", "rel"), filepath.Join(e.root, "flag"),
					filepath.Join(e.wd, ".github", "workflows"), filepath.Join(e.root, "abs"),
				})
				equalSlice(t, "StateRW", c.Spec.StateRW, []string{
					filepath.Join(e.home, ".agent"), filepath.Join(e.root, "cfg0", "st"), filepath.Join(e.root, "flagstate"),
				})
			},
			WantWarnings: []string{"ignoring runner_state_dirs: the project file may only narrow"},
		},
		{
			name:    "empty protected path",
			global:  "protected_paths = [\"\"]\n",
			WantErr: "protected_paths: empty path",
		},
		{
			name:    "empty --state-rw",
			flags:   Flags{StateRW: []string{""}},
			WantErr: "--state-rw: empty path",
		},
	})
}
