package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/evener-dev/evener-mcp/metrics"
	"github.com/mark3labs/mcp-go/mcp"
)

// DefaultDrainTimeout is how long `serve` lets calls in flight finish after
// SIGTERM before it ends every session (--drain-timeout).
const DefaultDrainTimeout = 20 * time.Second

// drainer refuses new sessions and new calls once draining, and counts the
// requests in flight so the drain knows when they are done.
type drainer struct {
	on     atomic.Bool
	posts  atomic.Int64 // POST /mcp requests being handled
	metric *metrics.Metrics
}

// guard sits in front of the transport, after the body guard (the body is
// read and bounded): while draining, an initialize or a tools/call is
// answered 503; everything else (a call's cancellation, a client's answer
// to an elicitation a call in flight waits on, DELETE) goes on.
func (d *drainer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		d.posts.Add(1)
		defer d.posts.Add(-1)
		if d.on.Load() {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var method string
			if m := topLevel(body, "method"); m != nil && json.Unmarshal(m, &method) == nil &&
				(method == string(mcp.MethodInitialize) || method == string(mcp.MethodToolsCall)) {
				var id any
				if raw := topLevel(body, "id"); raw != nil {
					id = json.RawMessage(raw)
				}
				w.Header().Set("Retry-After", "1")
				writeRPCErrorWith(w, http.StatusServiceUnavailable, id, mcp.INTERNAL_ERROR,
					"the server is draining (shutting down): no new sessions or calls; start a new session on another instance", nil)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// drain stops taking new sessions and calls and waits, at most timeout,
// until the requests in flight (this one excepted: none) are answered.
// It reports how many were still running when it gave up.
func (d *drainer) drain(timeout time.Duration) (left int64) {
	d.on.Store(true)
	d.metric.Draining(true)
	deadline := time.Now().Add(timeout)
	for {
		left = d.posts.Load()
		if left <= 0 || !time.Now().Before(deadline) {
			return left
		}
		time.Sleep(25 * time.Millisecond)
	}
}
