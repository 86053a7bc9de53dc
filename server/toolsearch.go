package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/gateway"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Tool search (docs/gateway.md, "Tool search"): a session whose MCP servers
// would put many kilobytes of definitions into every request lists one
// tool, find_tools, in their place. A search returns the best-ranked of
// those tools (gateway.Rank) with their input schemas and publishes them
// in the session: its client hears one tools/list_changed, and they are
// listed and callable from then on. A client that hears no change (Claude
// Code over stdio: the sessionless revision, no subscriptions/listen
// stream) has call_tool, which calls a
// tool found by its name and arguments, through the same call pipeline as
// a direct call (hooks see the tool's own name). A call of a tool not
// found yet, either way, is refused with a result that says to search for
// it first: the model has not seen its schema. What is published is
// decided where everything else is (toolScope.publish); this file decides
// which servers are searched, keeps what was found and serves find_tools
// and call_tool.

// The tool search's tools.
const (
	findToolsName = "find_tools"
	callToolName  = "call_tool"
)

// searchTool says whether name is one of the tool search's tools.
func searchTool(name string) bool { return name == findToolsName || name == callToolName }

// toolSearchAbove is the default: with tool_search set nowhere, a session's
// servers are searched when the definitions of the downstream tools it
// would list add up to more than this many bytes of JSON. Measured
// (docs/gateway.md, "Tool search"): our own eighteen tools take 17 KB of a
// tools/list; the filesystem server's definitions 13.0 KB, the memory
// server's 10.8 KB, the everything server's 7.7 KB. Any one of them stays
// listed (nothing to find, no round trip); two of the larger ones, which
// would add more than our whole list again to every request, are searched.
const toolSearchAbove = 16 << 10

// gatewayName says whether name is one of the gateway's tools in a
// session's definitions: a downstream tool, find_tools or call_tool.
func gatewayName(name string) bool {
	return strings.Contains(name, gateway.Sep) || searchTool(name)
}

// toolSearch is one session's tool search, guarded by Session.mu.
type toolSearch struct {
	// searchable are the definitions of the downstream tools under
	// search, found or not: what find_tools ranks.
	searchable []mcp.Tool
	// withheld are those not found yet: a call of one is told to search.
	withheld map[string]bool
	// servers are the servers with a tool under search, in configured
	// order (find_tools's description names them).
	servers []string
}

// searchLocked decides which of the session's servers are searched (into
// s.scope.Search), records what is under search, and returns the withheld
// definitions: they are registered like every downstream tool, so that a
// call of one reaches the call pipeline and is told to search. all are
// the definitions of names, the tools the servers list now. s.mu is held.
func (s *Session) searchLocked(all map[string]mcp.Tool, names []string) (withheld []mcp.Tool) {
	// The size of what would be listed without search.
	plain := s.scope
	plain.Search, plain.Found = nil, nil
	listed, _ := plain.downstream(names)
	size := 0
	for _, n := range listed {
		if j, err := json.Marshal(all[n]); err == nil {
			size += len(j)
		}
	}
	s.scope.Search = searchServers(s.h.o.Config, size, s.scope.Search)
	_, searched := s.scope.downstream(names)
	ts := &s.gw.search
	ts.searchable, ts.withheld, ts.servers = nil, map[string]bool{}, nil
	for _, n := range searched {
		def := all[n]
		ts.searchable = append(ts.searchable, def)
		if srv, _, _ := strings.Cut(n, gateway.Sep); !slices.Contains(ts.servers, srv) {
			ts.servers = append(ts.servers, srv)
		}
		if !s.scope.Found[n] {
			ts.withheld[n] = true
			withheld = append(withheld, def)
		}
	}
	// The servers in configured order.
	var order []string
	for _, e := range s.h.o.Config.MCPServers {
		if slices.Contains(ts.servers, e.Name) {
			order = append(order, e.Name)
		}
	}
	ts.servers = order
	return withheld
}

// searchServers decides which servers are searched: a server's own
// tool_search, else the global one, else whether the downstream tools a
// session would list take more than toolSearchAbove bytes (size). A
// server the size put under search stays there (was): its tools do not
// come and go with a server's restart.
func searchServers(c *config.Config, size int, was map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, e := range c.MCPServers {
		switch {
		case e.ToolSearch != nil:
			out[e.Name] = *e.ToolSearch
		case c.ToolSearch != nil:
			out[e.Name] = *c.ToolSearch
		default:
			out[e.Name] = size > toolSearchAbove || was[e.Name]
		}
	}
	return out
}

