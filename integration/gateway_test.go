//go:build linux

package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// toolNames lists the session's tools.
func (m *mcpConn) toolNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := testCtx()
	defer cancel()
	res, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v\nstderr:\n%s", err, m.stderr.String())
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestGatewayFilesystem: the filesystem server allowed "/" behind
// evener-mcp reads the worktree, never a planted key or a masked path,
// writes only inside the write roots (nothing in read-only), as root and as
// a user, in every mode.
func TestGatewayFilesystem(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "GATEWAY-SECRET-KEY\n")
				writeFile(t, filepath.Join(e.home, ".aws", "credentials"), "GATEWAY-SECRET-AWS\n")
				graph := filepath.Join(e.work, "graph.jsonl")
				files := filesServer(t)
				files["tool_search"] = false // every tool listed (docs/gateway.md, "Tool search")
				cfg := e.mcpConfig(t, map[string]any{"files": files, "mem": map[string]any{
					"command": "node", "args": []string{serverScript(t, "server-memory")},
					"env":         map[string]string{"MEMORY_FILE_PATH": graph},
					"grants":      []string{filepath.Join(downstream(t), "node_modules")},
					"tool_search": false,
				}})
				m := e.mcp(t, "--sandbox", mode, "--mcp-config", cfg)
				names := m.toolNames(t)
				if !slices.Contains(names, "files__read_text_file") || !slices.Contains(names, "read_file") {
					t.Fatalf("tools %v: want files__read_text_file beside read_file\nstderr:\n%s", names, m.stderr.String())
				}
				if !strings.Contains(m.init.Instructions, "files (network host") {
					t.Errorf("preamble does not name the server and its network:\n%s", m.init.Instructions)
				}
				r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.work, "README")})
				if r.IsError || !strings.Contains(text(r), "worktree file") {
					t.Fatalf("reading the worktree: %s\nstderr:\n%s", text(r), m.stderr.String())
				}
				r = m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")})
				if strings.Contains(text(r), "GATEWAY-SECRET-KEY") {
					t.Fatalf("the downstream read ~/.ssh/id_rsa: %s", text(r))
				}
				r = m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.home, ".aws", "credentials")})
				if strings.Contains(text(r), "GATEWAY-SECRET-AWS") {
					t.Fatalf("the downstream read ~/.aws/credentials: %s", text(r))
				}
				r = m.call(t, "mem__create_entities", map[string]any{"entities": []map[string]any{{"name": "gateway-entity", "entityType": "test", "observations": []string{"seen"}}}})
				_, err := os.Stat(graph)
				switch {
				case mode == "read-only" && err == nil:
					t.Fatalf("the memory server wrote the worktree in read-only: %s", text(r))
				case mode != "read-only" && (err != nil || r.IsError):
					t.Fatalf("the memory server could not write the worktree in %s: %s", mode, text(r))
				case mode != "read-only" && !strings.Contains(text(m.call(t, "mem__read_graph", nil)), "gateway-entity"):
					t.Fatalf("the memory server lost its entity")
				}
				out := filepath.Join(e.sibling, "planted")
				r = m.call(t, "files__write_file", map[string]any{"path": out, "content": "x"})
				if _, err := os.Stat(out); err == nil {
					t.Fatalf("the downstream wrote outside the write roots: %s", text(r))
				}
				in := filepath.Join(e.work, "written")
				r = m.call(t, "files__write_file", map[string]any{"path": in, "content": "inside"})
				_, err = os.Stat(in)
				switch {
				case mode == "read-only" && err == nil:
					t.Fatalf("the downstream wrote the worktree in read-only: %s", text(r))
				case mode != "read-only" && err != nil:
					t.Fatalf("the downstream could not write the worktree in %s: %s", mode, text(r))
				}
			})
		}
	})
}

