//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTTPRefusals: the transport's own guards: sessionless protocol
// revisions, requests without a session, bodies over the limit, malformed
// JSON, a bearer token, non-loopback without a token, /healthz.
func TestHTTPRefusals(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		tokenFile := filepath.Join(e.root, "token")
		writeFile(t, tokenFile, "0123456789abcdef0123456789abcdef\n")
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--token-file", tokenFile)
		post := func(body string, hdr map[string]string) (int, string) {
			h := map[string]string{"Authorization": "Bearer 0123456789abcdef0123456789abcdef"}
			for k, v := range hdr {
				h[k] = v
			}
			resp := srv.raw(t, http.MethodPost, body, h)
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return resp.StatusCode, string(b)
		}

		// A client that only speaks the sessionless revision.
		code, body := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
		if code != http.StatusBadRequest || !strings.Contains(body, "sessionless") || !strings.Contains(body, "no two clients share a sandbox") {
			t.Errorf("sessionless request: %d %s", code, body)
		}
		// A web page's request (an Origin that is not loopback).
		if code, body = post(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
			map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden {
			t.Errorf("cross-origin initialize: %d %s", code, body)
		}
		// DNS rebinding: the loopback listener under a foreign Host.
		{
			req, _ := http.NewRequest(http.MethodPost, srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":8,"method":"ping"}`))
			req.Host = "rebound.example:80"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer 0123456789abcdef0123456789abcdef")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("foreign Host on loopback: %d", resp.StatusCode)
			}
		}
		// No session id.
		code, body = post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
		if code < 400 {
			t.Errorf("request without a session: %d %s", code, body)
		}
		// Over the body limit (16 MiB).
		big := `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"x":"` + strings.Repeat("a", 17<<20) + `"}}`
		if code, body = post(big, nil); code != http.StatusRequestEntityTooLarge {
			t.Errorf("17 MiB body: %d %.200s", code, body)
		}
		// Duplicate keys are refused before the transport sees them.
		if code, body = post(`{"jsonrpc":"2.0","id":4,"id":5,"method":"initialize"}`, nil); code != http.StatusBadRequest || !strings.Contains(body, "duplicate") {
			t.Errorf("duplicate keys: %d %s", code, body)
		}
		// The token: missing or wrong is 401, and a client with it works.
		req, _ := http.NewRequest(http.MethodPost, srv.url, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("no token: %d", resp.StatusCode)
		}
		if _, err := srv.connect(t, clientOpts{token: "wrong-token-wrong-token"}); err == nil {
			t.Errorf("a client with the wrong token initialised")
		}
		m := srv.mustConnect(t, clientOpts{token: "0123456789abcdef0123456789abcdef"})
		if out := m.shellOut(t, "echo ok"); !strings.Contains(out, "ok") {
			t.Errorf("authorised client: %q", out)
		}
		// Progress notifications reach an HTTP client, the last one too.
		m.shellOut(t, "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo last-line")
		m.mu.Lock()
		streamed := strings.Join(m.progress, "")
		m.mu.Unlock()
		if !strings.Contains(streamed, "line1") || !strings.Contains(streamed, "last-line") {
			t.Errorf("progress over HTTP: %q", streamed)
		}
		// /healthz: no sandbox fields.
		resp, err = http.Get("http://" + srv.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		hb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var health map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(hb, &health) != nil || len(health) != 1 || health["status"] != "ok" {
			t.Errorf("/healthz: %d %s", resp.StatusCode, hb)
		}
		for _, leak := range []string{"sandbox", "bwrap", "mode", e.work} {
			if bytes.Contains(hb, []byte(leak)) {
				t.Errorf("/healthz mentions %q: %s", leak, hb)
			}
		}
		// Beyond loopback with a token: it starts, and warns.
		wide := e.serve(t, "--listen", "0.0.0.0:0", "--token-file", tokenFile, "--sandbox", "read-only")
		if !strings.Contains(wide.stderr.String(), "beyond loopback") {
			t.Errorf("no warning for a non-loopback listener:\n%s", wide.stderr.String())
		}
		wide.stop(t)
		// Beyond loopback without a token: refused at start.
		r := e.run(t, "serve", "--listen", "0.0.0.0:0", "--sandbox", "read-only")
		if r.code == 0 || !strings.Contains(r.stderr, "without a bearer token") {
			t.Errorf("non-loopback listen without a token:\n%s", r)
		}
	})
}

// TestHTTPHooks: hooks run per HTTP session through the hub: a PreToolUse
// hook blocks one session's call and lets another's through.
func TestHTTPHooks(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		dir := filepath.Join(e.root, "hooks")
		pre := blockingHook(t, dir, "no-forbidden-word", `*forbidden-word*`, "commands may not say forbidden-word")
		cfg := hookConfig(t, e, "hooks", hookDef{event: "PreToolUse", matcher: "shell", command: pre})
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})
		r := a.call(t, "shell", map[string]any{"command": "echo forbidden-word > planted"})
		if !hookDenied(t, r, "commands may not say forbidden-word") {
			t.Errorf("the hook did not block over HTTP: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(e.work, "planted")); err == nil {
			t.Error("the blocked command ran")
		}
		if out := b.shellOut(t, "echo fine"); !strings.Contains(out, "fine") {
			t.Errorf("the other session's allowed call: %q", out)
		}
	})
}

// sseEvent is one server-sent event.
type sseEvent struct{ id, data string }

// readSSE reads events from an event stream until want events or EOF.
func readSSE(r io.Reader, want int) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	buf := make([]byte, 0, 64<<10)
	sc := bufioScanner(r, buf)
	for sc.Scan() && len(out) < want {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id:"):
			cur.id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			cur.data += strings.TrimSpace(line[5:])
		}
	}
	return out
}

// TestHTTPResume: every event of a call's stream is stored with an id, and
// a client that reconnects with Last-Event-ID gets what followed, the last
// progress notification and the result included.
func TestHTTPResume(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		do := func(method, body string, hdr map[string]string) *http.Response {
			return srv.raw(t, method, body, hdr)
		}

		resp := do("POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
		sid := resp.Header.Get("Mcp-Session-Id")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if sid == "" {
			t.Fatalf("no session id: %d", resp.StatusCode)
		}
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
		resp = do("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		resp.Body.Close()
		resp = do("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"for i in 1 2 3; do echo step$i; sleep 0.3; done; echo final-step"},"_meta":{"progressToken":"p"}}}`, h)
		events := readSSE(resp.Body, 100)
		resp.Body.Close()
		if len(events) < 3 {
			t.Fatalf("the call's stream had %d events: %v", len(events), events)
		}
		for _, ev := range events {
			if ev.id == "" {
				t.Fatalf("an event without an id cannot be resumed: %v", ev)
			}
		}
		last := events[len(events)-1]
		if !strings.Contains(last.data, `"result"`) || !strings.Contains(last.data, "final-step") {
			t.Fatalf("the stream did not end with the result: %v", last)
		}
		// Reconnect after the first event: everything after it comes again.
		h["Last-Event-ID"] = events[0].id
		resp = do("GET", "", h)
		replayed := readSSE(resp.Body, len(events)-1)
		resp.Body.Close()
		var all strings.Builder
		for _, ev := range replayed {
			all.WriteString(ev.data)
		}
		if len(replayed) != len(events)-1 || !strings.Contains(all.String(), "final-step") || !strings.Contains(all.String(), `"result"`) {
			t.Errorf("replay after %s: %d events (want %d): %s", events[0].id, len(replayed), len(events)-1, all.String())
		}
	})
}