// findToolsArgs are find_tools's arguments.
type findToolsArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

// foundTool is one tool a search returned: what the model needs to call
// it.
type foundTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// findToolsResult is find_tools's structured result: all of it (some
// clients give the model only the structured content).
type findToolsResult struct {
	Tools []foundTool `json:"tools"`
	// Added are the tools this search added to the session's list.
	Added []string `json:"added"`
	// Searched is how many tools the search ranked.
	Searched int `json:"searched"`
}

const findToolsInput = `{"type": "object", "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "A few words of what you need, e.g. \"read a file\", \"create entities\"."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many tools (default 5)."}},
  "required": ["query"], "additionalProperties": false}`

const findToolsOutput = `{"type": "object", "properties": {
    "tools": {"type": "array", "items": {"type": "object", "properties": {
      "name": {"type": "string"}, "title": {"type": "string"}, "description": {"type": "string"}, "inputSchema": {"type": "object"}},
      "required": ["name", "description", "inputSchema"]}},
    "added": {"type": "array", "items": {"type": "string"}},
    "searched": {"type": "integer"}},
  "required": ["tools", "added", "searched"]}`

// findToolsDefLocked is find_tools's definition in this session: its
// description names the servers searched and how many tools they have.
// s.mu is held.
func (s *Session) findToolsDefLocked() mcp.Tool {
	ts := s.gw.search
	t := mcp.NewTool(findToolsName,
		mcp.WithDescription(fmt.Sprintf("Find tools of the MCP servers %s (%d tools, not listed until found) by a few words of what you need. "+
			"The tools found are returned with their input schemas and added to your tool list; call them by the names returned, or with call_tool if they are not in your list.",
			strings.Join(ts.servers, ", "), len(ts.searchable))),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{
			Title:           "Find MCP server tools",
			ReadOnlyHint:    mcp.ToBoolPtr(true),
			DestructiveHint: mcp.ToBoolPtr(false),
			IdempotentHint:  mcp.ToBoolPtr(true),
			OpenWorldHint:   mcp.ToBoolPtr(false),
		}),
	)
	t.InputSchema, t.RawInputSchema = mcp.ToolInputSchema{}, []byte(findToolsInput)
	t.OutputSchema, t.RawOutputSchema = mcp.ToolOutputSchema{}, []byte(findToolsOutput)
	return t
}

// callToolInput is call_tool's input schema. It declares no output
// schema: its result is the called tool's, as that tool returns it.
const callToolInput = `{"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "description": "A tool find_tools returned."},
    "arguments": {"type": "object", "description": "Its arguments, as its input schema says."}},
  "required": ["name"], "additionalProperties": false}`

// callToolDef is call_tool's definition.
func callToolDef() mcp.Tool {
	t := mcp.NewTool(callToolName,
		mcp.WithDescription("Call a tool that find_tools returned, by its name and arguments, when it is not in your tool list yet. The result is that tool's."),
		mcp.WithToolAnnotation(mcp.ToolAnnotation{
			Title: "Call a found MCP server tool",
			// Whatever the tool called does: nothing is promised.
			ReadOnlyHint:    mcp.ToBoolPtr(false),
			DestructiveHint: mcp.ToBoolPtr(true),
			IdempotentHint:  mcp.ToBoolPtr(false),
			OpenWorldHint:   mcp.ToBoolPtr(true),
		}),
	)
	t.InputSchema, t.RawInputSchema = mcp.ToolInputSchema{}, []byte(callToolInput)
	return t
}

// addSearchToolLocked adds find_tools or call_tool to hs and defs and
// returns its definition. s.mu is held.
func (s *Session) addSearchToolLocked(name string, hs map[string]tools.Tool, defs map[string]mcp.Tool) mcp.Tool {
	def, handler := callToolDef(), s.callTool
	if name == findToolsName {
		def, handler = s.findToolsDefLocked(), s.findTools
	}
	hs[name] = tools.Tool{ServerTool: mcpserver.ServerTool{Tool: def, Handler: handler}, Facts: gatewayFacts(name)}
	defs[name] = def
	return def
}