// TestGatewayRestrictedGrants: under restricted the server's program is
// found only through its grants.
func TestGatewayRestrictedGrants(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		entry := filesServer(t)
		entry["grants"] = []string{"/usr"} // a shared tree: refused
		cfg := e.mcpConfig(t, map[string]any{"files": entry})
		m := e.mcp(t, "--sandbox", "restricted", "--mcp-config", cfg)
		// The server writes it before its initialize answer; the test's
		// copy of its stderr runs on a goroutine of its own.
		if !waitFor(5*time.Second, func() bool { return strings.Contains(m.stderr.String(), "mcp_servers.files: grant /usr refused") }) {
			t.Errorf("no warning about the refused grant:\n%s", m.stderr.String())
		}
		if names := m.toolNames(t); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "files__") }) {
			t.Fatalf("without its grant the server ran under restricted: %v", names)
		}
		if !waitFor(5*time.Second, func() bool { return strings.Contains(m.stderr.String(), "MCP server unavailable") }) {
			t.Errorf("no warning naming the server that could not start:\n%s", m.stderr.String())
		}
		if n := strings.Count(m.stderr.String(), "warning: MCP server unavailable"); n != 1 {
			t.Errorf("%d warnings for one outage, want 1:\n%s", n, m.stderr.String())
		}
		r := m.call(t, "read_file", map[string]any{"path": "README"})
		if r.IsError {
			t.Errorf("the session's own tools fail: %s", text(r))
		}
	})
}

// TestGatewayNetwork: host keeps the host's network (the one spawn that
// does), off and proxy have a namespace of their own.
func TestGatewayNetwork(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	for _, net := range []string{"host", "off", "proxy"} {
		t.Run(net, func(t *testing.T) {
			entry := filesServer(t)
			entry["network"] = net
			cfg := e.mcpConfig(t, map[string]any{"files": entry})
			m := e.mcp(t, "--sandbox", "workspace-write", "--mcp-config", cfg)
			m.toolNames(t)
			r := m.call(t, "files__read_text_file", map[string]any{"path": "/proc/self/net/dev"})
			if r.IsError {
				t.Fatalf("read /proc/self/net/dev: %s", text(r))
			}
			var ifs []string
			for _, l := range strings.Split(text(r), "\n")[2:] {
				if name, _, ok := strings.Cut(l, ":"); ok {
					ifs = append(ifs, strings.TrimSpace(name))
				}
			}
			if host := slices.ContainsFunc(ifs, func(n string) bool { return n != "lo" }); host != (net == "host") {
				t.Fatalf("network %s: interfaces %v", net, ifs)
			}
			if net == "host" && !strings.Contains(m.init.Instructions, "files (network host: the host's network") {
				t.Errorf("the preamble does not say the server has the host's network:\n%s", m.init.Instructions)
			}
			if !strings.HasPrefix(m.stderr.String(), "sandbox: ") {
				t.Errorf("the startup line is not first on stderr:\n%s", m.stderr.String())
			}
			if want := "; MCP servers: files (network " + net; !strings.Contains(m.stderr.String(), want) {
				t.Errorf("the startup line does not say %q:\n%s", want, m.stderr.String())
			}
		})
	}
}

// TestGatewayProjectDeclaresNothing: a planted .mcp.json and a project file
// declaring a server change nothing.
func TestGatewayProjectDeclaresNothing(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	marker := filepath.Join(e.work, "PLANTED-RAN")
	planted := `{"mcpServers": {"planted": {"command": "/bin/sh", "args": ["-c", "touch ` + marker + `"]}}}`
	writeFile(t, filepath.Join(e.work, ".mcp.json"), planted)
	writeFile(t, filepath.Join(e.work, ".evener", "mcp.toml"), "[mcp_servers.planted]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch "+marker+"\"]\ngrants = [\"/\"]\n")
	cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
	m := e.mcp(t, "--mcp-config", cfg)
	for _, n := range m.toolNames(t) {
		if strings.HasPrefix(n, "planted__") {
			t.Errorf("a project file published %s", n)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a project file's server ran")
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(m.stderr.String(), "ignoring mcp_servers") }) {
		t.Errorf("no warning about the project's mcp_servers:\n%s", m.stderr.String())
	}
}

