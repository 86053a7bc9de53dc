package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/metrics"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
)

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
