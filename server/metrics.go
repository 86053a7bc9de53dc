package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/metrics"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
)

// DefaultDrainTimeout is how long `serve` lets calls in flight finish after
// SIGTERM before it ends every session (--drain-timeout).
const DefaultDrainTimeout = 20 * time.Second

// denialRules are the rule names a denial can carry, the fixed label set of
// the denials metric (anything else counts as "other").
var denialRules = []string{
	confine.RuleDenylist, confine.RuleOutside, confine.RuleReadOnly, confine.RuleGitMetadata,
	confine.RuleSymlink, confine.RuleNotRegular, confine.RuleInvalidPath, confine.RuleTooLarge,
	confine.RuleProtected, HookRule,
}

// newMetrics builds the server's collectors with the fixed label sets: the
// tools of this build and the denial rules.
func newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Names{Tools: tools.Names(), Rules: denialRules})
}

// countCall records one finished call of tool: its outcome, and its rule
// when it was a denial.
func countCall(m *metrics.Metrics, tool string, res *mcp.CallToolResult, err error) {
	if m == nil {
		return
	}
	switch den, denied := tools.DenialOf(res); {
	case err != nil || res == nil:
		m.ToolCall(tool, metrics.OutcomeError)
	case denied:
		m.ToolCall(tool, metrics.OutcomeDenied)
		m.Denial(den.Rule)
	case res.IsError:
		m.ToolCall(tool, metrics.OutcomeError)
	default:
		m.ToolCall(tool, metrics.OutcomeOK)
	}
}

// closeReason is the metrics' reason for a session's end.
func (s *Session) closeReason() string {
	switch {
	case s.shutdown.Load():
		return metrics.CloseShutdown
	case s.expiring.Load():
		return metrics.CloseIdle
	default:
		return metrics.CloseDelete
	}
}

// serveMetrics serves /metrics (and nothing else) on its own listener
// until stop is called. The collectors hold counts only, with labels from fixed
// sets (package metrics), so the listener has neither a token nor the
// peer-user check of /mcp; off loopback it needs the person running the
// server to say so (--metrics-allow-remote).
func serveMetrics(m *metrics.Metrics, listen string, allowRemote bool, ready func(net.Addr), errLog func(error)) (stop func(), err error) {
	if !IsLoopback(listen) && !allowRemote {
		return nil, fmt.Errorf("metrics listen %s: not a loopback address; the metrics endpoint is unauthenticated, so serving it beyond loopback needs --metrics-allow-remote", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr())
	}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && errLog != nil {
			errLog(fmt.Errorf("metrics: %w", err))
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
	}, nil
}

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
