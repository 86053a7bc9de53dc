package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/gateway"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// The gateway (docs/gateway.md, "MCP servers behind evener-mcp"): each session runs
// its own instance of each configured server (package gateway) and
// publishes its tools as NAME__TOOL in its own definitions (filterTools),
// through the one call pipeline (Hub.call): hooks see the published name,
// the audit records the call, escalation never asks (Facts.Approval "").
//
// A name is registered on the MCP server once, the first time a session's
// instance lists it, with the same Hub.call handler every other tool has;
// each session then dispatches to its own instance. No probe instance runs
// at start: it would be one more process outside any session, and what a
// server lists may differ by session (its tools/list_changed, a narrower
// policy).

// gatewayHub registers the published names of every session's servers.
type gatewayHub struct {
	h          *Hub
	mu         sync.Mutex // guards the fields below
	registered map[string]bool
	pending    []mcp.Tool // listed before the MCP server existed (stdio)
	srvReady   bool
}

func (g *gatewayHub) register(ts []mcp.Tool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range ts {
		if g.registered[t.Name] {
			continue
		}
		g.registered[t.Name] = true
		if !g.srvReady {
			g.pending = append(g.pending, t)
			continue
		}
		g.h.addTool(t, gatewayFacts(t.Name))
	}
}

// has says whether name is a registered gateway tool.
func (g *gatewayHub) has(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.srvReady && g.registered[name]
}

// ready is called once the MCP server exists.
func (g *gatewayHub) ready() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.srvReady = true
	for _, t := range g.pending {
		g.h.addTool(t, gatewayFacts(t.Name))
	}
	g.pending = nil
}

// gatewayFacts: a downstream tool starts no process of ours per call (its
// server runs already), changes no file we know of, never asks for
// approval, needs no file layer.
func gatewayFacts(name string) tools.Facts { return tools.Facts{Name: name} }

func gatewayLine(servers []config.MCPServer) string {
	var parts []string
	for _, e := range servers {
		n := e.Name + " (network " + e.Network
		if e.Network == config.MCPNetworkHost {
			n += ": the host's network, outside the sandbox's"
		}
		parts = append(parts, n+")")
	}
	return strings.Join(parts, ", ")
}

// startupLine is the stdio server's startup line: the sandbox session's,
// naming the MCP servers behind it and the network each has (host: the one
// spawn that keeps the host's).
func (s *Session) startupLine() string {
	line := s.sb.StartupLine()
	if len(s.h.o.Config.MCPServers) > 0 {
		line += "; MCP servers: " + gatewayLine(s.h.o.Config.MCPServers)
	}
	return line
}

// sessionGateway is one session's instances.
type sessionGateway struct {
	servers []*gateway.Server
	ready   chan struct{}
	// search is the session's tool search (toolsearch.go), guarded by
	// Session.mu.
	search toolSearch

	// The client is told its tool list changed (tools/list_changed) once
	// per change of the gateway tools it would list, never before its
	// notifications/initialized, and not for a change that the list it is
	// being served already holds.
	mu sync.Mutex // guards the fields below
	// initialized is set by the client's notifications/initialized.
	initialized bool
	// listing counts the client's tools/list requests waiting for the
	// instances' first start (waitGateway): what changes meanwhile is in
	// the list they are served.
	listing int
	// cur is the signature (toolSig) of the gateway tools the session
	// publishes now; seen that of those the client last saw: in a list
	// it was served, or at the initialize answer (before which it can
	// have seen none), or announced by a notification.
	cur, seen string
	// pins is the state of the session's pins (gateway_pins.go).
	pins *sessionPins
}

