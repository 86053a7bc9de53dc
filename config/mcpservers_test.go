package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMCPServers: [mcp_servers.NAME] in a trusted file, --mcp-config JSON as
// Claude Code writes it (http and sse entries skipped with a warning), and a
// project file that declares servers changes nothing (docs/gateway.md, "MCP servers
// behind evener-mcp").
func TestMCPServers(t *testing.T) {
	e := newTestEnv(t)
	grant := filepath.Join(e.root, "opt", "files")
	e.write(t, e.globalPath(), `
[mcp_servers.files]
command = "npx"
args = ["-y", "server-filesystem", "/"]
env = { LOG_LEVEL = "warn" }
grants = ["`+grant+`"]
tools = ["read_text_file", "list_*"]
deny_tools = ["*secret*"]
approval = "always"
`)
	js := e.write(t, filepath.Join(e.root, "claude", "mcp.json"), `{"mcpServers": {
  "mem": {"command": "node", "args": ["mem.js"], "env": {"A": "1"}},
  "remote": {"type": "http", "url": "https://example.invalid/mcp"},
  "events": {"type": "sse", "url": "https://example.invalid/sse"},
  "off-net": {"type": "stdio", "command": "/bin/x", "network": "off", "deny_tools": ["write_*"], "approval": "off"}
}}`)
	e.write(t, e.projectPath(), "[mcp_servers.evil]\ncommand = \"/bin/sh\"\ngrants = [\"/\"]\n")
	e.write(t, filepath.Join(e.wd, ".mcp.json"), `{"mcpServers": {"planted": {"command": "/bin/sh"}}}`)
	c, err := Load(Flags{Workdir: e.wd, MCPConfigs: []string{js}}, e.env)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range c.MCPServers {
		names = append(names, s.Name)
	}
	equalSlice(t, "servers", names, []string{"files", "mem", "off-net"})
	f := c.MCPServers[0]
	equal(t, "command", f.Command, "npx")
	equal(t, "network default", f.Network, MCPNetworkHost)
	equal(t, "env", f.Env["LOG_LEVEL"], "warn")
	equalSlice(t, "tools", f.Tools, []string{"read_text_file", "list_*"})
	equalSlice(t, "deny_tools", f.DenyTools, []string{"*secret*"})
	equal(t, "approval", f.Approval, ApprovalAlways)
	equal(t, "approval default", c.MCPServers[1].Approval, ApprovalFirstUse)
	equalSlice(t, "json deny_tools", c.MCPServers[2].DenyTools, []string{"write_*"})
	equal(t, "json approval", c.MCPServers[2].Approval, ApprovalOff)
	equalSlice(t, "grants", f.Grants, []string{grant})
	equalSlice(t, "spec grants", c.Spec.GrantDirs, []string{grant})
	equal(t, "json network", c.MCPServers[2].Network, MCPNetworkOff)
	warned := strings.Join(c.Warnings, "\n")
	if !strings.Contains(warned, "skipping events, remote") {
		t.Errorf("no warning naming the skipped http/sse entries: %q", warned)
	}
	if !strings.Contains(warned, "ignoring mcp_servers") {
		t.Errorf("no warning about the project's mcp_servers: %q", warned)
	}
	for _, s := range c.MCPServers {
		if s.Name == "evil" || s.Name == "planted" {
			t.Errorf("a project file declared server %s", s.Name)
		}
	}
	if slices.Contains(c.Spec.GrantDirs, "/") {
		t.Error("the project file granted a directory")
	}
}

func TestMCPServersBad(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"name", "[mcp_servers.Bad_Name]\ncommand = \"x\"\n", "[a-z0-9-]{1,32}"},
		{"command", "[mcp_servers.a]\nargs = [\"x\"]\n", "command is missing"},
		{"network", "[mcp_servers.a]\ncommand = \"x\"\nnetwork = \"on\"\n", "want host, proxy or off"},
		{"grant", "[mcp_servers.a]\ncommand = \"x\"\ngrants = [\"rel\"]\n", "not an absolute path"},
		{"approval", "[mcp_servers.a]\ncommand = \"x\"\napproval = \"never\"\n", "want first-use, always or off"},
		{"deny", "[mcp_servers.a]\ncommand = \"x\"\ndeny_tools = [\"a b\"]\n", "deny_tools: \"a b\""},
		{"tools", "[mcp_servers.a]\ncommand = \"x\"\ntools = [\"x__*\"]\n", "tools: \"x__*\""},
		{"key", "[mcp_servers.a]\ncommand = \"x\"\ncwd = \"/\"\n", "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			e.write(t, e.globalPath(), tc.file)
			_, err := Load(Flags{Workdir: e.wd}, e.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestToolsNameServerTools: --tools may name a server's tool (SERVER__TOOL).
func TestToolsNameServerTools(t *testing.T) {
	e := newTestEnv(t)
	c, err := Load(Flags{Workdir: e.wd, Tools: "read_file,files__read_text_file"}, e.env)
	if err != nil {
		t.Fatal(err)
	}
	equalSlice(t, "tools", c.Tools, []string{"read_file", "files__read_text_file"})
	if _, err := Load(Flags{Workdir: e.wd, Tools: "Files__x"}, e.env); err == nil {
		t.Error("a tool of a server with an invalid name was accepted")
	}
}

// TestToolSearchKeys: tool_search globally and per server, in TOML and in
// --mcp-config JSON; unset stays nil (the size decides); the project file's
// is ignored with a warning (docs/gateway.md, "Tool search").
func TestToolSearchKeys(t *testing.T) {
	e := newTestEnv(t)
	e.write(t, e.globalPath(), `
tool_search = false
[mcp_servers.files]
command = "x"
tool_search = true
[mcp_servers.plain]
command = "x"
`)
	js := e.write(t, filepath.Join(e.root, "claude", "mcp.json"), `{"mcpServers": {"mem": {"command": "node", "tool_search": false}}}`)
	e.write(t, e.projectPath(), "tool_search = true\n")
	c, err := Load(Flags{Workdir: e.wd, MCPConfigs: []string{js}}, e.env)
	if err != nil {
		t.Fatal(err)
	}
	if c.ToolSearch == nil || *c.ToolSearch {
		t.Errorf("global tool_search %v, want false (the project file's true ignored)", c.ToolSearch)
	}
	got := map[string]*bool{}
	for _, s := range c.MCPServers {
		got[s.Name] = s.ToolSearch
	}
	if v := got["files"]; v == nil || !*v {
		t.Errorf("files: tool_search %v, want true", v)
	}
	if v := got["plain"]; v != nil {
		t.Errorf("plain: tool_search %v, want unset", *v)
	}
	if v := got["mem"]; v == nil || *v {
		t.Errorf("mem (JSON): tool_search %v, want false", v)
	}
	if !strings.Contains(strings.Join(c.Warnings, "\n"), "ignoring tool_search") {
		t.Errorf("no warning about the project's tool_search: %q", c.Warnings)
	}
	e2 := newTestEnv(t)
	c, err = Load(Flags{Workdir: e2.wd}, e2.env)
	if err != nil {
		t.Fatal(err)
	}
	if c.ToolSearch != nil {
		t.Errorf("tool_search defaults to %v, want unset", *c.ToolSearch)
	}
}
