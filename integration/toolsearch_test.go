//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Tool search (docs/gateway.md, "Tool search") with three real servers
// behind evener-mcp: the filesystem, memory and everything servers, whose
// definitions (31 KB) are above the default threshold together.

// threeServers is an --mcp-config of the three, each with tool_search as
// given (nil: unset, the default).
func (e *env) threeServers(t *testing.T, toolSearch *bool) string {
	grants := []string{downstream(t) + "/node_modules"}
	servers := map[string]any{
		"files":      filesServer(t),
		"memory":     map[string]any{"command": "node", "args": []string{serverScript(t, "server-memory")}, "grants": grants},
		"everything": map[string]any{"command": "node", "args": []string{serverScript(t, "server-everything")}, "grants": grants},
	}
	if toolSearch != nil {
		for _, s := range servers {
			s.(map[string]any)["tool_search"] = *toolSearch
		}
	}
	return e.mcpConfig(t, servers)
}

// listBytes is the size of a tools/list answer's JSON, and its names.
func listBytes(t *testing.T, m *mcpConn) (int, []string, []mcp.Tool) {
	t.Helper()
	ctx, cancel := testCtx()
	defer cancel()
	res, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v\nstderr:\n%s", err, m.stderr.String())
	}
	j, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return len(j), names, res.Tools
}

