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
}

// publish is the session's tool list: its own tools in the server's
// order, then those of downstream (the NAME__TOOL names the session's MCP
// servers list now) that the scope allows. The delegate floor applies
// here too: a session with no tool that changes files keeps only the
// memory tools that read. The error names a tool the client asked for
// that the server does not publish.
func (sc toolScope) publish(downstream []string) ([]string, error) {
	own, gw := splitGatewayTools(sc.Server)
	if own == nil {
		own = tools.Names()
	}
	askedOwn, askedGW := splitGatewayTools(sc.Client)
	for _, t := range askedOwn {
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
	for _, t := range downstream {
		if (sc.Server == nil || slices.Contains(gw, t)) && (sc.Client == nil || slices.Contains(askedGW, t)) {
			out = append(out, t)
		}
	}
	return out, nil
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
