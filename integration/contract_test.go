//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverCapabilityKeys are the members of the specification's
// ServerCapabilities (schema 2025-11-25): what a server may advertise.
// elicitation, sampling and roots are a client's.
var serverCapabilityKeys = []string{"completions", "experimental", "logging", "prompts", "resources", "tools", "tasks"}

// checkCapabilities checks an initialize result's capabilities against the
// schema: only server capability keys, tools and resources (subscribe) as
// the server offers them, listChanged exactly when MCP servers run behind.
func checkCapabilities(t *testing.T, result map[string]any, gateway bool) {
	t.Helper()
	caps, ok := result["capabilities"].(map[string]any)
	if !ok {
		t.Fatalf("initialize result has no capabilities: %v", result)
	}
	for k := range caps {
		if !slices.Contains(serverCapabilityKeys, k) {
			t.Errorf("capability %q is not a server capability (ServerCapabilities has %v): %v", k, serverCapabilityKeys, caps)
		}
	}
	tools, ok := caps["tools"].(map[string]any)
	if !ok {
		t.Fatalf("no tools capability: %v", caps)
	}
	if lc, _ := tools["listChanged"].(bool); lc != gateway {
		t.Errorf("tools.listChanged %v with MCP servers behind %v", lc, gateway)
	}
	if r, _ := caps["resources"].(map[string]any); r == nil || r["subscribe"] != true {
		t.Errorf("resources.subscribe not advertised: %v", caps)
	}
	if _, ok := caps["logging"]; !ok {
		t.Errorf("logging not advertised: %v", caps)
	}
}

// twoServers is an --mcp-config of two real downstream servers, every
// tool listed (tool_search false: together they are above its threshold).
func (e *env) twoServers(t *testing.T) string {
	files := filesServer(t)
	files["tool_search"] = false
	return e.mcpConfig(t, map[string]any{
		"files":  files,
		"memory": map[string]any{"command": "node", "args": []string{serverScript(t, "server-memory")}, "tool_search": false},
	})
}

const listChanged = "notifications/tools/list_changed"

// drain collects the lines the server writes for d.
func (r *rawConn) drain(d time.Duration) []string {
	var out []string
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				return out
			}
			out = append(out, l)
		case <-deadline:
			return out
		}
	}
}

func countListChanged(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, `"`+listChanged+`"`) {
			n++
		}
	}
	return n
}

// TestGatewayListChanged (stdio): with two downstream servers a client
// hears tools/list_changed at most once per change of what it would list
// (each server's start is one), and never before its initialized: the
// library sent one per downstream tool to every initialized session,
// before the client's initialized too. The initialize result's
// capabilities are the specification's server capabilities only.
func TestGatewayListChanged(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.twoServers(t)
		for _, wait := range []time.Duration{0, 4 * time.Second} {
			t.Run(fmt.Sprintf("initialized after %v", wait), func(t *testing.T) {
				r := e.rawStart(t, "--mcp-config", cfg)
				r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
				before := r.readUntil("the initialize answer", func(l string) bool { return strings.Contains(l, `"id":0`) })
				var init struct {
					Result map[string]any `json:"result"`
				}
				if err := json.Unmarshal([]byte(before[len(before)-1]), &init); err != nil {
					t.Fatal(err)
				}
				checkCapabilities(t, init.Result, true)
				// The servers come up while the client waits.
				before = append(before, r.drain(wait)...)
				if n := countListChanged(before); n != 0 {
					t.Errorf("%d %s before the client's initialized", n, listChanged)
				}
				r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
				after := r.readUntil("the tools/list answer", func(l string) bool { return strings.Contains(l, `"id":1`) })
				list := after[len(after)-1]
				if !strings.Contains(list, "files__read_text_file") || !strings.Contains(list, "memory__read_graph") {
					t.Fatalf("the first list lacks a downstream server's tools: %.400s", list)
				}
				after = append(after, r.drain(3*time.Second)...)
				if n := countListChanged(after); n > 2 {
					t.Errorf("%d %s after initialized; at most one per server's start (2)", n, listChanged)
				}
				t.Logf("%s: %d before initialized, %d after", listChanged, countListChanged(before), countListChanged(after))
			})
		}
		// A server that comes up after the initialize answer and before
		// the client's initialized: told once, after the initialized.
		t.Run("slow server", func(t *testing.T) {
			slow := e.mcpConfig(t, map[string]any{
				"files": filesServer(t),
				"slow":  map[string]any{"command": "node", "args": []string{e.script(t, "slow.cjs", "setTimeout(() => {\n"+crashyServer+"\n}, 2500);\n")}},
			})
			r := e.rawStart(t, "--mcp-config", slow)
			r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			before := r.readUntil("the initialize answer", func(l string) bool { return strings.Contains(l, `"id":0`) })
			before = append(before, r.drain(6*time.Second)...)
			if n := countListChanged(before); n != 0 {
				t.Errorf("%d %s before the client's initialized", n, listChanged)
			}
			r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			after := r.drain(3 * time.Second)
			if n := countListChanged(after); n != 1 {
				t.Errorf("%d %s after initialized; want one: a server came up before it", n, listChanged)
			}
			r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if m := r.expect(1); !strings.Contains(fmt.Sprint(m["result"]), "slow__echo") {
				t.Errorf("the slow server's tools are not listed: %v", m)
			}
			if n := countListChanged(r.drain(2 * time.Second)); n != 0 {
				t.Errorf("%d %s after the list, with nothing changed", n, listChanged)
			}
		})
		// Without MCP servers behind, tools.listChanged is not advertised.
		r := e.rawStart(t)
		r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		m := r.expect(0)
		res, _ := m["result"].(map[string]any)
		checkCapabilities(t, res, false)
	})
}

