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
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
)

// sessionHooks runs the configured hooks of one session (SessionStart,
// PreToolUse, PostToolUse, SessionEnd) through the session's launcher, under
// the session's sandbox (package hooks has the protocol).
type sessionHooks struct {
	s *Session
	r *hooks.Runner
	// err is set when the configured hooks could not be loaded: every
	// tool call is then refused rather than run unchecked.
	err error
}

// HookRule is the rule of a denial a hook caused.
const HookRule = "hook"

func newSessionHooks(s *Session) *sessionHooks {
	h := &sessionHooks{s: s}
	var hs []hooks.Hook
	if cfg := s.h.o.Config; cfg != nil {
		for _, ev := range config.HookEvents {
			for _, c := range cfg.Hooks[ev] {
				hs = append(hs, hooks.Hook{Event: ev, Matcher: c.Matcher, Command: c.Command, Timeout: msDuration(c.TimeoutMs)})
			}
		}
	}
	if len(hs) == 0 {
		return h
	}
	h.r, h.err = hooks.New(s.sb.Launcher, s.sb.ID, hs)
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
	for _, g := range h.s.sb.Launcher.Policy().HookGrants() {
		if g.Refused != "" && h.s.sb.Launcher.Policy().Mode() != confine.ModeOff {
			h.s.h.warnOnce("hooks: %s is not run under the sandbox: %s (%s); the hook fails each time it is due", g.Command, g.Refused, g.Detail)
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

// hookCall is one tool call as the PreToolUse and PostToolUse hooks see
// it, and the context they added.
type hookCall struct {
	call      hooks.Call
	pre, post bool
	added     []string
}

// active reports whether tool has any PreToolUse or PostToolUse hook (or
// the hooks could not be loaded, which refuses every call).
func (h *sessionHooks) active(tool string) bool {
	return h.err != nil || (h.r != nil && (len(h.r.Matching(hooks.PreToolUse, tool)) > 0 || len(h.r.Matching(hooks.PostToolUse, tool)) > 0))
}

// before runs the PreToolUse hooks whose matcher selects the tool. A
// non-nil result refuses the call before it runs (a block or a failure: a
// typed denial with rule "hook").
func (h *sessionHooks) before(ctx context.Context, tool string, args any) (*hookCall, *mcp.CallToolResult) {
	if h.err != nil {
		return nil, h.denial(tool, "the hook configuration could not be loaded; the call did not run")
	}
	if h.r == nil {
		return nil, nil
	}
	hc := &hookCall{pre: len(h.r.Matching(hooks.PreToolUse, tool)) > 0, post: len(h.r.Matching(hooks.PostToolUse, tool)) > 0}
	if !hc.pre && !hc.post {
		return nil, nil
	}
	input, err := json.Marshal(args)
	if err != nil || string(input) == "null" {
		input = []byte("{}")
	}
	hc.call = hooks.Call{Tool: tool, Input: input}
	if hc.pre {
		out := h.r.Run(ctx, hooks.PreToolUse, hc.call)
		h.audit(tool, out)
		if out.Blocked {
			return nil, h.denial(tool, out.Reason+" (the call did not run)")
		}
		hc.added = append(hc.added, out.Context)
	}
	return hc, nil
}

// after runs the PostToolUse hooks over the call's result: a block or a
// failure withholds it (a typed denial with rule "hook"); context the hooks
// added is appended to it.
func (h *sessionHooks) after(ctx context.Context, hc *hookCall, res *mcp.CallToolResult) *mcp.CallToolResult {
	if hc == nil || res == nil {
		return res
	}
	tool := hc.call.Tool
	if hc.post {
		resp, err := json.Marshal(res)
		if err != nil {
			return h.denial(tool, "the call ran, but its result could not be handed to the PostToolUse hooks, so it is withheld")
		}
		hc.call.Response = resp
		out := h.r.Run(ctx, hooks.PostToolUse, hc.call)
		h.audit(tool, out)
		if out.Blocked {
			return h.denial(tool, out.Reason+" (the call ran; its result is withheld)")
		}
		hc.added = append(hc.added, out.Context)
	}
	var added []string
	for _, c := range hc.added {
		if c != "" {
			res.Content = append(res.Content, mcp.NewTextContent("Context from the user's hooks:\n"+c))
			added = append(added, c)
		}
	}
	// In the structured content too: some clients hand the model only
	// that (docs/hooks.md).
	tools.AddHookContext(res, added)
	return res
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
	mode := string(h.s.sb.Launcher.Policy().Mode())
	return tools.DenialResult(tools.Denial{Denied: true, Tool: tool, Mode: mode, Rule: HookRule}, text)
}

// audit writes one record per hook run.
func (h *sessionHooks) audit(tool string, out hooks.Outcome) {
	for _, r := range out.Runs {
		auditHook(h.s.sb.Audit, r, tool)
	}
}

// auditHook records one hook run: the event, the tool, the hook by base
// name, how it ended (decision "hook-ok", "hook-blocked", "hook-failed")
// and its exit code; never its input or output.
func auditHook(a *session.Audit, r hooks.Run, tool string) {
	code := r.ExitCode
	rec := session.Record{Tool: tool, Decision: "hook-" + string(r.Status), Rule: r.Hook.Event, Path: r.Hook.Name(), TimedOut: r.TimedOut}
	if code >= 0 {
		rec.ExitCode = &code
	}
	if rec.Tool == "" {
		rec.Tool = "session"
	}
	a.Write(rec)
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
