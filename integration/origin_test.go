//go:build linux

package integration

import (
	"io"
	"net"
	"net/http"
	"testing"
)

// TestHTTPOrigin: `serve` answers a request carrying its listener's own
// origin (http://127.0.0.1:PORT, http://localhost:PORT), as the MCP
// conformance suite's client sends it, and refuses every other origin: a
// page on another port of localhost, another scheme, another name.
func TestHTTPOrigin(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t)
		_, port, err := net.SplitHostPort(srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		other := "1"
		if port == other {
			other = "2"
		}
		const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"origin","version":"1"}}}`
		for _, c := range []struct {
			origin string
			want   int
		}{
			{"http://127.0.0.1:" + port, http.StatusOK},
			{"http://localhost:" + port, http.StatusOK},
			{"http://localhost:" + other, http.StatusForbidden},
			{"http://127.0.0.1:" + other, http.StatusForbidden},
			{"https://127.0.0.1:" + port, http.StatusForbidden},
			{"http://[::1]:" + port, http.StatusForbidden},
			{"http://rebound.example:" + port, http.StatusForbidden},
			{"https://evil.example", http.StatusForbidden},
			{"null", http.StatusForbidden},
		} {
			resp := srv.raw(t, http.MethodPost, initialize, map[string]string{"Origin": c.origin})
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("Origin %s: %d, want %d: %s", c.origin, resp.StatusCode, c.want, b)
			}
		}
	})
}
