package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/hooks"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// sessionHooks runs the configured hooks of one session (SessionStart,
// PreToolUse, PostToolUse, SessionEnd) through the session's launcher, under
// the session's sandbox (package hooks has the protocol).
type sessionHooks struct {
	s *Session
	o Options
	r *hooks.Runner
	// err is set when the configured hooks could not be loaded: every
	// tool call is then refused rather than run unchecked.
	err error
}

// HookRule is the rule of a denial a hook caused.
const HookRule = "hook"

func newSessionHooks(o Options, s *Session) *sessionHooks {
	h := &sessionHooks{s: s, o: o}
	var hs []hooks.Hook
	if o.Config != nil {
		for _, ev := range config.HookEvents {
			for _, c := range o.Config.Hooks[ev] {
				hs = append(hs, hooks.Hook{Event: ev, Matcher: c.Matcher, Command: c.Command, Timeout: msDuration(c.TimeoutMs)})
			}
		}
	}
	if len(hs) == 0 {
		return h
	}
	h.r, h.err = hooks.New(s.Launcher, s.ID, hs)
	return h
}

// start runs the SessionStart hooks. warning is at most one summarised
// line for the person running the server (never the hook's raw stderr);
// context is extra text a hook asked to add to the preamble.
//
// It also tells the operator (on stderr, never the model) about every
// configured hook the sandbox refuses to serve, with the reason and paths.
func (h *sessionHooks) start(ctx context.Context) (warning, context string) {
	if h.err != nil {
		h.warnf("hooks: %v; every tool call is refused until the configuration is fixed", h.err)
		return "the hook configuration could not be loaded; every tool call is refused", ""
	}
	if h.r == nil {
		return "", ""
	}
	for _, g := range h.s.Launcher.Policy().HookGrants() {
		if g.Refused != "" && h.s.Launcher.Policy().Mode() != confine.ModeOff {
			h.o.warnOnce("hooks: %s is not run under the sandbox: %s (%s); the hook fails each time it is due", g.Command, g.Refused, g.Detail)
		}
	}
	out := h.r.Run(ctx, hooks.SessionStart, hooks.Call{})
	h.audit("", out)
	if f := out.Failures(); len(f) > 0 {
		warning = strings.Join(f, "; ")
	}
	if out.Context != "" {
		context = "- context from the user's SessionStart hooks:\n" + indent(out.Context) + "\n"
	}
	return warning, context
}

// middleware wraps every tool call with the PreToolUse and PostToolUse
// hooks whose matcher selects the tool. A PreToolUse block (or failure)
// refuses the call before it runs; a PostToolUse block (or failure)
// withholds its result. Both are typed denials with rule "hook".
func (h *sessionHooks) middleware(next mcpserver.ToolHandlerFunc) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tool := req.Params.Name
		if h.err != nil {
			return h.denial(tool, "the hook configuration could not be loaded; the call did not run"), nil
		}
		pre, post := h.r.Matching(hooks.PreToolUse, tool), h.r.Matching(hooks.PostToolUse, tool)
		if len(pre) == 0 && len(post) == 0 {
			return next(ctx, req)
		}
		input, err := json.Marshal(req.GetRawArguments())
		if err != nil || string(input) == "null" {
			input = []byte("{}")
		}
		call := hooks.Call{Tool: tool, Input: input}
		var added []string
		if len(pre) > 0 {
			out := h.r.Run(ctx, hooks.PreToolUse, call)
			h.audit(tool, out)
			if out.Blocked {
				return h.denial(tool, out.Reason+" (the call did not run)"), nil
			}
			added = append(added, out.Context)
		}
		res, err := next(ctx, req)
		if err != nil || res == nil {
			return res, err
		}
		if len(post) > 0 {
			if call.Response, err = json.Marshal(res); err != nil {
				return h.denial(tool, "the call ran, but its result could not be handed to the PostToolUse hooks, so it is withheld"), nil
			}
			out := h.r.Run(ctx, hooks.PostToolUse, call)
			h.audit(tool, out)
			if out.Blocked {
				return h.denial(tool, out.Reason+" (the call ran; its result is withheld)"), nil
			}
			added = append(added, out.Context)
		}
		for _, c := range added {
			if c != "" {
				res.Content = append(res.Content, mcp.NewTextContent("Context from the user's hooks:\n"+c))
			}
		}
		return res, nil
	}
}

// end runs the SessionEnd hooks; called before the session's processes are
// killed. A failure is reported to the operator only.
func (h *sessionHooks) end(ctx context.Context) {
	if h.r == nil || h.err != nil {
		return
	}
	out := h.r.Run(ctx, hooks.SessionEnd, hooks.Call{})
	h.audit("", out)
	if f := out.Failures(); len(f) > 0 {
		h.warnf("%s", strings.Join(f, "; "))
	}
}

// denial is the typed refusal the model reads when a hook stopped a call.
func (h *sessionHooks) denial(tool, text string) *mcp.CallToolResult {
	mode := string(h.s.Launcher.Policy().Mode())
	return tools.DenialResult(tools.Denial{Denied: true, Tool: tool, Mode: mode, Rule: HookRule}, text)
}

// audit writes one record per hook run.
func (h *sessionHooks) audit(tool string, out hooks.Outcome) {
	for _, r := range out.Runs {
		h.s.Audit.Hook(r, tool)
	}
}

// Hook records one hook run: the event, the tool, the hook by base name,
// how it ended (decision "hook-ok", "hook-blocked", "hook-failed") and its
// exit code; never its input or output.
func (a *Audit) Hook(r hooks.Run, tool string) {
	code := r.ExitCode
	rec := auditRecord{Tool: tool, Decision: "hook-" + string(r.Status), Rule: r.Hook.Event, Path: r.Hook.Name(), TimedOut: r.TimedOut}
	if code >= 0 {
		rec.ExitCode = &code
	}
	if rec.Tool == "" {
		rec.Tool = "session"
	}
	a.write(rec)
}

// warnf tells the person running the server (stderr) and, at its level,
// the session's client; never the model.
func (h *sessionHooks) warnf(format string, args ...any) {
	h.s.log.Warn(fmt.Sprintf(format, args...))
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
