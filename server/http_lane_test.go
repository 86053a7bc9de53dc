//go:build linux

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// laneServe is an HTTP server (the transport's handler, without the peer
// guard, which the integration tests exercise) with one initialised
// session whose tool fake__echo is a downstream tool; it records, per
// call, whether the lane served it.
type laneServe struct {
	t   *testing.T
	tr  *httpTransport
	url string
	sid string

	mu    sync.Mutex // guards lanes
	lanes []bool     // per call of fake__echo: served on the lane
	// block receives how a "block" call ended: it waits until its
	// context ends, or the test does (stop).
	block chan error
	stop  chan struct{}
}

func newLaneServe(t *testing.T) *laneServe {
	t.Helper()
	o := testOptions(t, confine.ModeWorkspaceWrite)
	ctx, cancel := context.WithCancel(context.Background())
	tr := &httpTransport{}
	h, err := newHub(ctx, o, tr)
	if err != nil {
		t.Fatal(err)
	}
	tr.drain = &drainer{}
	srv := httptest.NewServer(tr.handler(HTTPOptions{MaxBody: MaxMessageBytes}, nil))
	ls := &laneServe{t: t, tr: tr, url: srv.URL + "/mcp", block: make(chan error, 4), stop: make(chan struct{})}
	t.Cleanup(func() {
		close(ls.stop) // a blocked call must not hold the server's Close
		srv.Close()
		h.closeAll()
		cancel()
	})
	resp := ls.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	ls.sid = resp.Header.Get(mcpserver.HeaderKeySessionID)
	resp.Body.Close()
	if ls.sid == "" {
		t.Fatalf("initialize: no session id (%d)", resp.StatusCode)
	}
	def := mcp.Tool{Name: "fake__echo", RawInputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"],"additionalProperties":false}`)}
	handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ps, _ := ctx.Value(postStreamKey{}).(*postStream)
		ls.mu.Lock()
		ls.lanes = append(ls.lanes, ps != nil && ps.lane)
		ls.mu.Unlock()
		var args struct{ Mode string }
		_ = req.BindArguments(&args)
		switch args.Mode {
		case "panic":
			panic("downstream went wrong")
		case "err":
			return nil, errors.New("downstream failed")
		case "nil":
			return nil, nil
		case "notify":
			h.lookup(ctx).notifyCall(ctx, string(mcp.MethodNotificationMessage), map[string]any{"level": "info", "data": "mid-call"})
		case "block":
			select {
			case <-ctx.Done():
			case <-ls.stop:
				return nil, errors.New("the test ended")
			}
			ls.block <- ctx.Err()
			return nil, ctx.Err()
		}
		res := mcp.NewToolResultStructured(map[string]any{"z": 1, "a": []any{"b", 2.5}}, "text <&> \u2028")
		res.IsError = true
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"k": "v"}}
		return res, nil
	}
	h.mu.Lock()
	s := h.sessions[ls.sid]
	h.mu.Unlock()
	if s == nil {
		t.Fatal("no hub session after initialize")
	}
	s.mu.Lock()
	s.handlers[def.Name] = tools.Tool{ServerTool: mcpserver.ServerTool{Tool: def, Handler: handler}, Facts: gatewayFacts(def.Name)}
	s.defs[def.Name] = def
	s.mu.Unlock()
	h.gw.register([]mcp.Tool{def})
	resp = ls.post(ls.sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	resp.Body.Close()
	return ls
}

// post sends body with the headers of a client of the 2025-06-18
// revision; set may change them.
func (ls *laneServe) post(sid, body string, set func(http.Header)) *http.Response {
	ls.t.Helper()
	req, err := http.NewRequest(http.MethodPost, ls.url, strings.NewReader(body))
	if err != nil {
		ls.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set(mcpserver.HeaderKeySessionID, sid)
		req.Header.Set(mcp.HeaderProtocolVersion, "2025-06-18")
	}
	if set != nil {
		set(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ls.t.Fatal(err)
	}
	return resp
}

// answer is one response as a client reads it: status, content type,
// body.
func (ls *laneServe) answer(sid, body string, set func(http.Header)) string {
	ls.t.Helper()
	resp := ls.post(sid, body, set)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ls.t.Fatal(err)
	}
	return fmt.Sprintf("%d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
}

// lastLane says whether the last call of fake__echo was served on the
// lane, and forgets the record.
func (ls *laneServe) lastLane() (onLane, called bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.lanes) == 0 {
		return false, false
	}
	onLane = ls.lanes[len(ls.lanes)-1]
	ls.lanes = nil
	return onLane, true
}

func echoCall(id int, args string) string {
	return `{"jsonrpc":"2.0","id":` + fmt.Sprint(id) + `,"method":"tools/call","params":{"name":"fake__echo","arguments":` + args + `}}`
}

// libraryOnly makes the lane decline a request the library serves the
// same (the library does not read Accept; the lane wants both types).
func libraryOnly(h http.Header) { h.Set("Accept", "application/json") }

