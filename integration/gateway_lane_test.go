//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestGatewayLane: over stdio, a client on a revision with sessions has
// its calls of downstream tools served on the lane (server/lane.go), not
// by the MCP library. What the library's path does holds on the lane too,
// each checked where the lane, built wrong, would fail it: the client's roots are asked for on the
// session's first call when that call is a downstream one (the lane's
// context carries the library's session), ids of both kinds come back as
// sent, arguments are checked against the tool's schema, content passes
// unchanged, progress comes before its result, a cancelled call gets no
// response (the library's path answers one, so this also shows the lane
// served it) and its downstream hears of it, and a request the lane does not
// know every member of is answered by the library.
func TestGatewayLane(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.work, "sub", "inner.txt"), "inner\n")
		cfg := e.mcpConfig(t, map[string]any{"crashy": map[string]any{"command": "node", "args": []string{e.script(t, "crashy.cjs", crashyServer)}}})
		r := e.rawWith(t, `{"roots":{"listChanged":false}}`, "--mcp-config", cfg)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if !strings.Contains(fmt.Sprint(r.expect(1)["result"]), "crashy__strict") {
			t.Fatalf("crashy's tools are not listed")
		}

		// The session's first call is a downstream one: the server asks
		// the client for its roots while serving it, and narrows to them.
		r.send(`{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"crashy__echo","arguments":{}}}`)
		rootsID := r.serverRequest("roots/list")
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file://%s"}]}}`, rootsID, filepath.Join(e.work, "sub")))
		if m := r.expect("first"); isToolError(m) || !strings.Contains(fmt.Sprint(m["result"]), "instance ") {
			t.Fatalf("crashy__echo: %v", m)
		}
		r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"inner.txt","content":"x"}}}`)
		if m := r.expect(2); isToolError(m) {
			t.Errorf("write_file inside the client's root after narrowing: %v", m)
		}
		r.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"../README","content":"x"}}}`)
		if m := r.expect(3); !isToolError(m) {
			t.Errorf("the client's roots did not narrow the session when its first call was a downstream one: %v", m)
		}

		// Ids of both kinds, and the result as the downstream wrote it.
		for _, id := range []string{`7`, `"seven"`, `-8`} {
			r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":"ada"}}}`)
			m := r.expectRaw(id)
			want := map[string]any{
				"content": []any{
					map[string]any{"type": "text", "text": "hello ada"},
					map[string]any{"type": "image", "data": "aGk=", "mimeType": "image/png"},
				},
				"structuredContent": map[string]any{"greeted": "ada"},
			}
			if !reflect.DeepEqual(m["result"], want) {
				t.Errorf("id %s: result %v, want %v", id, m["result"], want)
			}
		}

		// Calls in flight together each get their own answer.
		for i := 0; i < 24; i++ {
			r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"c%d","method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":"n%d"}}}`, i, i))
		}
		answered := map[string]string{}
		r.readUntil("24 answers", func(l string) bool {
			var m struct {
				ID     string `json:"id"`
				Result struct {
					Structured struct {
						Greeted string `json:"greeted"`
					} `json:"structuredContent"`
				} `json:"result"`
			}
			if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(m.ID, "c") {
				answered[m.ID] = m.Result.Structured.Greeted
			}
			return len(answered) == 24
		})
		for i := 0; i < 24; i++ {
			if got := answered[fmt.Sprintf("c%d", i)]; got != fmt.Sprintf("n%d", i) {
				t.Errorf("concurrent call c%d answered %q", i, got)
			}
		}

		// The tool's input schema holds on the lane.
		r.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":5}}}`)
		if m := r.expect(9); !isToolError(m) || !strings.Contains(fmt.Sprint(m["result"]), "input schema validation failed") {
			t.Errorf("arguments against the schema were not refused: %v", m)
		}

		// Progress comes before its result.
		r.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"crashy__slow","arguments":{},"_meta":{"progressToken":"p10"}}}`)
		lines := r.until(`10`)
		if len(lines) < 2 || !strings.Contains(lines[len(lines)-2], `"downstream halfway"`) {
			t.Errorf("no progress before the result: %q", lines)
		}

		// A cancelled call gets no response; its downstream hears of it;
		// the next call is served.
		r.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"crashy__hang","arguments":{}}}`)
		time.Sleep(200 * time.Millisecond)
		r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11,"reason":"test"}}`)
		r.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"crashy__echo","arguments":{}}}`)
		for _, l := range r.until(`12`) {
			if strings.Contains(l, `"id":11`) {
				t.Errorf("a cancelled call was answered: %s", l)
			}
		}
		if !waitFor(10*time.Second, func() bool { return strings.Contains(r.stderr.String(), "downstream saw cancelled") }) {
			t.Errorf("the downstream never heard the call was cancelled")
		}

		// Requests the lane does not serve are the library's: a task, an
		// argument that is no object, an unknown tool.
		for i, line := range []string{
			`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"crashy__echo","arguments":{},"task":{"ttl":1000}}}`,
			`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"crashy__echo","arguments":[1]}}`,
			`{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"crashy__nothing","arguments":{}}}`,
		} {
			r.send(line)
			m := r.expect(20 + i)
			if i > 0 && !isProtocolError(m) && !isToolError(m) {
				t.Errorf("%s: answered as a success: %v", line, m)
			}
		}
		r.send(`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"crashy__echo","arguments":{}}}`)
		if m := r.expect(30); isToolError(m) {
			t.Errorf("crashy__echo at the end: %v", m)
		}
		r.close()
	})
}

// serverRequest waits for a request of the server's with method, skipping
// everything else, and returns its id as JSON.
func (r *rawConn) serverRequest(method string) string {
	r.t.Helper()
	var id string
	r.readUntil("the server's "+method, func(l string) bool {
		m := idAndMethod(l)
		id = string(m.ID)
		return m.Method == method && m.ID != nil
	})
	return id
}

// until returns every line the server writes up to and including the
// response whose id is the JSON id.
func (r *rawConn) until(id string) []string {
	r.t.Helper()
	return r.readUntil("the response for id "+id, func(l string) bool {
		m := idAndMethod(l)
		return m.Method == "" && string(m.ID) == id
	})
}

// idAndMethod reads a line's id (as JSON) and method, zero when it is not
// JSON.
func idAndMethod(l string) (m struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}) {
	_ = json.Unmarshal([]byte(l), &m)
	return m
}

// expectRaw is expect for an id given as JSON (so "7" and 7 differ).
func (r *rawConn) expectRaw(id string) map[string]any {
	r.t.Helper()
	lines := r.until(id)
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}