// toolSig is the signature of a list of gateway tools: their names and
// definitions, in name order. Our own tools are left out: they change only
// with the roots, which narrow the worktree before the first call.
func toolSig(ts []mcp.Tool) string {
	var gw []mcp.Tool
	for _, t := range ts {
		if gatewayName(t.Name) {
			gw = append(gw, t)
		}
	}
	slices.SortFunc(gw, func(a, b mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, t := range gw {
		j, err := json.Marshal(t)
		if err != nil {
			j = []byte(t.Name)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// dueLocked says whether the client must be told of a change now, and if
// so records it as told. g.mu is held.
func (g *sessionGateway) dueLocked() bool {
	if !g.initialized || g.listing > 0 || g.cur == g.seen {
		return false
	}
	g.seen = g.cur
	return true
}

// gatewayAnswered: the client's initialize is being answered; it has seen
// no tool yet, so what the session publishes now is its starting point.
func (s *Session) gatewayAnswered() {
	if s.gw == nil {
		return
	}
	s.gw.mu.Lock()
	s.gw.seen = s.gw.cur
	s.gw.mu.Unlock()
}

// gatewayInitialized: the client sent notifications/initialized; a change
// since its initialize was answered is told now, once.
func (s *Session) gatewayInitialized() {
	if s.gw == nil {
		return
	}
	s.gw.mu.Lock()
	s.gw.initialized = true
	due := s.gw.dueLocked()
	s.gw.mu.Unlock()
	if due {
		s.toolsChanged()
	}
}

// gatewayListed records the tools a tools/list served the client. s.mu is
// held.
func (s *Session) gatewayListedLocked(served []mcp.Tool) {
	if s.gw == nil {
		return
	}
	sig := toolSig(served)
	s.gw.mu.Lock()
	s.gw.seen = sig
	s.gw.mu.Unlock()
}

// startGateway starts the session's instances and returns the preamble's
// lines about them.
func (s *Session) startGateway() string {
	if len(s.h.o.Config.MCPServers) == 0 || s.gw == nil {
		return ""
	}
	grants := s.sb.Launcher.Policy().HookGrants()
	var wg sync.WaitGroup
	for _, e := range s.h.o.Config.MCPServers {
		for _, g := range grants {
			if g.Refused != "" && slices.Contains(e.Grants, g.Command) && s.sb.Launcher.Policy().Mode() != confine.ModeOff {
				s.h.warnOnce("mcp_servers.%s: grant %s refused: %s (%s)", e.Name, g.Command, g.Refused, g.Detail)
			}
		}
		srv := gateway.Start(gateway.Entry{Name: e.Name, Command: e.Command, Args: e.Args, Env: e.Env, Network: e.Network,
			Tools: e.Tools, DenyTools: e.DenyTools},
			s.sb.Launcher, s.h.o.logger().With("session", s.sb.ID), s.gatewayChanged,
			func(ctx context.Context, params map[string]any) {
				s.notifyCall(ctx, "notifications/progress", params)
			})
		s.gw.servers = append(s.gw.servers, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-srv.Ready()
		}()
	}
	go func() {
		wg.Wait()
		close(s.gw.ready)
	}()
	return "- MCP servers behind this one, each in this sandbox, their tools named SERVER__TOOL: " + gatewayLine(s.h.o.Config.MCPServers) + ".\n"
}

// gatewayStatus names the session's MCP servers that are unavailable now
// (did not start, exited, did not answer), one line each, for the
// preamble: a client that reads it later learns which tools will fail.
func (s *Session) gatewayStatus() string {
	if s.gw == nil {
		return ""
	}
	var b strings.Builder
	for _, srv := range s.gw.servers {
		if why := srv.Failure(); why != "" {
			fmt.Fprintf(&b, "- MCP server %s is unavailable (%s); its tools' calls fail until it is restarted.\n", srv.Name(), why)
		}
	}
	b.WriteString(s.pinStatus())
	return b.String()
}

// waitGateway waits (bounded) for the session's instances' first start,
// so that their tools are in the first tools/list; a change meanwhile is
// in that list, so it is not announced.
func (s *Session) waitGateway() {
	if s.gw == nil || len(s.gw.servers) == 0 {
		return
	}
	s.gw.mu.Lock()
	s.gw.listing++
	s.gw.mu.Unlock()
	defer func() {
		s.gw.mu.Lock()
		s.gw.listing--
		s.gw.mu.Unlock()
	}()
	select {
	case <-s.gw.ready:
	case <-time.After(gateway.InitTimeout + 2*time.Second):
	}
}

// gatewayChanged rebuilds the session's definitions after one of its
// servers came up, went or changed its tools, and tells the client when
// what it would list changed (sessionGateway).
func (s *Session) gatewayChanged() {
	if s.rebuildGateway() {
		s.toolsChanged() // to the streams that asked, on the revision that has them (listen.go)
	}
}

// rebuildGateway is gatewayChanged but the telling: it says whether the
// client must be told (find_tools tells it about its own call).
func (s *Session) rebuildGateway() (due bool) {
	s.mu.Lock()
	if s.handlers == nil {
		s.mu.Unlock()
		return false
	}
	for name := range s.handlers {
		if gatewayName(name) {
			delete(s.handlers, name)
			delete(s.defs, name)
		}
	}
	added := s.addGateway(s.handlers, s.defs)
	// Registered before the lock is let go: a tools/list served after it
	// lists what cur says (the library lists only registered names).
	s.h.gw.register(added)
	s.gw.mu.Lock()
	s.gw.cur = toolSig(added)
	due = s.gw.dueLocked()
	s.gw.mu.Unlock()
	s.mu.Unlock()
	return due
}

// addGateway adds the session's gateway tools to hs and defs and returns
// their definitions.
func (s *Session) addGateway(hs map[string]tools.Tool, defs map[string]mcp.Tool) []mcp.Tool {
	if s.gw == nil {
		return nil
	}
	type listed struct {
		srv *gateway.Server
		def mcp.Tool
	}
	all := map[string]listed{}
	defsOf := map[string]mcp.Tool{}
	var names []string
	for _, srv := range s.gw.servers {
		for _, t := range s.pinned(srv, srv.Tools()) {
			all[t.Name] = listed{srv, t}
			defsOf[t.Name] = t
			names = append(names, t.Name)
		}
	}
	s.h.gw.register(s.searchLocked(defsOf, names))
	published, _ := s.scope.publish(names)
	var out []mcp.Tool
	for _, name := range published {
		if searchTool(name) {
			out = append(out, s.addSearchToolLocked(name, hs, defs))
			continue
		}
		l, ok := all[name]
		if !ok {
			continue // one of ours
		}
		srv, t := l.srv, l.def
		// The hooks' context may join its structured content (hooks.go).
		t.RawOutputSchema = tools.DeclareHookContext(t.RawOutputSchema)
		own := strings.TrimPrefix(t.Name, srv.Name()+gateway.Sep)
		hs[t.Name] = tools.Tool{ServerTool: mcpserver.ServerTool{Tool: t, Handler: s.gatewayHandler(srv, t.Name, own)}, Facts: gatewayFacts(t.Name)}
		defs[t.Name] = t
		out = append(out, t)
	}
	return out
}

func (s *Session) gatewayHandler(srv *gateway.Server, published, own string) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := srv.Call(ctx, own, req)
		decision := "ran"
		if err != nil {
			decision = "failed"
			res = mcp.NewToolResultError(err.Error())
		}
		s.sb.Audit.Write(session.Record{Tool: published, Decision: decision})
		return res, nil
	}
}

// closeGateway kills the session's instances and waits for them.
func (s *Session) closeGateway() {
	if s.gw == nil {
		return
	}
	s.stopPins()
	var wg sync.WaitGroup
	for _, srv := range s.gw.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.Close()
		}()
	}
	wg.Wait()
}
