//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOversizedRequestAnswered: a 20 MB write_file over stdio, written as
// the TypeScript SDK writes requests (the id after the params), is answered
// by an error carrying its id within 2 seconds, not left to the client's
// own timeout; the server keeps serving.
func TestOversizedRequestAnswered(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		r := e.raw(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		for i, shape := range []string{
			`{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big","content":"%s"}},"jsonrpc":"2.0","id":%d}`,
			`{"jsonrpc":"2.0","id":%[2]d,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big","content":"%[1]s"}}}`,
		} {
			reqID := 70 + i
			line := fmt.Sprintf(shape, strings.Repeat("x", 20<<20), reqID)
			start := time.Now()
			go r.send(line)
			m := r.expect(reqID)
			took := time.Since(start)
			if !isProtocolError(m) || !strings.Contains(fmt.Sprint(m["error"]), "larger than") {
				t.Errorf("shape %d: %v", i, m)
			}
			if took > 2*time.Second {
				t.Errorf("shape %d: answered after %s, want within 2 s", i, took)
			}
			r.alive(80 + i)
		}
	})
}

// TestLogJSON: with --log-format json, every stderr line after the startup
// line is one JSON object, over stdio and over HTTP, sessions opening and
// closing, refusals and warnings included.
func TestLogJSON(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		check := func(t *testing.T, stderr string) {
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[0], "sandbox: ") {
				t.Fatalf("the startup line is not first:\n%s", stderr)
			}
			msgs := map[string]bool{}
			for _, l := range lines[1:] {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Errorf("not a JSON object: %q", l)
					continue
				}
				if m["level"] == nil || m["msg"] == nil || m["time"] == nil {
					t.Errorf("a record without level, msg or time: %q", l)
				}
				msgs[fmt.Sprint(m["msg"])] = true
			}
			for _, want := range []string{"session opened", "session closed"} {
				if !msgs[want] {
					t.Errorf("no %q record:\n%s", want, stderr)
				}
			}
		}
		t.Run("stdio", func(t *testing.T) {
			e := newEnv(t, id)
			// A warning found while the session is built (a memory root
			// that is a symlink) still comes after the startup line.
			state := filepath.Join(e.home, ".local", "state", "evener-mcp")
			mustMkdir(t, state)
			must(t, os.Symlink(e.sibling, filepath.Join(state, "memory")))
			r := e.raw(t, "--sandbox", "workspace-write", "--sandbox-net", "on", "--log-format", "json", "--log-level", "debug")
			r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + filepath.Join(e.home, ".ssh", "id_rsa") + `"}}}`)
			r.expect(2)
			r.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shell","arguments":{"command":"curl -s -m 3 http://refused.test/ || true"}}}`)
			r.expect(3)
			res := r.close()
			check(t, res)
			if !strings.Contains(res, `"msg":"egress refused"`) {
				t.Errorf("no egress refusal record:\n%s", res)
			}
			if !strings.Contains(res, "memory tools not offered") {
				t.Errorf("no memory warning:\n%s", res)
			}
		})
		t.Run("http", func(t *testing.T) {
			e := newEnv(t, id)
			srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--log-format", "json")
			m := srv.mustConnect(t, clientOpts{})
			m.call(t, "shell", map[string]any{"command": "true"})
			m.c.Close()
			srv.stop(t)
			waitFor(5*time.Second, func() bool { return strings.Contains(srv.stderr.String(), "session closed") })
			check(t, srv.stderr.String())
		})
	})
}

// TestLogNotificationsPerSession: over HTTP, a client that sets
// logging/setLevel debug receives its own session's records (its calls,
// its denials) as notifications/message, never another session's; a client
// that sets no level receives none.
func TestLogNotificationsPerSession(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		plan := func(marker, level string) tsPlan {
			return tsPlan{Transport: "http", URL: srv.url, SetLevel: level, Repeat: 5, Concurrency: 2, Calls: []tsCall{
				{Name: "read_file", Arguments: map[string]any{"path": filepath.Join(e.home, ".ssh", marker)}},
				{Name: "shell", Arguments: map[string]any{"command": "echo " + marker}},
			}}
		}
		var wg sync.WaitGroup
		runs := map[string]tsRun{}
		var mu sync.Mutex // guards runs
		for _, c := range [][2]string{{"marker-a", "debug"}, {"marker-b", "debug"}, {"marker-c", ""}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := runTS(t, plan(c[0], c[1]))
				mu.Lock()
				runs[c[0]] = r
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, own := range []string{"marker-a", "marker-b"} {
			logs := fmt.Sprint(runs[own].summary.Logs)
			if !strings.Contains(logs, own) || !strings.Contains(logs, "tool call") {
				t.Errorf("%s: its own records did not arrive: %s", own, logs)
			}
			for _, other := range []string{"marker-a", "marker-b", "marker-c"} {
				if other != own && strings.Contains(logs, other) {
					t.Errorf("%s received another session's record (%s): %s", own, other, logs)
				}
			}
		}
		if l := runs["marker-c"].summary.Logs; len(l) != 0 {
			t.Errorf("a client that set no level received %d records: %v", len(l), l)
		}
	})
}