// TestGatewayCrashAndMute: a server that exits mid-call gives an error
// result, a warning and a working restart; one that never answers
// initialize holds up none of the session's other tools.
func TestGatewayCrashAndMute(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.mcpConfig(t, map[string]any{
			"crashy": map[string]any{"command": "node", "args": []string{e.script(t, "crashy.cjs", crashyServer)}},
			"mute":   map[string]any{"command": "node", "args": []string{e.script(t, "mute.cjs", muteServer)}},
		})
		m := e.mcp(t, "--sandbox", "workspace-write", "--mcp-config", cfg)
		start := time.Now()
		if r := m.call(t, "read_file", map[string]any{"path": "README"}); r.IsError {
			t.Fatalf("read_file: %s", text(r))
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("read_file waited %s for a server that never answers", d)
		}
		names := m.toolNames(t)
		if !slices.Contains(names, "crashy__echo") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mute__") }) {
			t.Fatalf("tools %v", names)
		}
		if !waitFor(30*time.Second, func() bool {
			return strings.Contains(m.stderr.String(), "mcp_server=mute") && strings.Contains(m.stderr.String(), "did not answer initialize")
		}) {
			t.Errorf("no warning naming the mute server:\n%s", m.stderr.String())
		}
		// The preamble, read after the start, names it too.
		if p := m.preamble(t); !strings.Contains(p, "MCP server mute is unavailable") || !strings.Contains(p, "did not answer initialize") {
			t.Errorf("the preamble does not name the mute server:\n%s", p)
		}
		first := text(m.call(t, "crashy__echo", nil))
		r := m.call(t, "crashy__crash", nil)
		if !r.IsError || !strings.Contains(text(r), "crashy") {
			t.Fatalf("a crash mid-call: isError %v %q", r.IsError, text(r))
		}
		if !waitFor(10*time.Second, func() bool { return strings.Contains(m.stderr.String(), "MCP server exited") }) {
			t.Errorf("no warning about the exit:\n%s", m.stderr.String())
		}
		var again string
		if !waitFor(15*time.Second, func() bool {
			r := m.call(t, "crashy__echo", nil)
			again = text(r)
			return !r.IsError
		}) {
			t.Fatalf("not restarted: %s\n%s", again, m.stderr.String())
		}
		if again == first || !strings.HasPrefix(again, "instance ") {
			t.Errorf("after the restart %q, before %q", again, first)
		}
	})
}

// TestGatewaySessions: two HTTP sessions get two instances; ending one
// ends exactly its own within 5 s; after SIGTERM nothing is left; closing
// a stdio session leaves nothing either.
func TestGatewaySessions(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
		srv := e.serve(t, "--mcp-config", cfg)
		if !strings.Contains(srv.stderr.String(), "MCP servers behind evener-mcp: files (network host: the host's network") {
			t.Errorf("serve does not name its MCP servers and their network:\n%s", srv.stderr.String())
		}
		script := serverScript(t, "server-filesystem")
		mine := func() []int {
			var out []int
			for _, p := range nodeWith(script) {
				if slices.Contains(descendants(srv.cmd.Process.Pid), p) {
					out = append(out, p)
				}
			}
			return out
		}
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})
		for _, m := range []*mcpConn{a, b} {
			if !slices.Contains(m.toolNames(t), "files__list_directory") {
				t.Fatalf("no files__list_directory\n%s", srv.stderr.String())
			}
		}
		var both []int
		if !waitFor(5*time.Second, func() bool { both = mine(); return len(both) == 2 }) {
			t.Fatalf("two sessions, downstream processes %v; want two", both)
		}
		a.c.Close()
		var left []int
		if !waitFor(5*time.Second, func() bool { left = mine(); return len(left) == 1 }) {
			t.Fatalf("5 s after ending a session, downstream processes %v (before %v)", left, both)
		}
		r := b.call(t, "files__list_directory", map[string]any{"path": e.work})
		if r.IsError || !strings.Contains(text(r), "README") {
			t.Fatalf("b's server after a ended: %s", text(r))
		}
		if now := mine(); len(now) != 1 || now[0] != left[0] || !slices.Contains(both, now[0]) {
			t.Errorf("b's server changed: before %v, after a ended %v, now %v", both, left, now)
		}
		pid := srv.cmd.Process.Pid
		srv.stop(t)
		if rest := descendants(pid); len(rest) > 0 {
			t.Errorf("after SIGTERM: %v", rest)
		}
		// The downstream dies with its sandbox's PID namespace, which the
		// kernel tears down after the server has exited: allowed a moment,
		// not more.
		lives := func() bool {
			return slices.ContainsFunc(nodeWith(script), func(p int) bool { return slices.Contains(left, p) })
		}
		if !waitFor(3*time.Second, func() bool { return !lives() }) {
			t.Errorf("3 s after SIGTERM the downstream %v lives on", left)
		}
	})
}

