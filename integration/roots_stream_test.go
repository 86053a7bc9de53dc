//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPRootsStreamLate: over HTTP the server's roots/list can only
// travel on the session's standalone GET stream. A client that declares
// roots and opens that stream a little after its first tool call (as
// mcp-go's client does, on a goroutine of its own) still has the session
// narrowed to its roots before that call runs: the server waits for the
// stream (bounded) instead of sending the request into nothing and leaving
// the session as wide as the server was started.
func TestHTTPRootsStreamLate(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		sub := filepath.Join(e.work, "sub")
		mustMkdir(t, sub)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		resp := srv.raw(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":false}},"clientInfo":{"name":"late","version":"1"}}}`, nil)
		p := &persistent{sid: resp.Header.Get("Mcp-Session-Id"), n: 1}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if p.sid == "" {
			t.Fatalf("no session id:\n%s", srv.stderr.String())
		}
		srv.raw(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, p.hdr()).Body.Close()

		// The first call, before any stream is open.
		done := make(chan string, 1)
		go func() {
			_, out := p.do(t, srv, "tools/call", map[string]any{"name": "write_file", "arguments": map[string]any{"path": "first.txt", "content": "x"}})
			done <- out
		}()
		time.Sleep(300 * time.Millisecond)

		// The stream, late; the roots/list on it is answered with sub.
		stream := srv.raw(t, "GET", "", p.hdr())
		defer stream.Body.Close()
		events := bufio.NewScanner(stream.Body)
		answered := false
		deadline := time.Now().Add(20 * time.Second)
		for !answered && time.Now().Before(deadline) && events.Scan() {
			line, ok := strings.CutPrefix(events.Text(), "data: ")
			if !ok {
				continue
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(line), &m) != nil || m.Method != "roots/list" {
				continue
			}
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file://%s"}]}}`, m.ID, sub)
			srv.raw(t, "POST", body, p.hdr()).Body.Close()
			answered = true
		}
		if !answered {
			t.Fatalf("no roots/list on the stream opened after the first call")
		}
		select {
		case out := <-done:
			if strings.Contains(out, `"isError":true`) {
				t.Fatalf("the first call: %s", out)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the first call never ended")
		}
		if _, err := os.Stat(filepath.Join(sub, "first.txt")); err != nil {
			t.Errorf("the first call ran before the session was narrowed to its roots: %v", err)
		}
	})
}