// TestHTTPLaneMatchesLibrary: a gateway tool's call over HTTP reads the
// same, status, content type and body byte for byte, whether the lane
// served it or the protocol library did: a result with every member,
// arguments the schema refuses, a panic, a handler error, a missing
// result, and a call that sends a notification before its result (an SSE
// stream on both paths).
func TestHTTPLaneMatchesLibrary(t *testing.T) {
	ls := newLaneServe(t)
	calls := []string{
		`{"mode":"ok"}`,
		`{"mode":5}`,
		`{"mode":"ok","extra":true}`,
		`{"mode":"panic"}`,
		`{"mode":"err"}`,
		`{"mode":"nil"}`,
		`null`,
	}
	for i, args := range calls {
		lib := ls.answer(ls.sid, echoCall(i+1, args), libraryOnly)
		if onLane, called := ls.lastLane(); called && onLane {
			t.Fatalf("call %s: the lane served a request it should have declined", args)
		}
		lane := ls.answer(ls.sid, echoCall(i+1, args), nil)
		if onLane, called := ls.lastLane(); called && !onLane {
			t.Fatalf("call %s: the library served a call the lane should have", args)
		}
		if lib != lane {
			t.Errorf("call %s:\n library %q\n lane    %q", args, lib, lane)
		}
	}
}

// TestHTTPLaneNotifies: a call that sends a notification before its
// result is answered as an SSE stream holding both, in that order, on the
// lane as by the library (the library's events carry ids of its event
// store, the lane's none: a stream the lane began is not resumed); from
// then on the library answers every POST of that session as a stream
// recorded for resumption, and the lane leaves the session's calls to it.
func TestHTTPLaneNotifies(t *testing.T) {
	var got [2]string
	for i, set := range []func(http.Header){libraryOnly, nil} {
		ls := newLaneServe(t)
		got[i] = ls.answer(ls.sid, echoCall(1, `{"mode":"notify"}`), set)
		if onLane, _ := ls.lastLane(); onLane != (set == nil) {
			t.Fatalf("path %d: on the lane %v", i, onLane)
		}
		next := ls.answer(ls.sid, echoCall(2, `{"mode":"ok"}`), nil)
		if onLane, _ := ls.lastLane(); onLane {
			t.Errorf("path %d: a call after a notification was served on the lane", i)
		}
		if !strings.HasPrefix(next, "200 text/event-stream\nid: ") {
			t.Errorf("path %d: the call after a notification: %q", i, next)
		}
	}
	noIDs := regexp.MustCompile(`(?m)^id: [^\n]*\n`)
	if lib := noIDs.ReplaceAllString(got[0], ""); lib != got[1] {
		t.Errorf("a call that notifies:\n library %q\n lane    %q", got[0], got[1])
	}
	if !strings.Contains(got[1], "mid-call") || strings.Index(got[1], "mid-call") > strings.Index(got[1], `"id":1`) {
		t.Errorf("the notification is not ahead of the result: %q", got[1])
	}
}

