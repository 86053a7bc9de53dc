// Package metrics defines evener-mcp's Prometheus collectors on a private
// registry (never the client library's global one) and serves them. It
// imports nothing of ours: the server hands it the fixed sets of tool and
// rule names at construction, and every label value outside those sets is
// collapsed into one fixed value, so no path, host, session id or other
// string a client chose can become a label (docs/observability.md, "Metrics").
package metrics

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label values outside the fixed sets.
const (
	// ToolGateway is the tool label of every tool of an MCP server behind
	// this one (published as NAME__TOOL; the names are the user's).
	ToolGateway = "gateway"
	// Other is any tool or rule name not in the set given to New.
	Other = "other"
)

// Outcomes of a tool call.
const (
	OutcomeOK     = "ok"
	OutcomeError  = "error"
	OutcomeDenied = "denied"
)

// Reasons a session closed.
const (
	CloseDelete   = "delete"   // the client's DELETE (or its stdio closing)
	CloseIdle     = "idle"     // --idle-timeout
	CloseShutdown = "shutdown" // the server stopping
)

// Proxies an egress refusal can come from.
const (
	ProxyHTTP  = "http"
	ProxySOCKS = "socks"
)

// Names are the fixed label sets: the tools this build publishes and the
// rules a denial can name.
type Names struct {
	Tools []string
	Rules []string
}

// Metrics are one server's collectors. A nil *Metrics records nothing, so
// callers need no check when metrics are off.
type Metrics struct {
	reg   *prometheus.Registry
	names Names

	sessionsLive   prometheus.Gauge
	sessionsOpened prometheus.Counter
	sessionsClosed *prometheus.CounterVec
	toolCalls      *prometheus.CounterVec
	denials        *prometheus.CounterVec
	sandboxStart   prometheus.Histogram
	egressRefused  *prometheus.CounterVec
	draining       prometheus.Gauge
}

// New registers the collectors on a fresh private registry, with every
// label combination present at zero so a scrape shows them before they
// move.
func New(n Names) *Metrics {
	n.Tools = slices.Clone(n.Tools)
	n.Rules = slices.Clone(n.Rules)
	m := &Metrics{reg: prometheus.NewRegistry(), names: n}
	m.sessionsLive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "evener_mcp_sessions_live", Help: "Sandbox sessions open now."})
	m.sessionsOpened = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "evener_mcp_sessions_opened_total", Help: "Sandbox sessions opened."})
	m.sessionsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evener_mcp_sessions_closed_total", Help: "Sandbox sessions closed, by reason (delete, idle, shutdown)."}, []string{"reason"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evener_mcp_tool_calls_total", Help: "Tool calls, by tool (downstream MCP servers' tools are one value, gateway) and outcome (ok, error, denied)."},
		[]string{"tool", "outcome"})
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evener_mcp_denials_total", Help: "Tool calls refused by the sandbox's file layer or a hook, by rule."}, []string{"rule"})
	m.sandboxStart = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "evener_mcp_sandbox_start_seconds",
		Help:    "Time from a sandboxed spawn's start to its command being let run (bubblewrap up, limits applied).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	m.egressRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evener_mcp_egress_refusals_total", Help: "Connections the session proxies refused by policy (HTTP 403, SOCKS reply 2), by proxy."}, []string{"proxy"})
	m.draining = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "evener_mcp_draining", Help: "1 while the server drains (after SIGTERM): no new sessions or calls."})
	m.reg.MustRegister(m.sessionsLive, m.sessionsOpened, m.sessionsClosed, m.toolCalls, m.denials,
		m.sandboxStart, m.egressRefused, m.draining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{CloseDelete, CloseIdle, CloseShutdown} {
		m.sessionsClosed.WithLabelValues(r)
	}
	for _, t := range append(slices.Clone(n.Tools), ToolGateway) {
		for _, o := range []string{OutcomeOK, OutcomeError, OutcomeDenied} {
			m.toolCalls.WithLabelValues(t, o)
		}
	}
	for _, r := range append(slices.Clone(n.Rules), Other) {
		m.denials.WithLabelValues(r)
	}
	for _, p := range []string{ProxyHTTP, ProxySOCKS} {
		m.egressRefused.WithLabelValues(p)
	}
	return m
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SessionOpened counts a session opened.
func (m *Metrics) SessionOpened() {
	if m == nil {
		return
	}
	m.sessionsOpened.Inc()
	m.sessionsLive.Inc()
}

// SessionClosed counts a session closed for reason (one of the Close
// constants; anything else counts as CloseDelete).
func (m *Metrics) SessionClosed(reason string) {
	if m == nil {
		return
	}
	if reason != CloseIdle && reason != CloseShutdown {
		reason = CloseDelete
	}
	m.sessionsClosed.WithLabelValues(reason).Inc()
	m.sessionsLive.Dec()
}

// ToolCall counts one call of tool with outcome (an Outcome constant).
func (m *Metrics) ToolCall(tool, outcome string) {
	if m == nil {
		return
	}
	switch outcome {
	case OutcomeOK, OutcomeDenied:
	default:
		outcome = OutcomeError
	}
	m.toolCalls.WithLabelValues(m.tool(tool), outcome).Inc()
}

// Denial counts a denial by rule.
func (m *Metrics) Denial(rule string) {
	if m == nil {
		return
	}
	if !slices.Contains(m.names.Rules, rule) {
		rule = Other
	}
	m.denials.WithLabelValues(rule).Inc()
}

// SandboxStarted records one sandbox's start latency.
func (m *Metrics) SandboxStarted(d time.Duration) {
	if m == nil {
		return
	}
	m.sandboxStart.Observe(d.Seconds())
}

// EgressRefused counts a proxy refusal; raw is the refusal's reason line,
// whose first word names the proxy ("http ...", "socks5 ..."). Only that
// word's kind is kept, never the target.
func (m *Metrics) EgressRefused(raw string) {
	if m == nil {
		return
	}
	p := ProxyHTTP
	if strings.HasPrefix(strings.ToLower(raw), "socks") {
		p = ProxySOCKS
	}
	m.egressRefused.WithLabelValues(p).Inc()
}

// Draining sets the draining gauge.
func (m *Metrics) Draining(on bool) {
	if m == nil {
		return
	}
	if on {
		m.draining.Set(1)
	} else {
		m.draining.Set(0)
	}
}

// tool is the label value of a tool name: its own name when it is one of
// the published set, ToolGateway for a downstream server's NAME__TOOL,
// Other for anything else.
func (m *Metrics) tool(name string) string {
	switch {
	case slices.Contains(m.names.Tools, name):
		return name
	case strings.Contains(name, "__"):
		return ToolGateway
	default:
		return Other
	}
}
