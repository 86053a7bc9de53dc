//go:build linux

package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGatewayTSClient: the official TypeScript SDK client lists the
// gateway's tools (their schemas passed through) and validates every
// structured result of a downstream tool against its output schema.
func TestGatewayTSClient(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
		plan := e.stdioPlan(t, "--mcp-config", cfg)
		readme := filepath.Join(e.work, "README")
		plan.Calls = []tsCall{
			{Name: "files__read_text_file", Arguments: map[string]any{"path": readme}},
			{Name: "files__list_directory", Arguments: map[string]any{"path": e.work}},
			{Name: "files__get_file_info", Arguments: map[string]any{"path": readme}},
			{Name: "files__write_file", Arguments: map[string]any{"path": filepath.Join(e.work, "ts.txt"), "content": "ts\n"}},
			{Name: "files__read_multiple_files", Arguments: map[string]any{"paths": []string{readme, filepath.Join(e.work, "ts.txt")}}},
		}
		run := runTS(t, plan)
		if !slices.Contains(run.listed, "files__read_text_file") {
			t.Fatalf("listed %v\n%s", run.listed, run.stderr)
		}
		for i, r := range run.results {
			if !r.OK || r.IsError {
				t.Errorf("call %d %s: ok %v isError %v %s %s", i, r.Name, r.OK, r.IsError, r.Error, r.Text)
			}
		}
		if len(run.results) != len(plan.Calls) || !strings.Contains(run.results[0].Text, "worktree file") {
			t.Errorf("results %+v", run.results)
		}
	})
}
