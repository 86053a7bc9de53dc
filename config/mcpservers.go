package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// MCPServer is one of the user's stdio MCP servers run behind evener-mcp
// (docs/gateway.md, "MCP servers behind evener-mcp"): declared in a trusted layer
// only (the global file, a --config file, an --mcp-config file), never by
// the project.
type MCPServer struct {
	// Name is [a-z0-9-]{1,32}; its tools are published as Name__TOOL.
	Name    string
	Command string
	Args    []string
	// Env is given on top of the environment floor.
	Env map[string]string
	// Grants are extra read/exec roots for its program (absolute).
	Grants []string
	// Network is host, proxy or off.
	Network string
	// Tools, when set, publishes only its tools matching one of these
	// patterns (* is any run of characters); DenyTools publishes none
	// matching one of its own, and wins.
	Tools, DenyTools []string
	// Approval is when a tool must be approved before it is published
	// (docs/gateway.md, "Pins"): first-use (the default), always or off.
	Approval string
	// ToolSearch: true, its tools are found with find_tools rather than
	// listed; false, always listed; nil, as Config.ToolSearch says
	// (docs/gateway.md, "Tool search").
	ToolSearch *bool
	// Source is the file that declared it.
	Source string
}

// The network choices of an MCP server.
const (
	MCPNetworkHost  = "host"
	MCPNetworkProxy = "proxy"
	MCPNetworkOff   = "off"
)

// The approval policies of an MCP server's tools (docs/gateway.md, "Pins").
const (
	// ApprovalFirstUse pins what a server lists the first time it is seen
	// in a project (no pins yet) as approved; a tool new or changed since
	// waits for the user.
	ApprovalFirstUse = "first-use"
	// ApprovalAlways has every tool wait for the user, the first ones too.
	ApprovalAlways = "always"
	// ApprovalOff publishes what the server lists, unpinned.
	ApprovalOff = "off"
)

// toolPattern is the form of a tools or deny_tools entry: a tool name
// ([A-Za-z0-9_.-]) in which * stands for any run of characters.
var toolPattern = regexp.MustCompile(`^[A-Za-z0-9_.*-]{1,128}$`)

// MCPServerName is the form of a server's name.
var MCPServerName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// fileMCPServer is one [mcp_servers.NAME] table.
type fileMCPServer struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
	Grants  []string          `toml:"grants"`
	Network string            `toml:"network"`
	Tools   []string          `toml:"tools"`
	Deny    []string          `toml:"deny_tools"`
	// Approval: first-use, always or off.
	Approval string `toml:"approval"`
	// ToolSearch is tool_search (MCPServer.ToolSearch).
	ToolSearch *bool `toml:"tool_search"`
}

// mcpServers adds the [mcp_servers.NAME] tables of a trusted file, in name
// order; a later layer's entry replaces an earlier one of the same name.
func (m *merger) mcpServers(servers map[string]fileMCPServer, path, base string) error {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := m.addMCPServer(n, servers[n], path, base, "mcp_servers."+n); err != nil {
			return err
		}
	}
	return nil
}

func (m *merger) addMCPServer(name string, f fileMCPServer, path, base, where string) error {
	if !MCPServerName.MatchString(name) {
		return fmt.Errorf("%s: the name must match [a-z0-9-]{1,32} (its tools are published as NAME__TOOL)", where)
	}
	if f.Command == "" {
		return fmt.Errorf("%s: command is missing", where)
	}
	s := MCPServer{Name: name, Command: f.Command, Args: f.Args, Env: f.Env, Network: f.Network, Tools: f.Tools, DenyTools: f.Deny,
		Approval: f.Approval, ToolSearch: f.ToolSearch, Source: path}
	switch s.Approval {
	case "":
		s.Approval = ApprovalFirstUse
	case ApprovalFirstUse, ApprovalAlways, ApprovalOff:
	default:
		return fmt.Errorf("%s: approval: unknown value %q (want first-use, always or off)", where, s.Approval)
	}
	switch s.Network {
	case "":
		s.Network = MCPNetworkHost
	case MCPNetworkHost, MCPNetworkProxy, MCPNetworkOff:
	default:
		return fmt.Errorf("%s: network: unknown value %q (want host, proxy or off)", where, s.Network)
	}
	for k := range s.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("%s: env: %q is not a variable name", where, k)
		}
	}
	for key, l := range map[string][]string{"tools": s.Tools, "deny_tools": s.DenyTools} {
		for _, t := range l {
			if !toolPattern.MatchString(t) || strings.Contains(t, "__") {
				return fmt.Errorf("%s: %s: %q is not a tool name of that server nor a pattern of one (* for any run of characters)", where, key, t)
			}
		}
	}
	for _, g := range f.Grants {
		p, err := m.path(g, base)
		if err != nil {
			return fmt.Errorf("%s: grants: %w", where, err)
		}
		s.Grants = appendNew(s.Grants, p)
		// Judged by confine like a hook's directory (docs/hooks.md, "Hooks"):
		// read/exec, never write, never a shared tree or a masked path.
		m.c.Spec.GrantDirs = appendNew(m.c.Spec.GrantDirs, p)
	}
	m.c.MCPServers = slices.DeleteFunc(m.c.MCPServers, func(o MCPServer) bool { return o.Name == name })
	m.c.MCPServers = append(m.c.MCPServers, s)
	return nil
}

// mcpConfigFile reads an --mcp-config file: {"mcpServers": {...}} as Claude
// Code and other clients write it. Entries of another transport (http,
// sse) are skipped with a warning naming them.
func (m *merger) mcpConfigFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--mcp-config %s: no such file", path)
		}
		return fmt.Errorf("--mcp-config %s: %w", path, err)
	}
	var doc struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			Grants  []string          `json:"grants"`
			Network string            `json:"network"`
			Tools   []string          `json:"tools"`
			Deny    []string          `json:"deny_tools"`
			// Approval: first-use, always or off.
			Approval string `json:"approval"`
			// ToolSearch is the same optional key as the TOML table's.
			ToolSearch *bool `json:"tool_search"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("--mcp-config %s: %w", path, err)
	}
	if doc.MCPServers == nil {
		return fmt.Errorf("--mcp-config %s: no \"mcpServers\" object", path)
	}
	names := make([]string, 0, len(doc.MCPServers))
	for n := range doc.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var skipped []string
	for _, n := range names {
		e := doc.MCPServers[n]
		if (e.Type != "" && e.Type != "stdio") || (e.Type == "" && e.Command == "" && e.URL != "") {
			skipped = append(skipped, n)
			continue
		}
		f := fileMCPServer{Command: e.Command, Args: e.Args, Env: e.Env, Grants: e.Grants, Network: e.Network, Tools: e.Tools,
			Deny: e.Deny, Approval: e.Approval, ToolSearch: e.ToolSearch}
		if err := m.addMCPServer(n, f, path, filepath.Dir(path), "mcpServers."+n); err != nil {
			return fmt.Errorf("--mcp-config %s: %w", path, err)
		}
	}
	if len(skipped) > 0 {
		m.c.Warnings = append(m.c.Warnings, fmt.Sprintf("--mcp-config %s: skipping %s: only stdio servers run behind evener-mcp (an http or sse server is not a process it can confine)",
			path, strings.Join(skipped, ", ")))
	}
	m.c.Sources = append(m.c.Sources, path)
	return nil
}
