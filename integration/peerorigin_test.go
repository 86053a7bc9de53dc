//go:build linux

package integration

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// posterServer is a stdio MCP server whose "post" tool POSTs an MCP
// initialize to the URL it is given and answers with the HTTP status.
const posterServer = `"use strict";
const http = require("http");
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (l) => {
  const m = JSON.parse(l);
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "poster", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ jsonrpc: "2.0", id: m.id, result: { tools: [{ name: "post", description: "POSTs initialize", inputSchema: { type: "object", properties: { url: { type: "string" } }, required: ["url"] } }] } });
  } else if (m.method === "tools/call") {
    const body = ` + "`" + initializeBody + "`" + `;
    const req = http.request(m.params.arguments.url, { method: "POST", headers: { "Content-Type": "application/json", "Accept": "application/json, text/event-stream" } }, (res) => {
      res.resume();
      send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "status " + res.statusCode }] } });
    });
    req.on("error", (e) => send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "error " + e.message }] } }));
    req.end(body);
  } else if (m.id !== undefined) {
    send({ jsonrpc: "2.0", id: m.id, result: {} });
  }
});
`

// TestServeRefusesItsOwnProcesses (docs/http.md, "Never its own
// processes"): a command of a session (`shell`, through the session's
// proxy allowed to reach the listener, so the server itself dials) and a
// downstream MCP server (the host's network, the default) POST an
// initialize to the `serve` that started them and are refused (403,
// audit rule peer-process), while the real client, and the server's user
// from outside, still connect. Root and a user.
func TestServeRefusesItsOwnProcesses(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		cfg := e.mcpConfig(t, map[string]any{"poster": map[string]any{"command": "node", "args": []string{e.script(t, "poster.cjs", posterServer)}}})
		srv := e.serve(t, "--listen", "127.0.0.1:"+port, "--allow-domain", "127.0.0.1:"+port, "--mcp-config", cfg)
		if !strings.HasSuffix(srv.addr, ":"+port) {
			t.Fatalf("serve listens on %s, want port %s", srv.addr, port)
		}
		m := srv.mustConnect(t, clientOpts{})

		// A command of the session, through the session's proxy.
		out := m.shellOut(t, fmt.Sprintf(`curl -sS --max-time 20 -o /dev/null -w '%%{http_code}' -X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' --data '%s' %s`, initializeBody, srv.url))
		if strings.TrimSpace(out) != "403" {
			t.Errorf("shell's initialize on its own server: %q, want 403", out)
		}
		// A downstream, on the host's network (its tools come once it
		// has started).
		if !waitFor(30*time.Second, func() bool { return slices.Contains(m.toolNames(t), "poster__post") }) {
			t.Fatalf("the downstream's tool never came:\n%s", srv.stderr.String())
		}
		r := m.call(t, "poster__post", map[string]any{"url": srv.url})
		if strings.TrimSpace(text(r)) != "status 403" {
			t.Errorf("the downstream's initialize on its own server: %q, want status 403\nstderr:\n%s", text(r), srv.stderr.String())
		}
		refused := 0
		for _, rec := range auditRecords(t, e, "refused") {
			if rec["rule"] == "peer-process" {
				refused++
			}
		}
		if refused != 2 {
			t.Errorf("peer-process refusals in the audit log: %d, want 2: %v", refused, auditRecords(t, e, "refused"))
		}
		// The real clients still connect.
		if out := m.shellOut(t, "echo still-ok"); !strings.Contains(out, "still-ok") {
			t.Errorf("the client's session after the refusals: %q", out)
		}
		if code := curlStatus(t, id, "POST", srv.url, initializeBody); code != 200 {
			t.Errorf("the server's user from outside: %d, want 200", code)
		}
		if code := curlStatus(t, id, "POST", srv.url, initializeBody); code != 200 {
			t.Errorf("the server's user from outside, again: %d, want 200", code)
		}
	})
}
