//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The sessionless revision (2026-07-28) over stdio: no initialize; every
// request carries its revision in _meta; a client is told of changes on
// the subscriptions/listen streams it opens (docs/observability.md,
// "Violations").

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// rpcLine is one line the server wrote, as far as these tests read it.
type rpcLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta          map[string]any  `json:"_meta"`
		URI           string          `json:"uri"`
		Notifications json.RawMessage `json:"notifications"`
	} `json:"params"`
	Result map[string]any `json:"result"`
	Error  map[string]any `json:"error"`
}

func parseLines(t *testing.T, lines []string) []rpcLine {
	t.Helper()
	out := make([]rpcLine, 0, len(lines))
	for _, l := range lines {
		var m rpcLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %v: %q", err, l)
		}
		out = append(out, m)
	}
	return out
}

// stream is the subscription id a message carries ("" for none).
func (m rpcLine) stream() string {
	meta := m.Params.Meta
	if m.Result != nil {
		meta, _ = m.Result["_meta"].(map[string]any)
	}
	if v, ok := meta["io.modelcontextprotocol/subscriptionId"]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// listenLine is a subscriptions/listen request with id (JSON) and filter.
func listenLine(id, filter string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":` + filter + `}}`
}

// modernCall is a tools/call on the sessionless revision.
func modernCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":%q,"arguments":%s}}`, id, modernMeta, tool, args)
}

// acknowledged reads up to stream id's acknowledgement and returns what it
// granted; nothing may be told on the stream before it.
func (r *rawConn) acknowledged(t *testing.T, id string) string {
	t.Helper()
	lines := parseLines(t, r.readUntil("the acknowledgement of "+id, func(l string) bool {
		return strings.Contains(l, `"notifications/subscriptions/acknowledged"`) && strings.Contains(l, `"io.modelcontextprotocol/subscriptionId":`+id)
	}))
	for _, m := range lines[:len(lines)-1] {
		if m.stream() == strings.Trim(id, `"`) {
			t.Errorf("told on stream %s before its acknowledgement: %+v", id, m)
		}
	}
	return string(lines[len(lines)-1].Params.Notifications)
}

// updates counts the violations updates in lines by stream ("" untagged).
func updates(lines []rpcLine) map[string]int {
	n := map[string]int{}
	for _, m := range lines {
		if m.Method == "notifications/resources/updated" && m.Params.URI == violationsURI {
			n[m.stream()]++
		}
	}
	return n
}