// TestGatewayStdioClose: closing a stdio session's input ends its servers.
func TestGatewayStdioClose(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	crashy := e.script(t, "crashy-close.cjs", crashyServer)
	cfg := e.mcpConfig(t, map[string]any{"crashy": map[string]any{"command": "node", "args": []string{crashy}}})
	m := e.mcp(t, "--mcp-config", cfg)
	m.toolNames(t)
	if len(nodeWith(crashy)) != 1 {
		t.Fatalf("downstream processes %v", nodeWith(crashy))
	}
	m.c.Close()
	if !waitFor(5*time.Second, func() bool { return len(procsWith(crashy)) == 0 }) {
		t.Errorf("5 s after the stdio session closed: %v", procsWith(crashy))
	}
}

// TestGatewayPipeline: a downstream tool goes through the one call
// pipeline: PreToolUse hooks see the published name and may block it, the
// audit records it, progress passes through, and a server's
// tools/list_changed reaches the session.
func TestGatewayPipeline(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		pre := blockingHook(t, filepath.Join(e.root, "hooks"), "no-crash", `*'"tool_name":"crashy__crash"'*`, "crashing is not allowed")
		hooks := hookConfig(t, e, "hooks", hookDef{event: "PreToolUse", matcher: "crashy__.*", command: pre})
		// Unpinned: the tool grow adds is published at once (pins:
		// TestGatewayPins).
		cfg := e.mcpConfig(t, map[string]any{"crashy": map[string]any{"command": "node", "args": []string{e.script(t, "crashy.cjs", crashyServer)}, "approval": "off"}})
		m := e.mcp(t, "--config", hooks, "--mcp-config", cfg)
		var changed atomic.Int32
		m.c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == string(mcp.MethodNotificationToolsListChanged) {
				changed.Add(1)
			}
		})
		ctx, cancel := testCtx()
		defer cancel()
		list, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list.Tools, func(tl mcp.Tool) bool { return tl.Name == "crashy__echo" })
		if i < 0 || !strings.HasPrefix(list.Tools[i].Description, "[crashy] names the instance") {
			t.Fatalf("crashy__echo missing or undescribed in the first list: %v", m.toolNames(t))
		}
		r := m.call(t, "crashy__crash", nil)
		if !hookDenied(t, r, "crashing is not allowed") {
			t.Errorf("the PreToolUse hook did not block crashy__crash: %s", text(r))
		}
		if r := m.call(t, "crashy__echo", nil); r.IsError {
			t.Fatalf("crashy__echo after the block: %s", text(r))
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "crashy__slow"
		req.Params.Meta = &mcp.Meta{ProgressToken: "gw-1"}
		if _, err := m.c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		progress := slices.Clone(m.progress)
		m.mu.Unlock()
		if !slices.Contains(progress, "downstream halfway") {
			t.Errorf("the downstream's progress did not pass through: %v", progress)
		}
		before := changed.Load()
		m.call(t, "crashy__grow", nil)
		if !waitFor(10*time.Second, func() bool { return changed.Load() > before }) {
			t.Errorf("no notifications/tools/list_changed after the downstream's")
		}
		if !waitFor(10*time.Second, func() bool { return slices.Contains(m.toolNames(t), "crashy__grown") }) {
			t.Errorf("the downstream's new tool is not listed: %v", m.toolNames(t))
		}
		// Cancellation passes through: the client gives up on a call the
		// downstream never answers, and the downstream hears of it.
		hctx, hcancel := context.WithTimeout(context.Background(), 1*time.Second)
		hreq := mcp.CallToolRequest{}
		hreq.Params.Name = "crashy__hang"
		if _, err := m.c.CallTool(hctx, hreq); err == nil {
			t.Errorf("crashy__hang answered")
		}
		hcancel()
		if !waitFor(10*time.Second, func() bool { return strings.Contains(m.stderr.String(), "downstream saw cancelled") }) {
			t.Errorf("the downstream never heard the call was cancelled:\n%s", m.stderr.String())
		}
		if r := m.call(t, "crashy__echo", nil); r.IsError {
			t.Errorf("crashy__echo after a cancelled call: %s", text(r))
		}
		audit, _ := filepath.Glob(filepath.Join(e.home, ".local", "state", "evener-mcp", "*.jsonl"))
		var log string
		for _, a := range audit {
			b, _ := os.ReadFile(a)
			log += string(b)
		}
		if !strings.Contains(log, `"tool":"crashy__echo","mode":"workspace-write","decision":"ran"`) {
			t.Errorf("the audit log holds no record of crashy__echo:\n%s", log)
		}
	})
}