// TestHTTPGatewayListChanged: the same over Streamable HTTP, the
// notifications counted on the session's GET stream, opened before the
// client's initialized.
func TestHTTPGatewayListChanged(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--mcp-config", e.twoServers(t))
		resp := srv.raw(t, http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
		sid := resp.Header.Get("Mcp-Session-Id")
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if sid == "" {
			t.Fatalf("no session id: %d %s", resp.StatusCode, body)
		}
		init := sseResult(t, string(body))
		checkCapabilities(t, init, true)
		hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}

		var mu sync.Mutex // guards seen
		var seen []time.Time
		req, _ := http.NewRequest(http.MethodGet, srv.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		get, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer get.Body.Close()
		if get.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %d", get.StatusCode)
		}
		go func() {
			sc := bufio.NewScanner(get.Body)
			for sc.Scan() {
				if strings.Contains(sc.Text(), listChanged) {
					mu.Lock()
					seen = append(seen, time.Now())
					mu.Unlock()
				}
			}
		}()
		count := func(since time.Time) (before, after int) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range seen {
				if s.Before(since) {
					before++
				} else {
					after++
				}
			}
			return
		}
		time.Sleep(4 * time.Second) // the servers come up
		initialized := time.Now()
		srv.raw(t, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body.Close()
		resp = srv.raw(t, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, hdr)
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if !strings.Contains(string(body), "files__read_text_file") || !strings.Contains(string(body), "memory__read_graph") {
			t.Fatalf("the first list lacks a downstream server's tools: %.400s", body)
		}
		time.Sleep(3 * time.Second)
		b, a := count(initialized)
		if b != 0 {
			t.Errorf("%d %s before the client's initialized", b, listChanged)
		}
		// Both servers came up between the initialize answer (the session
		// and its servers start with the initialize) and the client's
		// initialized: that is one change to tell, once, after it.
		if a != 1 {
			t.Errorf("%d %s after initialized; want the one for the servers that came up before it", a, listChanged)
		}
		t.Logf("%s: %d before initialized, %d after", listChanged, b, a)
	})
}

// sseResult is the result of the one JSON-RPC response in body (JSON or
// an SSE stream).
func sseResult(t *testing.T, body string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "data:")
		var m struct {
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &m) == nil && m.Result != nil {
			return m.Result
		}
	}
	t.Fatalf("no result in %q", body)
	return nil
}

// TestHelpCLI: `evener-mcp help` lists every mode; `version` and
// `--version` print the version; each mode's -h prints its own usage, and
// every flag any -h prints is documented in the reference page,
// docs/reference.md, which the README links to.
func TestHelpCLI(t *testing.T) {
	e := newEnv(t, identities(t)[0])
	ref, err := os.ReadFile("../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(ref)
	if readme, err := os.ReadFile("../README.md"); err != nil || !strings.Contains(string(readme), "(docs/reference.md)") {
		t.Fatalf("README.md does not link to docs/reference.md (%v)", err)
	}
	help := e.run(t, "help")
	if help.code != 0 {
		t.Fatalf("help: %v", help)
	}
	for _, mode := range []string{"evener-mcp [flags]", "evener-mcp serve", "evener-mcp exec", "evener-mcp probe", "evener-mcp version"} {
		if !strings.Contains(help.stderr, mode) {
			t.Errorf("help does not list %q:\n%s", mode, help.stderr)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := e.run(t, args...)
		if r.code != 0 || !regexp.MustCompile(`^evener-mcp (\(devel\)|v\S+)( revision [0-9a-f]+(-dirty)?)?`).MatchString(r.stdout) {
			t.Errorf("%v: %v", args, r)
		}
	}
	flagRe := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, c := range []struct {
		args  []string
		usage string
	}{
		{[]string{"-h"}, "usage: evener-mcp [flags]"},
		{[]string{"serve", "-h"}, "usage: evener-mcp serve"},
		{[]string{"exec", "-h"}, "usage: evener-mcp exec"},
		{[]string{"probe", "-h"}, "usage: evener-mcp probe"},
		{[]string{"gateway", "-h"}, "usage: evener-mcp gateway"},
	} {
		r := e.run(t, c.args...)
		if r.code != 0 || !strings.Contains(r.stderr, c.usage) {
			t.Errorf("%v: want %q, exit 0: %v", c.args, c.usage, r)
			continue
		}
		for _, m := range flagRe.FindAllStringSubmatch(r.stderr, -1) {
			if !strings.Contains(section, "`--"+m[1]) {
				t.Errorf("%v prints --%s, which docs/reference.md does not document", c.args, m[1])
			}
		}
	}
}
