package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/evener-dev/evener-mcp/gateway"
	"github.com/evener-dev/evener-mcp/tools"
)

// toolScope is everything that decides which tools a session publishes;
// publish is the one place that decides it.
type toolScope struct {
	// Server is the server's tool list (--tools; nil: every tool of ours
	// and every tool of the MCP servers behind this one).
	Server []string
	// Client is what the client asked for in its narrowing (nil: no
	// narrowing). Every name must be one the server publishes.
	Client []string
	// NoFiles: the session has no race-safe file layer (this build), so
	// no tool that needs one is published.
	NoFiles bool
	// NoTerminals: the session can have no terminals (no session
	// loopback here).
	NoTerminals bool
	// NoMemory: memory is off (--disable-memory, memory = false, no state
	// directory) or its roots could not be opened.
	NoMemory bool

	// Tool search (toolsearch.go). Gateway: MCP servers run behind this
	// one (a client may ask for find_tools). Search are the servers whose
	// tools are found with find_tools rather than listed; Found the
	// tools find_tools returned in this session, published from then on.
	// Both grow while the session runs, under Session.mu.
	Gateway bool
	Search  map[string]bool
	Found   map[string]bool
}

// publish is the session's tool list: its own tools in the server's
// order, then those of downstream (the NAME__TOOL names the session's MCP
// servers list now) that the scope allows. The delegate floor applies
// here too: a session with no tool that changes files keeps only the
// memory tools that read. A downstream tool under tool search is
// published once find_tools found it, and find_tools and call_tool are
// published (after our own tools) while there is any such tool. The error
// names a tool the client asked for that the server does not publish.
func (sc toolScope) publish(downstream []string) ([]string, error) {
	own, gw := splitGatewayTools(sc.Server)
	if own == nil {
		own = tools.Names()
	}
	askedOwn, askedGW := splitGatewayTools(sc.Client)
	for _, t := range askedOwn {
		if searchTool(t) && sc.Gateway {
			continue
		}
		if !slices.Contains(own, t) {
			return nil, fmt.Errorf("tool %q is not available on this server (it publishes %s)", t, strings.Join(own, ", "))
		}
	}
	for _, t := range askedGW {
		if sc.Server != nil && !slices.Contains(gw, t) {
			return nil, fmt.Errorf("tool %q is not available on this server (--tools)", t)
		}
	}
	var out []string
	for _, t := range own {
		f, _ := tools.FactsOf(t)
		switch {
		case sc.Client != nil && !slices.Contains(askedOwn, t):
		case sc.NoFiles && f.Files, sc.NoTerminals && f.Terminal, sc.NoMemory && f.Memory != "":
		default:
			out = append(out, t)
		}
	}
	if !tools.ChangesFiles(out) {
		out = slices.DeleteFunc(out, func(t string) bool {
			f, _ := tools.FactsOf(t)
			return f.Memory != "" && f.Memory != "read"
		})
	}
	listed, searched := sc.downstream(downstream)
	if len(searched) > 0 {
		out = append(out, findToolsName, callToolName)
	}
	return append(out, listed...), nil
}

// downstream sorts the downstream tools the scope allows: listed are
// published, searched are under tool search (found with find_tools; those
// found already are in both). A tool --tools or the client names is
// never under search: a list of names is the choice made already. The
// servers in Search have their tools searched; a client that asks for
// find_tools (or call_tool) has every downstream tool it does not name
// searched.
func (sc toolScope) downstream(names []string) (listed, searched []string) {
	_, gw := splitGatewayTools(sc.Server)
	askedOwn, askedGW := splitGatewayTools(sc.Client)
	clientSearch := slices.ContainsFunc(askedOwn, searchTool)
	for _, t := range names {
		serverNamed := sc.Server != nil && slices.Contains(gw, t)
		clientNamed := sc.Client != nil && slices.Contains(askedGW, t)
		if (sc.Server != nil && !serverNamed) || (sc.Client != nil && !clientNamed && !clientSearch) {
			continue
		}
		srv, _, _ := strings.Cut(t, gateway.Sep)
		if !serverNamed && !clientNamed && (clientSearch || sc.Search[srv]) {
			searched = append(searched, t)
			if !sc.Found[t] {
				continue
			}
		}
		listed = append(listed, t)
	}
	return listed, searched
}

// splitGatewayTools separates the gateway names (NAME__TOOL) from a list of
// tool names.
func splitGatewayTools(names []string) (own, gw []string) {
	if names == nil {
		return nil, nil
	}
	own = []string{}
	for _, n := range names {
		if strings.Contains(n, gateway.Sep) {
			gw = append(gw, n)
		} else {
			own = append(own, n)
		}
	}
	return own, gw
}
