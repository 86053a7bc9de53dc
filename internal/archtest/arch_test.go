// Package archtest holds the tests that keep the package map true
// (docs/architecture.md): which of our packages each package may import, where the MCP library may be used, and the lists that two
// packages keep and that must agree.
package archtest

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/hooks"
	"github.com/evener-dev/evener-mcp/tools"
)

const module = "github.com/evener-dev/evener-mcp/"

// allowed maps each package (relative to the module) to the packages of
// ours it may import; a prefix ending in "/" allows a whole subtree.
// Dependencies point one way: cmd -> server -> tools, hooks -> session ->
// confine, egress; confine and egress import nothing of ours.
var allowed = map[string][]string{
	"cmd/evener-mcp":        {"cmd/internal/cli", "config", "confine", "session", "gateway/pins"},
	"cmd/evener-mcp-server": {"cmd/internal/cli", "config", "confine", "server", "tools"},
	// The helpers started inside a sandbox, as small as they can be: each
	// session sandbox slot is one start of it (docs/speed.md).
	"cmd/evener-mcp-inside": {"confine"},
	"cmd/internal/cli":      {"config", "confine"},
	"config":                {"confine"},
	"confine":               {},
	"egress":                {},
	"session":               {"confine", "egress", "terminal", "sshagent"},
	"sshagent":              {}, // a session's brokered SSH agent: the session hands it the allowlist's decision
	"tools":                 {"confine", "session", "memory", "terminal", "tools/internal/"},
	"hooks":                 {"confine", "session"},
	"memory":                {"confine"},
	"server":                {"config", "confine", "session", "tools", "memory", "hooks", "gateway", "gateway/pins", "terminal", "metrics"},
	"gateway":               {"confine"},
	// gateway/pins keeps the user's approvals of downstream tools; the
	// launcher binary's `gateway` subcommand reads and changes them, so it
	// imports nothing of ours and no MCP library.
	"gateway/pins": {},
	"terminal":     {"confine"},
	// metrics defines the Prometheus collectors on a private registry; it
	// imports nothing of ours (the server hands it the fixed tool and rule
	// names), so no other package's strings can reach a label unchecked.
	"metrics": {},
	// deploy/kubernetes holds the example manifests and only a test: it
	// checks them against the server's routes, defaults and flags.
	"deploy/kubernetes": {"server"},
	// internal/sandboxtest is the fixture the tests of the packages above
	// confine share (a host, a policy over it, a launcher); only tests
	// import it, which this map enforces by listing it for no package.
	"internal/sandboxtest": {"confine"},
	// internal/benchrelay is the bare relay the gateway benchmarks measure.
	"internal/benchrelay": {},
}

// mcpAllowed are the packages that speak MCP.
var mcpAllowed = []string{"server", "tools", "gateway"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func permitted(rel, imp string) bool {
	for _, a := range allowed[rel] {
		if imp == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a)) {
			return true
		}
	}
	return false
}

// TestImportMap: every package imports only the packages of ours the map
// allows, and the MCP library only where MCP is spoken.
func TestImportMap(t *testing.T) {
	for _, p := range list(t, "github.com/evener-dev/evener-mcp/...") {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if rel == "integration" || rel == "internal/archtest" {
			continue // tests of the whole
		}
		if strings.HasPrefix(rel, "tools/internal/") {
			rel = "tools/internal"
			allowed[rel] = []string{}
		}
		if _, ok := allowed[rel]; !ok {
			t.Errorf("%s is not on the map: add it to README's layout, docs/architecture.md and this test", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				if r := strings.TrimPrefix(imp, module); !permitted(rel, r) {
					t.Errorf("%s imports %s, which the package map does not allow", rel, r)
				}
			}
			if strings.HasPrefix(imp, "github.com/mark3labs/mcp-go") && !slices.Contains(mcpAllowed, rel) {
				t.Errorf("%s imports the MCP library (%s); only %v speak MCP", rel, imp, mcpAllowed)
			}
		}
	}
}

// TestLauncherBinaryHasNoMCP: evener-mcp (exec, probe, the relay every
// networked sandbox starts) links no MCP library: its schema package costs
// milliseconds at every start (docs/speed.md, "Speed"), and no metrics library
// (its collectors register at init), and no Kubernetes API types (only the
// manifests' test uses them).
func TestLauncherBinaryHasNoMCP(t *testing.T) {
	for _, p := range list(t, "-deps", module+"cmd/evener-mcp") {
		if strings.HasPrefix(p.ImportPath, "github.com/mark3labs/") || strings.Contains(p.ImportPath, "jsonschema") ||
			strings.HasPrefix(p.ImportPath, "github.com/prometheus/") || strings.HasPrefix(p.ImportPath, "k8s.io/") {
			t.Errorf("evener-mcp links %s", p.ImportPath)
		}
	}
}

// TestNamesAgree: config keeps its own lists of tool names and hook events
// (it may not import tools or hooks); they must match the packages that
// define them.
func TestNamesAgree(t *testing.T) {
	if !slices.Equal(config.KnownTools, tools.Names()) {
		t.Errorf("config.KnownTools %v, tools.Names() %v", config.KnownTools, tools.Names())
	}
	if !slices.Equal(config.HookEvents, hooks.Events) {
		t.Errorf("config.HookEvents %v, hooks.Events %v", config.HookEvents, hooks.Events)
	}
}

// TestServerBinaryHasNoKubernetes: the Kubernetes API types are a test
// dependency of deploy/kubernetes only; evener-mcp-server links none.
func TestServerBinaryHasNoKubernetes(t *testing.T) {
	for _, p := range list(t, "-deps", module+"cmd/evener-mcp-server") {
		if strings.HasPrefix(p.ImportPath, "k8s.io/") || strings.HasPrefix(p.ImportPath, "sigs.k8s.io/") {
			t.Errorf("evener-mcp-server links %s", p.ImportPath)
		}
	}
}
