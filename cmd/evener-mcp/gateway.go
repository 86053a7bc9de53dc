package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/gateway/pins"
)

// gatewaySep joins a server's name and its tool's (gateway.Sep; this
// binary links no MCP library, so not the gateway package).
const gatewaySep = "__"

// runGateway reads and changes the pins of the configured MCP servers'
// tools in this project (docs/gateway.md, "Pins"): pending lists the tools
// awaiting approval with what changed, approve pins them, pins lists what
// is approved. It loads the configuration as the server does (the same
// flags, the same layers) to know the servers, the project and the state
// directory, and starts nothing.
func runGateway(args []string) int {
	s := cli.NewFlagSet("evener-mcp gateway")
	s.Usage = cli.UsageGateway
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			s.PrintHelp(os.Stderr)
			return 0
		}
		fmt.Fprint(os.Stderr, "evener-mcp gateway: no action (pending, approve or pins)\n", cli.UsageGateway)
		return cli.ExitUsage
	}
	action := args[0]
	if err := s.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "evener-mcp gateway: %v\n", err)
		return cli.ExitUsage
	}
	cfg, err := config.Load(s.F, os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return cli.ExitUsage
	}
	if cfg.StateDir == "" {
		fmt.Fprintln(os.Stderr, "evener-mcp gateway: no state directory: no pins are kept")
		return cli.ExitUsage
	}
	// The project as the server names it: the worktree, symlinks resolved
	// (confine.Policy.Workdir).
	project, err := filepath.EvalSymlinks(cfg.Spec.Workdir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp gateway: workdir: %v\n", err)
		return cli.ExitUsage
	}
	g := gatewayPins{store: pins.Open(cfg.StateDir), project: project, uid: os.Getuid(), servers: map[string]string{}}
	for _, e := range cfg.MCPServers {
		g.servers[e.Name] = e.Approval
	}
	g.addFiled()
	switch action {
	case "pending":
		if len(s.FS.Args()) > 0 {
			break
		}
		return g.pending()
	case "pins":
		if len(s.FS.Args()) > 0 {
			break
		}
		return g.pins()
	case "approve":
		if len(s.FS.Args()) == 0 {
			fmt.Fprintln(os.Stderr, "evener-mcp gateway approve: name the tools (SERVER__TOOL; `evener-mcp gateway pending` lists them)")
			return cli.ExitUsage
		}
		return g.approve(s.FS.Args())
	default:
		fmt.Fprintf(os.Stderr, "evener-mcp gateway: unknown action %q\n%s", action, cli.UsageGateway)
		return cli.ExitUsage
	}
	fmt.Fprintf(os.Stderr, "evener-mcp gateway %s takes no arguments\n", action)
	return cli.ExitUsage
}

// gatewayPins are the pins of one user's configured servers in a project.
type gatewayPins struct {
	store   pins.Store
	project string
	uid     int
	servers map[string]string // name -> approval policy
}

// addFiled adds the servers with a pin file of this user in this project
// that the configuration does not name (run without the server's
// --mcp-config, or a server since removed): their pins can be read and
// approved all the same.
func (g gatewayPins) addFiled() {
	keys, err := g.store.Keys()
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp gateway: %v\n", err)
		return
	}
	for _, k := range keys {
		// A key is SERVER-HASH, the hash 20 hex digits (pins.Key).
		if len(k) <= 21 || k[len(k)-21] != '-' {
			continue
		}
		server := k[:len(k)-21]
		if _, known := g.servers[server]; !known && pins.Key(g.uid, g.project, server) == k {
			g.servers[server] = "unknown: not in this configuration"
		}
	}
}

func (g gatewayPins) names() []string {
	out := make([]string, 0, len(g.servers))
	for n := range g.servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (g gatewayPins) read(server string) (*pins.File, bool) {
	f, exists, err := g.store.Read(pins.Key(g.uid, g.project, server))
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp gateway: %s: %v\n", server, err)
		return nil, false
	}
	return f, exists
}

func (g gatewayPins) pending() int {
	n := 0
	for _, server := range g.names() {
		f, _ := g.read(server)
		if f == nil {
			continue
		}
		for _, tool := range sortedKeys(f.Pending) {
			p := f.Pending[tool]
			n++
			if p.Old == nil {
				fmt.Printf("%s%s%s: new (listed %s)\n", server, gatewaySep, tool, p.Seen.Format(time.RFC3339))
				printTool("", p.Tool)
				continue
			}
			fmt.Printf("%s%s%s: changed since approved %s (listed %s)\n", server, gatewaySep, tool, p.Old.Approved.Format(time.RFC3339), p.Seen.Format(time.RFC3339))
			if p.Old.Title != p.Title {
				fmt.Printf("  title was:        %q\n  title now:        %q\n", p.Old.Title, p.Title)
			}
			if p.Old.Description != p.Description {
				fmt.Printf("  description was:  %q\n  description now:  %q\n", p.Old.Description, p.Description)
			}
			if p.Old.Schema != p.Schema {
				fmt.Printf("  input schema was: sha256 %s\n  input schema now: sha256 %s\n", p.Old.Schema, p.Schema)
			}
		}
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp gateway: no tool awaits approval in", g.project)
	}
	return 0
}

func (g gatewayPins) pins() int {
	for _, server := range g.names() {
		f, exists := g.read(server)
		if f == nil {
			continue
		}
		if !exists {
			fmt.Printf("%s: no pins yet (approval %s)\n", server, g.servers[server])
			continue
		}
		fmt.Printf("%s: %d pinned, %d pending (approval %s)\n", server, len(f.Pinned), len(f.Pending), g.servers[server])
		for _, tool := range sortedKeys(f.Pinned) {
			p := f.Pinned[tool]
			fmt.Printf("  %s%s%s: approved %s by %s\n", server, gatewaySep, tool, p.Approved.Format(time.RFC3339), p.By)
			printTool("  ", p.Tool)
		}
	}
	return 0
}

func printTool(indent string, t pins.Tool) {
	if t.Title != "" {
		fmt.Printf("%s  title:        %q\n", indent, t.Title)
	}
	fmt.Printf("%s  description:  %q\n%s  input schema: sha256 %s\n", indent, t.Description, indent, t.Schema)
}

// approve pins each named pending tool; it fails (exit 1) when one is not
// pending, after approving the others.
func (g gatewayPins) approve(names []string) int {
	code := 0
	for _, name := range names {
		server, tool, ok := strings.Cut(name, gatewaySep)
		if _, known := g.servers[server]; !ok || !known || tool == "" {
			fmt.Fprintf(os.Stderr, "evener-mcp gateway approve: %q is not SERVER__TOOL of a configured server\n", name)
			code = 1
			continue
		}
		_, _, err := g.store.Update(pins.Key(g.uid, g.project, server), func(f *pins.File, exists bool) (bool, error) {
			if err := pins.Approve(f, tool, "cli", time.Now().UTC()); err != nil {
				return false, err
			}
			return true, nil
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp gateway approve: %s%s%v\n", server, gatewaySep, err)
			code = 1
			continue
		}
		fmt.Fprintf(os.Stderr, "evener-mcp gateway: approved %s in %s\n", name, g.project)
	}
	return code
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
