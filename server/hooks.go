package server

import (
	"context"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// sessionHooks runs the configured hooks of one session (SessionStart,
// PreToolUse, PostToolUse, SessionEnd) through the session's launcher.
//
// TODO(issue 6): placeholder wiring only; the hooks package fills this in.
type sessionHooks struct {
	s *Session
	o Options
}

func newSessionHooks(o Options, s *Session) *sessionHooks { return &sessionHooks{s: s, o: o} }

// start runs the SessionStart hooks. warning is at most one summarised
// line for the person running the server (never the hook's raw stderr);
// context is extra text a hook asked to add to the preamble.
func (h *sessionHooks) start(ctx context.Context) (warning, context string) { return "", "" }

// middleware wraps every tool call with the PreToolUse and PostToolUse
// hooks whose matcher selects the tool.
func (h *sessionHooks) middleware(next mcpserver.ToolHandlerFunc) mcpserver.ToolHandlerFunc {
	return next
}

// end runs the SessionEnd hooks; called before the session's processes are
// killed.
func (h *sessionHooks) end(ctx context.Context) {}