// TestGatewayDelegate: a session narrowed at initialize to a few tools,
// none of ours that change files, gets only the named downstream tools,
// and its servers run read-only (the delegate floor).
func TestGatewayDelegate(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
		caps := &mcp.ClientCapabilities{Experimental: map[string]any{"evener-mcp/session": map[string]any{
			"tools": []string{"read_file", "files__write_file", "files__read_text_file"}}}}
		m := e.mcpWith(t, []client.ClientOption{}, caps, "--sandbox", "workspace-write", "--mcp-config", cfg)
		var gw []string
		for _, n := range m.toolNames(t) {
			if strings.Contains(n, "__") {
				gw = append(gw, n)
			}
		}
		slices.Sort(gw)
		if !slices.Equal(gw, []string{"files__read_text_file", "files__write_file"}) {
			t.Fatalf("downstream tools %v\n%s", gw, m.stderr.String())
		}
		if r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.work, "README")}); r.IsError {
			t.Fatalf("read: %s", text(r))
		}
		p := filepath.Join(e.work, "delegate-wrote")
		r := m.call(t, "files__write_file", map[string]any{"path": p, "content": "x"})
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("a delegate's server wrote the worktree: %s", text(r))
		}
	})
}

// TestGatewayControl: with the sandbox off the same server reads the key
// and writes the sibling, so the refusals above are the sandbox's.
func TestGatewayControl(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "GATEWAY-SECRET-KEY\n")
	cfg := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
	m := e.mcp(t, "--sandbox", "off", "--mcp-config", cfg)
	m.toolNames(t)
	if r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")}); !strings.Contains(text(r), "GATEWAY-SECRET-KEY") {
		t.Fatalf("control: sandbox off, the key was not read: %s", text(r))
	}
	out := filepath.Join(e.sibling, "planted")
	m.call(t, "files__write_file", map[string]any{"path": out, "content": "x"})
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("control: sandbox off, the sibling was not written")
	}
}

// readmeMCPConfig is the README's --mcp-config example ("MCP servers behind
// evener-mcp"), as Claude Code writes such a file.
const readmeMCPConfig = `{
  "mcpServers": {
    "files": {
      "command": "mcp-server-filesystem",
      "args": ["/"]
    },
    "remote": {
      "type": "http",
      "url": "http://127.0.0.1:9/mcp"
    }
  }
}
`

// TestGatewayReadmeConfig: the README's example works as written, with the
// servers installed on PATH (as npm install -g puts them there).
func TestGatewayReadmeConfig(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "PATH="+filepath.Join(downstream(t), "node_modules", ".bin")+":/usr/local/bin:/usr/bin:/bin")
		cfg := filepath.Join(e.root, "claude", "mcp.json")
		writeFile(t, cfg, readmeMCPConfig)
		m := e.mcp(t, "--mcp-config", cfg)
		names := m.toolNames(t)
		for _, want := range []string{"files__read_text_file", "files__write_file"} {
			if !slices.Contains(names, want) {
				t.Fatalf("no %s in %v\n%s", want, names, m.stderr.String())
			}
		}
		if !waitFor(5*time.Second, func() bool { return strings.Contains(m.stderr.String(), "skipping remote: only stdio servers") }) {
			t.Errorf("no warning naming the http entry:\n%s", m.stderr.String())
		}
		r := m.call(t, "files__read_text_file", map[string]any{"path": filepath.Join(e.work, "README")})
		if r.IsError || !strings.Contains(text(r), "worktree file") {
			t.Fatalf("read: %s", text(r))
		}
	})
}
