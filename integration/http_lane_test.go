//go:build linux

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHTTPGatewayLane: over `serve`, a downstream tool's call reads the
// same, status, content type and body byte for byte, whether the HTTP lane
// served it (server/http_lane.go) or the protocol library did (a client
// that accepts JSON only is the library's: the lane answers JSON or SSE);
// calls in flight together each get their own answer; a call the client
// cancels (notifications/cancelled) or walks away from ends, and the
// downstream is told; an unknown or ended session is answered 404. Both
// identities.
func TestHTTPGatewayLane(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := e.mcpConfig(t, map[string]any{"crashy": map[string]any{"command": "node", "args": []string{e.script(t, "crashy.cjs", crashyServer)}}})
		srv := e.serve(t, "--mcp-config", cfg)
		resp := srv.raw(t, http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
		sid := resp.Header.Get("Mcp-Session-Id")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if sid == "" {
			t.Fatalf("no session id: %d", resp.StatusCode)
		}
		hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
		answer := func(body string, accept string) string {
			t.Helper()
			h := map[string]string{}
			for k, v := range hdr {
				h[k] = v
			}
			if accept != "" {
				h["Accept"] = accept
			}
			resp := srv.raw(t, http.MethodPost, body, h)
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return fmt.Sprintf("%d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		answer(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
		if got := answer(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ""); !strings.Contains(got, "crashy__strict") {
			t.Fatalf("crashy's tools are not listed: %s", got)
		}

		// The same call on both paths, ids of each kind.
		for _, rid := range []string{`7`, `"seven"`, `-8`, `"<&>"`} {
			call := `{"jsonrpc":"2.0","id":` + rid + `,"method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":"ada"}}}`
			lane := answer(call, "")
			lib := answer(call, "application/json")
			if lane != lib {
				t.Errorf("id %s:\n lane    %q\n library %q", rid, lane, lib)
			}
			if !strings.HasPrefix(lane, "200 application/json\n") || !strings.Contains(lane, `"hello ada"`) || (rid != `"<&>"` && !strings.Contains(lane, `"id":`+rid)) {
				t.Errorf("id %s: %q", rid, lane)
			}
		}
		// Arguments the schema refuses: the same tool error on both paths.
		bad := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"crashy__strict","arguments":{}}}`
		if lane, lib := answer(bad, ""), answer(bad, "application/json"); lane != lib || !strings.Contains(lane, `"isError":true`) {
			t.Errorf("refused arguments:\n lane    %q\n library %q", lane, lib)
		}

		// Calls in flight together.
		var wg sync.WaitGroup
		var mu sync.Mutex // guards wrong
		var wrong []string
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := answer(fmt.Sprintf(`{"jsonrpc":"2.0","id":"c%d","method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":"n%d"}}}`, i, i), "")
				if !strings.Contains(got, fmt.Sprintf(`"id":"c%d"`, i)) || !strings.Contains(got, fmt.Sprintf(`"hello n%d"`, i)) {
					mu.Lock()
					wrong = append(wrong, got)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(wrong) > 0 {
			t.Errorf("concurrent calls answered wrongly: %q", wrong)
		}

		// notifications/cancelled ends a call the downstream never answers.
		hung := make(chan string, 1)
		go func() {
			hung <- answer(`{"jsonrpc":"2.0","id":"h1","method":"tools/call","params":{"name":"crashy__hang","arguments":{}}}`, "")
		}()
		time.Sleep(300 * time.Millisecond) // the call reaches the downstream
		if got := answer(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h1","reason":"test"}}`, ""); !strings.HasPrefix(got, "202") {
			t.Errorf("notifications/cancelled: %q", got)
		}
		select {
		case got := <-hung:
			if !strings.Contains(got, `"id":"h1"`) {
				t.Errorf("the cancelled call's answer: %q", got)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a cancelled call was not answered within 30 s")
		}
		// The downstream's calls have the gateway's ids: it is told of one.
		told := func() int {
			seen := map[string]bool{}
			for _, m := range sawCancelled.FindAllStringSubmatch(srv.stderr.String(), -1) {
				seen[m[1]] = true
			}
			return len(seen)
		}
		if !waitFor(10*time.Second, func() bool { return told() >= 1 }) {
			t.Errorf("the downstream never heard the call was cancelled:\n%s", srv.stderr.String())
		}

		// A client that walks away from a call: the downstream is told.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":"h2","method":"tools/call","params":{"name":"crashy__hang","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if !waitFor(10*time.Second, func() bool { return told() >= 2 }) {
			t.Errorf("the downstream never heard the client went away:\n%s", srv.stderr.String())
		}
		// The session goes on.
		if got := answer(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":"bo"}}}`, ""); !strings.Contains(got, `"hello bo"`) {
			t.Errorf("a call after the cancellations: %q", got)
		}

		// An unknown session, then this one ended.
		call := `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"crashy__strict","arguments":{"name":"ada"}}}`
		saved := hdr["Mcp-Session-Id"]
		hdr["Mcp-Session-Id"] = "not-a-session"
		if got := answer(call, ""); !strings.HasPrefix(got, "404") {
			t.Errorf("an unknown session: %q", got)
		}
		hdr["Mcp-Session-Id"] = saved
		del := srv.raw(t, http.MethodDelete, "", hdr)
		del.Body.Close()
		if got := answer(call, ""); !strings.HasPrefix(got, "404") {
			t.Errorf("an ended session: %q", got)
		}
	})
}

// sawCancelled is crashy's stderr line for a cancellation, as the server
// logs it, with the id it was told.
var sawCancelled = regexp.MustCompile(`downstream saw cancelled \\"([^\\"]+)\\"`)