// callTool serves call_tool: the call of a tool find_tools returned, made
// as a call of that tool (Hub.call: its arguments against its schema, its
// hooks, its audit record), with the progress token passed on.
func (s *Session) callTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if raw := rawArguments(req); len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return mcp.NewToolResultError("call_tool: " + err.Error()), nil
		}
	}
	if s.withheld(a.Name) {
		return mcp.NewToolResultError(s.unavailable(a.Name)), nil
	}
	if !s.searchable(a.Name) {
		return mcp.NewToolResultError(fmt.Sprintf("call_tool calls the tools %s returns; %s is not one of them", findToolsName, a.Name)), nil
	}
	inner := mcp.CallToolRequest{}
	inner.Method = string(mcp.MethodToolsCall)
	inner.Params.Name = a.Name
	if len(a.Arguments) > 0 && string(a.Arguments) != "null" {
		inner.Params.Arguments = a.Arguments
	}
	inner.Params.Meta = req.Params.Meta
	return s.h.call(gatewayFacts(a.Name))(ctx, inner)
}

// searchable says whether name is under tool search (found or not).
func (s *Session) searchable(name string) bool {
	if s.gw == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.gw.search.searchable, func(t mcp.Tool) bool { return t.Name == name })
}

// findTools serves find_tools: ranks the tools under search, publishes
// those it returns that were not yet (one tools/list_changed, sent before
// the result on the call's own stream, so that a client may list them
// before the model calls one).
func (s *Session) findTools(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a findToolsArgs
	if raw := rawArguments(req); len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return mcp.NewToolResultError("find_tools: " + err.Error()), nil
		}
	}
	s.mu.Lock()
	corpus := s.gw.search.searchable
	s.mu.Unlock()
	hits := gateway.Rank(a.Query, corpus, a.Limit)
	res := findToolsResult{Tools: []foundTool{}, Added: []string{}, Searched: len(corpus)}
	s.mu.Lock()
	for _, t := range hits {
		if s.scope.Found == nil {
			s.scope.Found = map[string]bool{}
		}
		if !s.scope.Found[t.Name] {
			s.scope.Found[t.Name] = true
			res.Added = append(res.Added, t.Name)
		}
	}
	s.mu.Unlock()
	if len(res.Added) > 0 && s.rebuildGateway() {
		// About this call: ahead of its result, on its own stream over
		// HTTP (a client need not hold a GET stream open); on the
		// sessionless revision, on the streams that asked (listen.go).
		if s.listens.n.Load() > 0 {
			s.toolsChanged()
		} else {
			s.notifyCall(ctx, string(mcp.MethodNotificationToolsListChanged), map[string]any{})
		}
	}
	var b strings.Builder
	if len(hits) == 0 {
		fmt.Fprintf(&b, "No tool matches %q among the %d searched; try other words (what the tool does, what it works on).", a.Query, len(corpus))
	} else {
		fmt.Fprintf(&b, "%d of %d tools found", len(hits), len(corpus))
		if len(res.Added) > 0 {
			fmt.Fprintf(&b, "; added to your tool list: %s", strings.Join(res.Added, ", "))
		}
		b.WriteString(".\n")
	}
	for _, t := range hits {
		schema := t.RawInputSchema
		if len(schema) == 0 {
			if j, err := json.Marshal(t.InputSchema); err == nil {
				schema = j
			}
		}
		title := t.Title
		if title == "" {
			title = t.Annotations.Title
		}
		res.Tools = append(res.Tools, foundTool{Name: t.Name, Title: title, Description: t.Description, InputSchema: schema})
		fmt.Fprintf(&b, "\n%s: %s\ninput schema: %s\n", t.Name, t.Description, schema)
	}
	s.sb.Audit.Write(session.Record{Tool: findToolsName, Decision: "ran"})
	return mcp.NewToolResultStructured(res, b.String()), nil
}

// unavailable is the message for a call of a tool this session does not
// publish: for one under tool search not found yet, how to get it.
func (s *Session) unavailable(name string) string {
	if s.withheld(name) {
		return fmt.Sprintf("tool %s is not in this session's tool list yet: call %s with words of what you need (it returns the tools with their input schemas and adds them to your list), then call the tool by the name it returns (or with %s)", name, findToolsName, callToolName)
	}
	return fmt.Sprintf("tool %s is not available in this session", name)
}

// withheld says whether name is under tool search and not found yet.
func (s *Session) withheld(name string) bool {
	if s.gw == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.search.withheld[name]
}