// TestGatewayToolSearch: with the three servers and tool_search unset,
// tools/list holds our tools and find_tools, no downstream tool; a call of
// a downstream tool by name is told to search; find_tools returns the
// tool meant, with its input schema, all in its structured content, and
// the client hears one tools/list_changed; the tool is then listed and
// callable; the same search again adds nothing and tells nothing. Over
// stdio and over HTTP, as root and as a user.
func TestGatewayToolSearch(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.threeServers(t, nil)
		t.Run("stdio", func(t *testing.T) {
			checkToolSearch(t, e.mcp(t, "--mcp-config", cfg))
		})
		// Over HTTP the list_changed is about find_tools's call: it comes
		// on the call's own stream, with or without a GET stream open.
		t.Run("http", func(t *testing.T) {
			srv := e.serve(t, "--mcp-config", cfg)
			checkToolSearch(t, srv.mustConnect(t, clientOpts{}))
		})
		t.Run("http with a GET stream", func(t *testing.T) {
			srv := e.serve(t, "--mcp-config", cfg)
			checkToolSearch(t, srv.mustConnect(t, clientOpts{listen: true}))
		})
		// A revision with sessions: over stdio a downstream call takes
		// the lane (server/stdio_lane.go), and so do find_tools and the
		// call of a tool not found yet. The list_changed comes before
		// find_tools's result.
		t.Run("stdio lane", func(t *testing.T) {
			r := e.rawStart(t, "--mcp-config", cfg)
			r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			r.expect(0)
			r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if l := fmt.Sprint(r.expect(1)); !strings.Contains(l, "find_tools") || strings.Contains(l, "everything__get-sum") {
				t.Fatalf("the list under tool search: %.300s", l)
			}
			r.drain(time.Second)
			r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"everything__get-sum","arguments":{"a":2,"b":3}}}`)
			if m := fmt.Sprint(r.expect(2)); !strings.Contains(m, "isError:true") || !strings.Contains(m, "find_tools") {
				t.Fatalf("a call of a tool not found yet: %s", m)
			}
			r.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"find_tools","arguments":{"query":"add two numbers"}}}`)
			lines := r.until("3")
			if n := countListChanged(lines); n != 1 {
				t.Errorf("%d %s before find_tools's result, want 1", n, listChanged)
			}
			if res := lines[len(lines)-1]; !strings.Contains(res, `"structuredContent"`) || !strings.Contains(res, "everything__get-sum") {
				t.Fatalf("find_tools's result: %.500s", res)
			}
			r.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"everything__get-sum","arguments":{"a":2,"b":3}}}`)
			if m := fmt.Sprint(r.expect(4)); strings.Contains(m, "isError:true") || !strings.Contains(m, "5") {
				t.Fatalf("the found tool's call: %s", m)
			}
		})
	})
}

func checkToolSearch(t *testing.T, m *mcpConn) {
	var changed atomic.Int64
	m.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed.Add(1)
		}
	})
	size, names, defs := listBytes(t, m)
	if !slices.Contains(names, "find_tools") || !slices.Contains(names, "call_tool") || !slices.Contains(names, "read_file") {
		t.Fatalf("tools %v: want find_tools beside our own\nstderr:\n%s", names, m.stderr.String())
	}
	if i := slices.IndexFunc(names, func(n string) bool { return strings.Contains(n, "__") }); i >= 0 {
		t.Fatalf("a downstream tool (%s) is listed under tool search: %v", names[i], names)
	}
	for _, d := range defs {
		if d.Name == "find_tools" {
			for _, srv := range []string{"files", "memory", "everything"} {
				if !strings.Contains(d.Description, srv) {
					t.Errorf("find_tools's description does not name %s: %q", srv, d.Description)
				}
			}
			if len(d.RawOutputSchema) == 0 && d.OutputSchema.Type == "" {
				t.Errorf("find_tools has no output schema")
			}
		}
	}
	if size > 24<<10 {
		t.Errorf("tools/list is %d bytes under tool search, want at most 24 KB", size)
	}
	// What the servers' start told has been told; from now on only what
	// the searches change.
	time.Sleep(time.Second)
	base := changed.Load()

	r := m.call(t, "everything__get-sum", map[string]any{"a": 2, "b": 3})
	if !r.IsError || !strings.Contains(text(r), "find_tools") {
		t.Fatalf("a call of a tool not found yet: %v %s, want an error that says to use find_tools", r.IsError, text(r))
	}
	// Wrong arguments too: the schema it has not seen is not the point.
	r = m.call(t, "everything__get-sum", map[string]any{"x": "y"})
	if !r.IsError || !strings.Contains(text(r), "find_tools") {
		t.Fatalf("a call with wrong arguments of a tool not found yet: %s, want an error that says to use find_tools", text(r))
	}

	r = m.call(t, "find_tools", map[string]any{"query": "sum of two numbers", "limit": 3})
	if r.IsError {
		t.Fatalf("find_tools: %s\nstderr:\n%s", text(r), m.stderr.String())
	}
	sc := structured(t, r)
	found, _ := sc["tools"].([]any)
	if len(found) == 0 || len(found) > 3 {
		t.Fatalf("find_tools found %d tools (limit 3): %v", len(found), sc)
	}
	first, _ := found[0].(map[string]any)
	if first["name"] != "everything__get-sum" {
		t.Fatalf("find_tools's best hit %v, want everything__get-sum: %v", first["name"], sc)
	}
	schema, _ := first["inputSchema"].(map[string]any)
	if props, _ := schema["properties"].(map[string]any); props["a"] == nil || props["b"] == nil {
		t.Errorf("the hit's input schema is not the server's: %v", first["inputSchema"])
	}
	if d, _ := first["description"].(string); !strings.Contains(d, "sum") {
		t.Errorf("the hit's description %q", d)
	}
	if added, _ := sc["added"].([]any); !slices.Contains(added, any("everything__get-sum")) {
		t.Errorf("added %v, want everything__get-sum", sc["added"])
	}
	if !waitFor(3*time.Second, func() bool { return changed.Load() > base }) {
		t.Fatalf("no tools/list_changed after find_tools published a tool")
	}
	time.Sleep(time.Second)
	if n := changed.Load() - base; n != 1 {
		t.Errorf("%d tools/list_changed for one search, want 1", n)
	}
	_, names, _ = listBytes(t, m)
	if !slices.Contains(names, "everything__get-sum") {
		t.Fatalf("the found tool is not listed: %v", names)
	}
	if slices.Contains(names, "files__read_text_file") {
		t.Errorf("a tool not found is listed: %v", names)
	}
	r = m.call(t, "everything__get-sum", map[string]any{"a": 2, "b": 3})
	if r.IsError || !strings.Contains(text(r), "5") {
		t.Fatalf("the found tool's call: %s\nstderr:\n%s", text(r), m.stderr.String())
	}
	// call_tool: the found tool by name, for a client that does not list
	// again; never one not found, never one of ours.
	r = m.call(t, "call_tool", map[string]any{"name": "everything__get-sum", "arguments": map[string]any{"a": 4, "b": 5}})
	if r.IsError || !strings.Contains(text(r), "9") {
		t.Fatalf("call_tool of the found tool: %s\nstderr:\n%s", text(r), m.stderr.String())
	}
	r = m.call(t, "call_tool", map[string]any{"name": "everything__get-sum", "arguments": map[string]any{"a": "x"}})
	if !r.IsError {
		t.Errorf("call_tool with arguments against the tool's schema: %s", text(r))
	}
	r = m.call(t, "call_tool", map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "hi"}})
	if !r.IsError || !strings.Contains(text(r), "find_tools") {
		t.Errorf("call_tool of a tool not found: %s, want an error that says to use find_tools", text(r))
	}
	r = m.call(t, "call_tool", map[string]any{"name": "shell", "arguments": map[string]any{"command": "echo reached"}})
	if !r.IsError || strings.Contains(text(r), "reached") {
		t.Errorf("call_tool reached one of our own tools: %s", text(r))
	}

	// The same search again: nothing new, nothing told.
	base = changed.Load()
	r = m.call(t, "find_tools", map[string]any{"query": "sum of two numbers", "limit": 3})
	if added, _ := structured(t, r)["added"].([]any); r.IsError || len(added) != 0 {
		t.Errorf("the same search again added %v (%s)", added, text(r))
	}
	// Another: the knowledge graph's tool, found and callable.
	r = m.call(t, "find_tools", map[string]any{"query": "read the knowledge graph"})
	sc = structured(t, r)
	found, _ = sc["tools"].([]any)
	if len(found) == 0 || found[0].(map[string]any)["name"] != "memory__read_graph" {
		t.Fatalf("find_tools for the graph: %v", sc)
	}
	if !waitFor(3*time.Second, func() bool { return changed.Load() > base }) {
		t.Fatalf("no tools/list_changed after the second search published tools")
	}
	time.Sleep(time.Second)
	if n := changed.Load() - base; n != 1 {
		t.Errorf("%d tools/list_changed for two searches of which one published, want 1", n)
	}
	if r = m.call(t, "memory__read_graph", nil); r.IsError {
		t.Errorf("memory__read_graph after it was found: %s", text(r))
	}
}

// TestGatewayToolSearchBytes: the size of tools/list with the three
// servers, every tool listed (tool_search = false) and under tool search
// (the default), before and after one search (docs/gateway.md, "Tool
// search", quotes these numbers).
func TestGatewayToolSearchBytes(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	own, ownNames, _ := listBytes(t, e.mcp(t))
	no := false
	all, allNames, _ := listBytes(t, e.mcp(t, "--mcp-config", e.threeServers(t, &no)))
	if countDown(allNames) < 30 || slices.Contains(allNames, "find_tools") {
		t.Fatalf("tool_search = false: %v", allNames)
	}
	m := e.mcp(t, "--mcp-config", e.threeServers(t, nil))
	searched, searchedNames, _ := listBytes(t, m)
	r := m.call(t, "find_tools", map[string]any{"query": "read a text file"})
	if r.IsError {
		t.Fatalf("find_tools: %s", text(r))
	}
	after, afterNames, _ := listBytes(t, m)
	res, _ := json.Marshal(r)
	t.Logf("tools/list bytes: our own %d tools %d; with the three servers every tool listed (%d tools) %d; under tool search (%d tools) %d; after one search (%d tools) %d; that search's result %d",
		len(ownNames), own, len(allNames), all, len(searchedNames), searched, len(afterNames), after, len(res))
	if all-searched < 16<<10 {
		t.Errorf("tool search saved %d bytes of %d, want at least 16 KB", all-searched, all)
	}
}

// countDown counts the downstream tools among names.
func countDown(names []string) int {
	n := 0
	for _, x := range names {
		if strings.Contains(x, "__") {
			n++
		}
	}
	return n
}

// TestGatewayToolSearchTSClient: the official TypeScript SDK client
// validates find_tools's structured result against its output schema, and
// calls the tool it found (no validation there: the client listed it
// before it was found).
func TestGatewayToolSearchTSClient(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		plan := e.stdioPlan(t, "--mcp-config", e.threeServers(t, nil))
		plan.Calls = []tsCall{
			{Name: "find_tools", Arguments: map[string]any{"query": "sum of two numbers"}},
			{Name: "find_tools", Arguments: map[string]any{"query": "no such thing zzz"}},
			{Name: "everything__get-sum", Arguments: map[string]any{"a": 2, "b": 3}},
		}
		run := runTS(t, plan)
		if !slices.Contains(run.listed, "find_tools") {
			t.Fatalf("listed %v\n%s", run.listed, run.stderr)
		}
		if len(run.results) != len(plan.Calls) {
			t.Fatalf("results %+v\n%s", run.results, run.stderr)
		}
		for i, r := range run.results {
			if !r.OK || r.IsError {
				t.Errorf("call %d %s: ok %v isError %v %s %s", i, r.Name, r.OK, r.IsError, r.Error, r.Text)
			}
		}
		if !strings.Contains(run.results[0].Text, "everything__get-sum") || !strings.Contains(run.results[2].Text, "5") {
			t.Errorf("results %+v", run.results)
		}
	})
}

// TestClaudeCodeToolSearch: Claude Code (claude -p, a scripted model)
// calls find_tools, whose structured result (all Claude Code gives the
// model) names the tool and its schema, then calls that tool through
// call_tool: over stdio Claude Code speaks the sessionless revision and
// opens no subscriptions/listen stream, so it hears no list change and
// never offers the model the tool found (over HTTP it does). Over stdio
// and HTTP, as root and as a user.
func TestClaudeCodeToolSearch(t *testing.T) {
	bin := claudeBin(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, tr := range []string{"stdio", "http"} {
			t.Run(tr, func(t *testing.T) {
				e := newEnv(t, id)
				flags := []string{"--sandbox", "workspace-write", "--mcp-config", e.threeServers(t, nil)}
				var entry map[string]any
				if tr == "stdio" {
					env := map[string]string{}
					for _, kv := range e.serverEnv(t) {
						k, v, _ := strings.Cut(kv, "=")
						env[k] = v
					}
					entry = map[string]any{"type": "stdio", "command": binPath, "args": flags, "env": env}
				} else {
					entry = map[string]any{"type": "http", "url": e.serve(t, flags...).url}
				}
				steps := []ccStep{
					{tool: "find_tools", input: map[string]any{"query": "sum of two numbers"}, want: []string{"everything__get-sum", `"a"`}},
					// Over stdio Claude Code hears no list change: the tool
					// found is called through call_tool (both transports).
					{tool: "call_tool", input: map[string]any{"name": "everything__get-sum", "arguments": map[string]any{"a": 2, "b": 3}}, want: []string{"5"}},
				}
				fm := &fakeModel{steps: steps, results: map[int]ccResult{}, offered: map[string]bool{}}
				out := runClaude(t, e, bin, fm, entry)
				fm.mu.Lock()
				defer fm.mu.Unlock()
				if fm.offered["mcp__evener__files__read_text_file"] {
					t.Errorf("Claude Code offered a downstream tool never found")
				}
				t.Logf("Claude Code (%s) offered the tool found after the search: %v", tr, fm.offered["mcp__evener__everything__get-sum"])
				for i, s := range steps {
					if !fm.offered["mcp__evener__"+s.tool] {
						t.Errorf("step %d: Claude Code did not offer the model mcp__evener__%s (offered %v)", i, s.tool, fm.offered)
					}
					r, ok := fm.results[i]
					if !ok {
						t.Errorf("step %d %s: no tool_result reached the model\nclaude output:\n%s", i, s.tool, out)
						continue
					}
					t.Logf("step %d %s: %.300s", i, s.tool, r.raw)
					if r.isError {
						t.Errorf("step %d %s: an error: %s", i, s.tool, r.raw)
					}
					for _, w := range s.want {
						if !r.sees(w) && !bytes.Contains(r.raw, []byte(w)) {
							t.Errorf("step %d %s: %q did not reach the model: %s", i, s.tool, w, r.raw)
						}
					}
				}
			})
		}
	})
}

// TestGatewayToolSearchHooks: a call through call_tool is a call of the
// tool called: a PreToolUse hook on that tool's name blocks it there too.
func TestGatewayToolSearchHooks(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		hook := blockingHook(t, filepath.Join(e.root, "hooks"), "no-blockme", `*blockme*`, "echo may not say blockme")
		cfg := hookConfig(t, e, "search", hookDef{event: "PreToolUse", matcher: "^everything__echo$", command: hook})
		m := e.mcp(t, "--config", cfg, "--mcp-config", e.threeServers(t, nil))
		m.toolNames(t) // as a client does first: its servers are up then
		if r := m.call(t, "find_tools", map[string]any{"query": "echo", "limit": 1}); r.IsError || !strings.Contains(text(r), "everything__echo") {
			t.Fatalf("find_tools echo: %s\nstderr:\n%s", text(r), m.stderr.String())
		}
		r := m.call(t, "call_tool", map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "fine"}})
		if r.IsError || !strings.Contains(text(r), "fine") {
			t.Fatalf("call_tool echo: %s\nstderr:\n%s", text(r), m.stderr.String())
		}
		r = m.call(t, "call_tool", map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "blockme"}})
		if !hookDenied(t, r, "may not say blockme") {
			t.Errorf("call_tool past the tool's PreToolUse hook: %v %s", r.IsError, text(r))
		}
		r = m.call(t, "everything__echo", map[string]any{"message": "blockme"})
		if !hookDenied(t, r, "may not say blockme") {
			t.Errorf("the direct call past its PreToolUse hook: %v %s", r.IsError, text(r))
		}
	})
}
