package server

import (
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
// tools of this build (tool search's two included) and the denial rules.
func newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Names{Tools: append(tools.Names(), findToolsName, callToolName), Rules: denialRules})
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
