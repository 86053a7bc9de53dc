package server

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// call is the registered handler of one tool: every call of every tool,
// over either transport and whichever path it took there (the library,
// or the stdio lane), runs through this one function, top to bottom. It
// alone checks the arguments against the tool's input schema, turns a
// panic into an error, and refuses a missing result; the library encodes
// what it returns (the lane with the library's types).
func (h *Hub) call(f tools.Facts) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				res, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, r)
			}
		}()
		// 0. The arguments against the tool's input schema: a violation
		// is a tool error the model can read and correct.
		if err := h.schemas.check(f.Name, rawArguments(req)); err != nil {
			if s := h.lookup(ctx); s != nil && s.withheld(f.Name) {
				err = fmt.Errorf("%s", s.unavailable(f.Name)) // its schema unseen: found first (toolsearch.go)
			}
			return mcp.NewToolResultError(err.Error()), nil
		}
		res, err = h.pipeline(ctx, f, req)
		if res == nil && err == nil {
			err = fmt.Errorf("tool '%s' handler returned no result", req.Params.Name)
		}
		return res, err
	}
}

// rawArguments is the call's arguments as JSON, nil for none (absent, or
// null: both read as an empty object).
func rawArguments(req mcp.CallToolRequest) json.RawMessage {
	switch a := req.Params.Arguments.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return a
	}
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments
	}
	b, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil
	}
	return b
}

// pipeline is the call, in order.
func (h *Hub) pipeline(ctx context.Context, f tools.Facts, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() { countCall(h.o.Metrics, f.Name, res, err) }()
	// 1. The caller's session, marked busy (it never idles out while
	// a call runs).
	s := h.lookup(ctx)
	if s == nil {
		return mcp.NewToolResultError(errSessionless.Error()), nil
	}
	defer s.begin()()
	// A violation met during the call is told ahead of its result.
	defer s.flushViolations(ctx)
	// 2. Its roots, before its first call.
	if err := h.prepare(ctx, s); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	t, ok := s.tool(f.Name)
	if !ok {
		return mcp.NewToolResultError(s.unavailable(f.Name)), nil
	}
	// 3. The bound on the session's processes: a call that starts any
	// (the tool's own, or its hooks') takes a slot, or is refused at
	// once.
	if f.Processes || s.hooks.active(f.Name) {
		release, err := s.sb.ProcessCall()
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		defer release()
	}
	// A tool that computes over many files runs with every CPU.
	if f.Computes {
		defer h.procs.hold()()
	}
	started := time.Now()
	// 4. PreToolUse hooks: a block refuses the call before it runs.
	hc, blocked := s.hooks.before(ctx, f.Name, req.GetRawArguments())
	if blocked != nil {
		s.logCall(ctx, f.Name, time.Since(started), blocked, nil)
		return blocked, nil
	}
	// 5. The tool.
	res, err = t.Handler(ctx, req)
	if err != nil {
		s.logCall(ctx, f.Name, time.Since(started), nil, err)
		return nil, err
	}
	// 6. Approval: an outside-roots denial may ask the human, and
	// re-runs the one tool with one directory granted.
	res = h.approve(ctx, s, f, req, res)
	// 7. PostToolUse hooks: they see the final result, and may
	// withhold it.
	res = s.hooks.after(ctx, hc, res)
	s.logCall(ctx, f.Name, time.Since(started), res, nil)
	return res, nil
}

// approve asks the human, through elicitation, to allow one call of a tool
// whose facts permit it (Approval: "read" or "write"), refused for lying
// outside the roots, and re-runs that tool with that one directory granted
// when they accept. The model sees either the ordinary denial or the
// ordinary result: it cannot trigger an approval by any argument, answer
// it, or learn that one happened (docs/http.md, "Approval (escalation)").
func (h *Hub) approve(ctx context.Context, s *Session, f tools.Facts, req mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	name, op := f.Name, f.Approval
	if res == nil || !res.IsError || op == "" || s.sb.Files == nil {
		return res
	}
	// Only the outside-roots rule may be approved: a symlink, masked,
	// git-protected or invalid path is final and never asks.
	den, ok := tools.DenialOf(res)
	if !ok || den.Rule != confine.RuleOutside {
		return res
	}
	if h.t.caps(ctx).Elicitation == nil {
		return res
	}
	// Approval fatigue: one question at a time per session, and none for a
	// while after the human said no (the model could otherwise ask until
	// a tired human clicks yes).
	if !s.asking.TryLock() {
		s.sb.Audit.Escalation(name, "", "not-asked-another-pending")
		return res
	}
	defer s.asking.Unlock()
	if until := s.quietUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		s.sb.Audit.Escalation(name, "", "not-asked-after-decline")
		return res
	}
	path, _ := req.GetArguments()["path"].(string)
	abs, display, err := s.sb.Files.Resolve(path)
	if err != nil {
		return res
	}
	if confine.Within(abs, s.sb.Policy.Workdir()) {
		// The path names a place inside the worktree, so the walk left the
		// roots through a symlink: final, never a question (docs/http.md,
		// "Approval (escalation)").
		s.sb.Audit.Escalation(name, abs, "not-asked-symlink")
		return res
	}
	grant, err := s.sb.Files.Grant(filepath.Dir(abs))
	if err != nil {
		s.sb.Audit.Escalation(name, abs, "not-grantable")
		return res
	}
	defer grant.Close()
	actx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	answer, err := h.t.elicit(actx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params: mcp.ElicitationParams{
			// The path is the model's text: quoted, so a name holding a
			// newline or a sentence cannot pose as the server's words.
			Message: fmt.Sprintf("The agent's %s wants to %s %q, which is outside this session's %s sandbox roots. Allow this one %s? (Only this call; masked paths stay refused.)",
				name, op, display, s.sb.Policy.Mode(), op),
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"approve": map[string]any{"type": "boolean", "title": "Allow this one " + op, "default": false},
				},
				"required": []string{"approve"},
			},
		},
	})
	if err != nil {
		s.sb.Audit.Escalation(name, abs, "unanswered")
		return res
	}
	approved := false
	if answer.Action == mcp.ElicitationResponseActionAccept {
		if c, ok := answer.Content.(map[string]any); ok {
			approved, _ = c["approve"].(bool)
		}
	}
	if !approved {
		s.sb.Audit.Escalation(name, abs, "declined")
		s.quietUntil.Store(time.Now().Add(quietAfterDecline).UnixNano())
		return res
	}
	s.sb.Audit.Escalation(name, abs, "approved")
	if t, ok := tools.Build(name, s.deps(grant)); ok {
		if again, err := t.Handler(ctx, req); err == nil && again != nil {
			return again
		}
	}
	return res
}