// TestHTTPLaneFallbacks: what the lane does not serve reaches the library,
// which answers as before: no or an unknown session, a protocol revision
// header the library refuses, a tool the session does not publish, a
// progress token, a task, an id the lane does not key, a batch, a form
// body, our own tools.
func TestHTTPLaneFallbacks(t *testing.T) {
	ls := newLaneServe(t)
	cases := []struct {
		name, sid, body string
		set             func(http.Header)
		want            string // in the answer
	}{
		{"unknown session", "no-such-session", echoCall(1, `{"mode":"ok"}`), nil, "404"},
		{"bad protocol header", ls.sid, echoCall(2, `{"mode":"ok"}`), func(h http.Header) { h.Set(mcp.HeaderProtocolVersion, "1999-01-01") }, "400"},
		{"form body", ls.sid, echoCall(3, `{"mode":"ok"}`), func(h http.Header) { h.Set("Content-Type", "text/plain") }, "400"},
		{"not published", ls.sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fake__other","arguments":{}}}`, nil, "not found"},
		{"progress token", ls.sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fake__echo","arguments":{"mode":"ok"},"_meta":{"progressToken":"p"}}}`, nil, `"id":5`},
		{"fractional id", ls.sid, `{"jsonrpc":"2.0","id":6.5,"method":"tools/call","params":{"name":"fake__echo","arguments":{"mode":"ok"}}}`, nil, `"id":6.5`},
		{"batch", ls.sid, `[` + echoCall(7, `{"mode":"ok"}`) + `]`, nil, ""},
		{"arguments not an object", ls.sid, echoCall(8, `[1]`), nil, `"id":8`},
	}
	for _, c := range cases {
		got := ls.answer(c.sid, c.body, c.set)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: answer %q, want it to hold %q", c.name, got, c.want)
		}
		if onLane, called := ls.lastLane(); called && onLane {
			t.Errorf("%s: served on the lane", c.name)
		}
	}
	// The lane's calls go on being served after all of these.
	if got := ls.answer(ls.sid, echoCall(9, `{"mode":"ok"}`), nil); !strings.HasPrefix(got, "200 application/json") {
		t.Errorf("a lane call after the fallbacks: %q", got)
	}
	if onLane, _ := ls.lastLane(); !onLane {
		t.Error("a lane call after the fallbacks was not on the lane")
	}
	// After DELETE the session is gone for the lane too: the library
	// answers 404.
	req, _ := http.NewRequest(http.MethodDelete, ls.url, nil)
	req.Header.Set(mcpserver.HeaderKeySessionID, ls.sid)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if got := ls.answer(ls.sid, echoCall(10, `{"mode":"ok"}`), nil); !strings.HasPrefix(got, "404") {
		t.Errorf("a call after DELETE: %q", got)
	}
	if _, called := ls.lastLane(); called {
		t.Error("a call after DELETE reached the tool")
	}
}

// TestHTTPLaneCancel: a lane call ends when the client cancels it
// (notifications/cancelled, answered 202) and when the client goes away.
func TestHTTPLaneCancel(t *testing.T) {
	ls := newLaneServe(t)
	// notifications/cancelled.
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, ls.url, strings.NewReader(echoCall(41, `{"mode":"block"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcpserver.HeaderKeySessionID, ls.sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	cancelled := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,"reason":"test"}}`
	deadline := time.Now().Add(30 * time.Second)
	for {
		if onLane, called := ls.lastLane(); called {
			if !onLane {
				t.Fatal("the blocking call was not on the lane")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the blocking call did not start within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ls.answer(ls.sid, cancelled, nil); !strings.HasPrefix(got, "202") {
		t.Fatalf("notifications/cancelled: %q", got)
	}
	select {
	case err := <-ls.block:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the call ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("notifications/cancelled did not end the call within 30 s")
	}
	select {
	case got := <-done:
		if !strings.Contains(got, `"id":41`) || !strings.Contains(got, "context canceled") {
			t.Errorf("the cancelled call's answer: %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call was not answered within 30 s")
	}
	// The client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ls.url, strings.NewReader(echoCall(42, `{"mode":"block"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcpserver.HeaderKeySessionID, ls.sid)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline = time.Now().Add(30 * time.Second)
	for {
		if onLane, called := ls.lastLane(); called {
			if !onLane {
				t.Fatal("the second blocking call was not on the lane")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second blocking call did not start within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-ls.block:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the call ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client's going away did not end the call within 30 s")
	}
	// A cancellation naming no lane call goes to the library (202 too).
	if got := ls.answer(ls.sid, strings.Replace(cancelled, "41", "99", 1), nil); !strings.HasPrefix(got, "202") {
		t.Errorf("notifications/cancelled of no call: %q", got)
	}
}

// TestHTTPLaneDrain: while the server drains, a lane call is refused 503
// by the drain guard in front of the lane.
func TestHTTPLaneDrain(t *testing.T) {
	ls := newLaneServe(t)
	ls.tr.drain.on.Store(true)
	if got := ls.answer(ls.sid, echoCall(1, `{"mode":"ok"}`), nil); !strings.HasPrefix(got, "503") {
		t.Errorf("a call while draining: %q", got)
	}
	if _, called := ls.lastLane(); called {
		t.Error("a call while draining reached the tool")
	}
}

// TestAccepts: the Accept header as the lane reads it.
func TestAccepts(t *testing.T) {
	for in, want := range map[string]bool{
		"application/json, text/event-stream":         true,
		"*/*":                                         true,
		"application/*;q=0.5, text/*":                 true,
		"application/json":                            false,
		"application/json, text/event-stream;q=0":     false,
		"application/json, text/event-stream;q=0.000": false,
		"application/json, text/event-stream; q=0.1":  true,
		"": false,
	} {
		h := http.Header{}
		if in != "" {
			h.Set("Accept", in)
		}
		if got := accepts(h, "application/json") && accepts(h, "text/event-stream"); got != want {
			t.Errorf("Accept %q: %v, want %v", in, got, want)
		}
	}
}

// TestHTTPResponseMatchesLibrary: the lane's response envelope, written
// around the result's encoding, is json.Marshal's of the library's type
// for every id, the ones it copies and the ones it re-encodes.
func TestHTTPResponseMatchesLibrary(t *testing.T) {
	res := mcp.NewToolResultStructured(map[string]any{"z": 1}, "<&> \u2028")
	for _, id := range []string{`7`, `-8`, `0`, `-0`, `123456789012345`, `1234567890123456789`, `"seven"`, `""`, `"<x>"`, `"a&b"`, `"\u00e9"`, "\"\u00e9\"", `"a\"b"`} {
		got, err := httpResponse(json.RawMessage(id), res, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := response(json.RawMessage(id), res, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("id %s:\n lane    %s library %s", id, got, want)
		}
	}
}
