package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return string(b)
}

// TestLabelsStayInTheFixedSets: a value a client chose (a path, a host, a
// downstream tool's name) never becomes a label value.
func TestLabelsStayInTheFixedSets(t *testing.T) {
	m := New(Names{Tools: []string{"shell", "read_file"}, Rules: []string{"denylist"}})
	m.SessionOpened()
	m.ToolCall("shell", OutcomeOK)
	m.ToolCall("fs__read_text_file", OutcomeOK)
	m.ToolCall("/etc/passwd", "weird/outcome")
	m.Denial("denylist")
	m.Denial("/home/u/.ssh/id_rsa")
	m.EgressRefused("socks5 CONNECT: evil.example:22 is not on the allowlist")
	m.EgressRefused("http CONNECT: evil.example:443 is not on the allowlist")
	m.SandboxStarted(3 * time.Millisecond)
	m.SessionClosed("/strange")
	out := scrape(t, m)
	for _, want := range []string{
		`evener_mcp_tool_calls_total{outcome="ok",tool="shell"} 1`,
		`evener_mcp_tool_calls_total{outcome="ok",tool="gateway"} 1`,
		`evener_mcp_tool_calls_total{outcome="error",tool="other"} 1`,
		`evener_mcp_denials_total{rule="denylist"} 1`,
		`evener_mcp_denials_total{rule="other"} 1`,
		`evener_mcp_egress_refusals_total{proxy="socks"} 1`,
		`evener_mcp_egress_refusals_total{proxy="http"} 1`,
		`evener_mcp_sessions_closed_total{reason="delete"} 1`,
		`evener_mcp_sessions_opened_total 1`,
		`evener_mcp_sessions_live 0`,
		`evener_mcp_sandbox_start_seconds_count 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	for _, bad := range []string{"/", "evil", "ssh", "fs__", "weird"} {
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "evener_mcp_") && strings.Contains(line, bad) {
				t.Errorf("a label carries %q: %s", bad, line)
			}
		}
	}
}

// TestNilRecordsNothing: metrics off is a nil *Metrics, safe to call.
func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.SessionOpened()
	m.SessionClosed(CloseIdle)
	m.ToolCall("shell", OutcomeOK)
	m.Denial("x")
	m.SandboxStarted(time.Second)
	m.EgressRefused("http")
	m.Draining(true)
}