// TestViolationsListenStdio: a client on 2026-07-28 that opens a
// subscriptions/listen stream for the violations resource is told of a
// denied read and of a kernel refusal on that stream (tagged with its id,
// ahead of the call's result), and of nothing it did not ask for; the
// acknowledgement comes first and grants only what is served; a cancelled
// stream is told nothing more and gets no response; the server's shutdown
// ends an open stream with its result.
func TestViolationsListenStdio(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		key := filepath.Join(e.home, ".ssh", "id_rsa")
		writeFile(t, key, "SECRET-KEY\n")
		r := e.rawStart(t, "--sandbox", "workspace-write", "--sandbox-net", "off")

		r.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`)
		disc := r.expect(1)
		res, _ := disc["result"].(map[string]any)
		caps, _ := res["capabilities"].(map[string]any)
		if rc, _ := caps["resources"].(map[string]any); rc["subscribe"] != true {
			t.Fatalf("server/discover does not advertise resources.subscribe: %v", disc)
		}
		if tc, _ := caps["tools"].(map[string]any); tc["listChanged"] == true {
			t.Errorf("tools.listChanged advertised without MCP servers behind: %v", caps)
		}

		r.send(listenLine(`"v"`, `{"resourceSubscriptions":["`+violationsURI+`","evener://session/none"],"toolsListChanged":true,"promptsListChanged":true}`))
		if got := r.acknowledged(t, `"v"`); got != `{"resourceSubscriptions":["`+violationsURI+`"]}` {
			t.Errorf("acknowledged %s; want the violations resource only (no unknown resource, no list changes without MCP servers)", got)
		}
		// A stream granted nothing ends at once, with its result.
		r.send(listenLine(`7`, `{"toolsListChanged":true}`))
		if got := r.acknowledged(t, `7`); got != `{}` {
			t.Errorf("stream 7 acknowledged %s; want {}", got)
		}
		if m := r.expect(7); fmt.Sprint(m["result"]) != "map[_meta:map[io.modelcontextprotocol/subscriptionId:7] resultType:complete]" {
			t.Errorf("stream 7's end: %v", m)
		}

		// A denied read: one update on stream v, ahead of the result.
		r.send(modernCall(3, "read_file", fmt.Sprintf(`{"path":%q}`, key)))
		lines := parseLines(t, r.readUntil("the read's result", func(l string) bool { return strings.HasPrefix(l, `{"jsonrpc":"2.0","id":3,`) }))
		if last := lines[len(lines)-1]; last.Result["isError"] != true {
			t.Fatalf("the read of the key was not refused: %+v", last)
		}
		if n := updates(lines); n["v"] != 1 || len(n) != 1 {
			t.Fatalf("violations updates ahead of the read's result, by stream: %v; want one, on stream v\nstderr:\n%s", n, r.stderr.String())
		}
		r.send(`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{` + modernMeta + `,"uri":"` + violationsURI + `"}}`)
		if doc := fmt.Sprint(r.expect(4)["result"]); !strings.Contains(doc, `"action":"file-read","target":"id_rsa"`) || strings.Contains(doc, e.home) {
			t.Errorf("the resource does not hold the refused read (or names a host path): %s", doc)
		}

		// A kernel refusal a shell command met.
		r.send(modernCall(5, "shell", `{"command":"touch /usr/evener-listen-probe 2>&1; true"}`))
		lines = parseLines(t, r.readUntil("the shell's result", func(l string) bool { return strings.HasPrefix(l, `{"jsonrpc":"2.0","id":5,`) }))
		lines = append(lines, parseLines(t, r.drain(time.Second))...)
		if n := updates(lines); n["v"] != 1 || len(n) != 1 {
			t.Errorf("violations updates after a kernel refusal, by stream: %v; want one, on stream v", n)
		}

		// Cancelled: nothing more on v, and no response to it.
		r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"v"}}`)
		r.send(modernCall(6, "read_file", fmt.Sprintf(`{"path":%q}`, key)))
		lines = parseLines(t, r.readUntil("the read's result", func(l string) bool { return strings.HasPrefix(l, `{"jsonrpc":"2.0","id":6,`) }))
		lines = append(lines, parseLines(t, r.drain(time.Second))...)
		if n := updates(lines); len(n) != 0 {
			t.Errorf("violations updates after the stream was cancelled: %v", n)
		}
		for _, m := range lines {
			if string(m.ID) == `"v"` {
				t.Errorf("a response to the cancelled stream: %+v", m)
			}
		}

		// The server's shutdown ends an open stream with its result.
		r.send(listenLine(`"w"`, `{"resourceSubscriptions":["`+violationsURI+`"]}`))
		r.acknowledged(t, `"w"`)
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if m := r.expect("w"); fmt.Sprint(m["result"]) != "map[_meta:map[io.modelcontextprotocol/subscriptionId:w] resultType:complete]" {
			t.Errorf("stream w at shutdown: %v", m)
		}
	})
}

