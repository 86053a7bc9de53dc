//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The gateway's tests (docs/gateway.md, "MCP servers behind evener-mcp") run real MCP
// servers nobody here wrote, installed by npm into integration/downstream.

var downstreamPackages npmDir

// downstream installs the downstream servers (once per run) and returns
// their directory.
func downstream(t testing.TB) string {
	t.Helper()
	return downstreamPackages.install(t, "downstream", "@modelcontextprotocol/server-memory")
}

// serverScript is the entry point of an installed downstream package.
func serverScript(t testing.TB, pkg string) string {
	dir := downstream(t)
	var p struct {
		Bin map[string]string `json:"bin"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Bin {
		return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, b)
	}
	t.Fatalf("%s has no bin", pkg)
	return ""
}

// mcpConfig writes a Claude Code-style {"mcpServers": ...} file into the
// fixture (outside the worktree) and returns its path.
func (e *env) mcpConfig(t testing.TB, servers map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(e.root, fmt.Sprintf("mcp-%d.json", time.Now().UnixNano()))
	writeFile(t, p, string(data))
	return p
}

// filesServer is the filesystem server's entry, allowed "/", with the
// grant restricted needs to find its program.
func filesServer(t testing.TB) map[string]any {
	return map[string]any{
		"command": "node",
		"args":    []string{serverScript(t, "server-filesystem"), "/"},
		"grants":  []string{filepath.Join(downstream(t), "node_modules")},
	}
}

func testCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

// crashyServer is a minimal stdio MCP server whose "crash" tool exits the
// process mid-call, and whose "echo" names the instance.
const crashyServer = `"use strict";
let grown = false;
const me = "instance " + Math.random().toString(36).slice(2);
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (l) => {
  const m = JSON.parse(l);
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "crashy", version: "1" } } });
  } else if (m.method === "tools/list") {
    const tools = [
      { name: "crash", description: "exits", inputSchema: { type: "object" } },
      { name: "echo", description: "names the instance", inputSchema: { type: "object" } },
      { name: "slow", description: "reports progress", inputSchema: { type: "object" } },
      { name: "grow", description: "adds a tool", inputSchema: { type: "object" } },
      { name: "hang", description: "never answers", inputSchema: { type: "object" } },
      { name: "strict", description: "wants a name", inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } } ];
    if (grown) tools.push({ name: "grown", description: "added", inputSchema: { type: "object" } });
    send({ jsonrpc: "2.0", id: m.id, result: { tools } });
  } else if (m.method === "tools/call") {
    if (m.params.name === "crash") { process.stderr.write("crashing now\n"); process.exit(3); }
    if (m.params.name === "slow") {
      const token = m.params._meta && m.params._meta.progressToken;
      if (token !== undefined) send({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: token, progress: 1, total: 2, message: "downstream halfway" } });
    }
    if (m.params.name === "hang") return;
    if (m.params.name === "grow") {
      grown = true;
      send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
    }
    if (m.params.name === "strict") {
      send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "hello " + m.params.arguments.name }, { type: "image", data: "aGk=", mimeType: "image/png" }], structuredContent: { greeted: m.params.arguments.name } } });
      return;
    }
    send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: me }] } });
  } else if (m.method === "notifications/cancelled") {
    process.stderr.write("downstream saw cancelled " + JSON.stringify(m.params.requestId) + "\n");
  } else if (m.id !== undefined) {
    send({ jsonrpc: "2.0", id: m.id, result: {} });
  }
});
`

// muteServer reads its input and never answers.
const muteServer = `"use strict";
process.stdin.on("data", () => {});
setInterval(() => {}, 1 << 30);
`

// script writes a node script into the fixture (outside the worktree).
func (e *env) script(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(e.root, "servers", name)
	writeFile(t, p, body)
	return p
}

// nodeWith lists the node processes whose command line holds marker (not
// the bubblewrap processes around them, whose command lines hold it too).
func nodeWith(marker string) []int {
	var out []int
	for _, p := range procsWith(marker) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if filepath.Base(argv0) == "node" {
			out = append(out, p)
		}
	}
	return out
}
