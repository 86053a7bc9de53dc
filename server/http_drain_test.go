package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDrainGuard: while draining, initialize and tools/call are answered
// 503 with their id; what a running call may still need (a client's
// answer to an elicitation, a cancellation, DELETE, GET) passes; before
// the drain everything passes.
func TestDrainGuard(t *testing.T) {
	var reached atomic.Int64
	d := &drainer{}
	h := d.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && len(b) == 0 {
			t.Error("the guard lost the body")
		}
		reached.Add(1)
	}))
	send := func(method, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/mcp", strings.NewReader(body)))
		return rec
	}
	initialize := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}`
	call := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"shell"}}`
	if rec := send("POST", initialize); rec.Code != 200 || reached.Load() != 1 {
		t.Fatalf("before the drain: %d", rec.Code)
	}
	d.on.Store(true)
	for _, body := range []string{initialize, call} {
		rec := send("POST", body)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s during the drain: %d", body, rec.Code)
		}
		if !strings.Contains(rec.Body.String(), "draining") {
			t.Errorf("no reason: %s", rec.Body.String())
		}
	}
	if rec := send("POST", call); !strings.Contains(rec.Body.String(), `"id":"c1"`) {
		t.Errorf("the refusal does not carry the request's id: %s", rec.Body.String())
	}
	before := reached.Load()
	for _, r := range []struct{ method, body string }{
		{"POST", `{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}`},
		{"POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c0"}}`},
		{"DELETE", ""},
		{"GET", ""},
	} {
		send(r.method, r.body)
	}
	if got := reached.Load() - before; got != 4 {
		t.Errorf("%d of 4 requests a running call may need reached the transport", got)
	}
	if n := d.posts.Load(); n != 0 {
		t.Errorf("%d requests still counted in flight", n)
	}
}

// TestDrainWaits: the drain returns as soon as the requests in flight are
// answered, and gives up at its timeout.
func TestDrainWaits(t *testing.T) {
	d := &drainer{}
	d.posts.Add(1)
	go func() { time.Sleep(200 * time.Millisecond); d.posts.Add(-1) }()
	start := time.Now()
	if left := d.drain(5 * time.Second); left != 0 {
		t.Errorf("left %d", left)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 3*time.Second {
		t.Errorf("drain took %s for a request answered after 200 ms", took)
	}
	d.posts.Add(1)
	start = time.Now()
	if left := d.drain(300 * time.Millisecond); left != 1 {
		t.Errorf("left %d, want 1", left)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("drain ignored its timeout: %s", took)
	}
}