// TestGatewayListenStdio: with an MCP server behind this one, a client on
// 2026-07-28 is granted toolsListChanged and told of the downstream's
// change on the stream that asked for it only.
func TestGatewayListenStdio(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.mcpConfig(t, map[string]any{"crashy": map[string]any{"command": "node", "args": []string{e.script(t, "crashy.cjs", crashyServer)}, "approval": "off"}})
		r := e.rawStart(t, "--mcp-config", cfg)
		// The downstream comes up before the client discovers: its tools
		// are in the first list, and no change is told for them.
		r.drain(3 * time.Second)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`)
		lines := parseLines(t, r.readUntil("the discover answer", func(l string) bool { return strings.HasPrefix(l, `{"jsonrpc":"2.0","id":1,`) }))
		disc := fmt.Sprint(lines[len(lines)-1].Result)
		lines = append(lines, parseLines(t, r.drain(time.Second))...)
		for _, m := range lines {
			if m.Method == listChanged {
				t.Errorf("%s at discovery, for tools the client never saw: %+v", listChanged, m)
			}
		}
		if !strings.Contains(disc, "tools:map[listChanged:true]") || !strings.Contains(disc, "MCP servers") {
			t.Errorf("server/discover lacks tools.listChanged or the gateway's status: %.600s", disc)
		}
		r.send(listenLine(`"t"`, `{"toolsListChanged":true}`))
		if got := r.acknowledged(t, `"t"`); got != `{"toolsListChanged":true}` {
			t.Errorf("acknowledged %s; want toolsListChanged", got)
		}
		r.send(listenLine(`"v"`, `{"resourceSubscriptions":["`+violationsURI+`"]}`))
		r.acknowledged(t, `"v"`)
		r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + modernMeta + `}}`)
		if l := fmt.Sprint(r.expect(2)["result"]); !strings.Contains(l, "crashy__grow") {
			t.Fatalf("the list lacks the downstream's tools: %.400s", l)
		}
		r.drain(2 * time.Second)
		r.send(modernCall(3, "crashy__grow", `{}`))
		lines = parseLines(t, r.readUntil("grow's result", func(l string) bool { return strings.HasPrefix(l, `{"jsonrpc":"2.0","id":3,`) }))
		lines = append(lines, parseLines(t, r.drain(3*time.Second))...)
		var streams []string
		for _, m := range lines {
			if m.Method == listChanged {
				streams = append(streams, m.stream())
			}
		}
		if len(streams) != 1 || streams[0] != "t" {
			t.Errorf("%s after the downstream's, by stream: %q; want one, on stream t", listChanged, streams)
		}
		r.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + modernMeta + `}}`)
		if l := fmt.Sprint(r.expect(4)["result"]); !strings.Contains(l, "crashy__grown") {
			t.Errorf("the downstream's new tool is not listed: %.400s", l)
		}
	})
}

// TestViolationsListenHTTP: over Streamable HTTP the sessionless revision
// is refused (docs/http.md: one sandbox per session), subscriptions/listen
// included, with the revisions that keep sessions; the client that falls
// back to one subscribes and is told of a denied read.
func TestViolationsListenHTTP(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		key := filepath.Join(e.home, ".ssh", "id_rsa")
		writeFile(t, key, "SECRET-KEY\n")
		s := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		resp := s.raw(t, http.MethodPost, listenLine(`1`, `{"resourceSubscriptions":["`+violationsURI+`"]}`),
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"})
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var refusal struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Supported []string `json:"supported"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &refusal); err != nil || resp.StatusCode != http.StatusBadRequest || refusal.Error.Code != -32022 ||
			!slices.Contains(refusal.Error.Data.Supported, "2025-11-25") || slices.Contains(refusal.Error.Data.Supported, "2026-07-28") {
			t.Fatalf("subscriptions/listen on 2026-07-28 over HTTP: %d %s", resp.StatusCode, body)
		}
		m := s.mustConnect(t, clientOpts{})
		w := watchViolations(m)
		subscribe(t, m, true)
		r, early := w.call(t, "read_file", map[string]any{"path": key})
		if !denied(t, r, "denylist") {
			t.Fatalf("read_file of the key was not denied: %s", text(r))
		}
		if !early || !w.updated(10*time.Second) {
			t.Errorf("the fallen-back client was not told of the denied read ahead of its result")
		}
	})
}
