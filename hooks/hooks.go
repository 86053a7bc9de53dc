// Package hooks runs the hook commands a trusted configuration declares
// (SessionStart, PreToolUse, PostToolUse, SessionEnd), each through the
// session's confine.Launcher: under the session's own sandbox, with
// the read/exec grant on its directory that confine derived from the same
// configuration (docs/hooks.md, "Hooks"). This package
// starts no process itself and imports only confine and the standard
// library.
//
// # Protocol
//
// A hook is an absolute path executed directly (no shell), in the worktree,
// with one JSON object on stdin:
//
//	{"session_id": "...", "hook_event_name": "PreToolUse", "cwd": "/abs/worktree",
//	 "tool_name": "shell", "tool_input": {"command": "make test"}}
//
// PostToolUse adds "tool_response", the tool's MCP result (content,
// structuredContent, isError). SessionStart and SessionEnd carry no tool.
//
// How it ends decides:
//
//   - exit 0: continue. If stdout is a JSON object, it may say more (see
//     below); other stdout is ignored.
//   - exit 2 (PreToolUse, PostToolUse): block. The hook's stderr, trimmed,
//     stripped of control and escape sequences, with the worktree's path
//     made relative, and cut at MaxReason bytes, is the reason the model
//     reads.
//   - anything else, a timeout, an unreadable JSON object on stdout, more
//     than MaxStdout bytes of stdout, or a hook the sandbox cannot serve:
//     the hook failed. A failed PreToolUse hook blocks the call and a failed
//     PostToolUse hook withholds its result, with a summary naming the hook
//     and its exit code, never its stderr: a hook is the user's gate, and a
//     gate that could not run must not wave the call through (fail closed).
//     A failed SessionStart or SessionEnd hook is reported (one summarised
//     line) and the session goes on.
//
// The JSON a hook may print on exit 0 is a subset of Claude Code's:
//
//	{"decision": "block", "reason": "..."}            block (PreToolUse, PostToolUse)
//	{"additionalContext": "..."}                      add context for the model
//	{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "...",
//	                        "additionalContext": "..."}}
//
// "deny" and "ask" (there is no one to ask) block like "block"; "allow",
// "approve" and an absent decision continue. Context from SessionStart
// hooks joins the session's preamble; from tool hooks, the tool's result.
//
// A PreToolUse block means the tool does not run. A PostToolUse block
// means the tool ran but its result is withheld from the model and
// replaced by the reason (a scanner can keep a secret the call printed out
// of the model's context).
//
// Hooks of one event run one after another in configuration order; for the
// tool events the first block ends the run.
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
)

// The events a hook may be declared for.
const (
	SessionStart = "SessionStart"
	PreToolUse   = "PreToolUse"
	PostToolUse  = "PostToolUse"
	SessionEnd   = "SessionEnd"
)

// Events lists every event, in the order a session meets them.
var Events = []string{SessionStart, PreToolUse, PostToolUse, SessionEnd}

// Bounds on what a hook may take and say.
const (
	// DefaultTimeout applies to a hook configured without one.
	DefaultTimeout = 60 * time.Second
	// MaxStdout is the most stdout read from a hook; more fails the hook.
	MaxStdout = 64 << 10
	// MaxStderr is the most stderr kept; the rest is dropped.
	MaxStderr = 64 << 10
	// MaxReason bounds a block reason the model reads.
	MaxReason = 2000
	// MaxContext bounds the context one event's hooks add.
	MaxContext = 8 << 10
)

// Hook is one configured hook.
type Hook struct {
	Event string
	// Matcher is a regular expression over tool names, matched against the
	// whole name ("shell|write_file"); "" matches every tool. Ignored for
	// the session events.
	Matcher string
	// Command is the absolute path of the program, as configured.
	Command string
	// Timeout kills the hook (and everything it started); 0 means
	// DefaultTimeout.
	Timeout time.Duration
}

// Name is how the hook is named to the model: its command's base name.
func (h Hook) Name() string { return filepath.Base(h.Command) }

type compiled struct {
	Hook
	re *regexp.Regexp
}

// Runner runs one session's hooks. It is safe for concurrent use.
type Runner struct {
	sess      *confine.Launcher
	sessionID string
	hooks     []compiled
}

// New checks hs and returns their runner for the session.
func New(sess *confine.Launcher, sessionID string, hs []Hook) (*Runner, error) {
	r := &Runner{sess: sess, sessionID: sessionID}
	for i, h := range hs {
		where := fmt.Sprintf("hook %d (%s %s)", i, h.Event, h.Command)
		if !slices.Contains(Events, h.Event) {
			return nil, fmt.Errorf("%s: unknown event (want %s)", where, strings.Join(Events, ", "))
		}
		if !filepath.IsAbs(h.Command) {
			return nil, fmt.Errorf("%s: the command is not an absolute path", where)
		}
		if h.Timeout < 0 {
			return nil, fmt.Errorf("%s: negative timeout", where)
		}
		if h.Timeout == 0 {
			h.Timeout = DefaultTimeout
		}
		re, err := regexp.Compile(`^(?:` + h.Matcher + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%s: matcher: %w", where, err)
		}
		r.hooks = append(r.hooks, compiled{Hook: h, re: re})
	}
	return r, nil
}

// Matching returns the hooks of event that apply to tool (every hook of a
// session event).
func (r *Runner) Matching(event, tool string) []Hook {
	if r == nil {
		return nil
	}
	var out []Hook
	for _, h := range r.hooks {
		if h.Event != event {
			continue
		}
		if (event == PreToolUse || event == PostToolUse) && h.Matcher != "" && !h.re.MatchString(tool) {
			continue
		}
		out = append(out, h.Hook)
	}
	return out
}

// Call is what a tool event's hooks are told about the call.
type Call struct {
	Tool string
	// Input is the call's arguments (a JSON object).
	Input json.RawMessage
	// Response is the tool's result (PostToolUse only).
	Response json.RawMessage
}

// Status is how one hook run ended.
type Status string

const (
	// StatusOK: the hook ran and let the call (or session) continue.
	StatusOK Status = "ok"
	// StatusBlocked: the hook blocked the call (exit 2 or a JSON block).
	StatusBlocked Status = "blocked"
	// StatusFailed: the hook failed (see the package doc).
	StatusFailed Status = "failed"
)

// Run is the record of one hook run.
type Run struct {
	Hook     Hook
	Status   Status
	ExitCode int // -1 when it did not run or was killed by a timeout
	TimedOut bool
	// Summary is one line naming the hook: what happened, never its stderr
	// nor a host path. Empty for StatusOK.
	Summary string
	// Detail is the operator's version of a failure (may name paths).
	Detail string
}

// Outcome is what one event's hooks decided.
type Outcome struct {
	// Blocked is set when a tool event's hook blocked or failed.
	Blocked bool
	// Reason is what the model reads about a block: the hook's own reason
	// (bounded, sanitised) or the failure summary.
	Reason string
	// Context is the additional context the hooks asked for (sanitised,
	// bounded by MaxContext in all).
	Context string
	Runs    []Run
}

// Failures returns the summaries of the runs that failed.
func (o Outcome) Failures() []string {
	var out []string
	for _, r := range o.Runs {
		if r.Status == StatusFailed {
			out = append(out, r.Summary)
		}
	}
	return out
}

type input struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	Cwd           string          `json:"cwd"`
	ToolName      string          `json:"tool_name,omitempty"`
	ToolInput     json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse  json.RawMessage `json:"tool_response,omitempty"`
}

// Run runs event's hooks that apply to call.Tool, one after another. For
// the tool events the first block (or failure) ends the run.
func (r *Runner) Run(ctx context.Context, event string, call Call) Outcome {
	var out Outcome
	hs := r.Matching(event, call.Tool)
	if len(hs) == 0 {
		return out
	}
	in := input{SessionID: r.sessionID, HookEventName: event, Cwd: r.sess.Policy().Workdir()}
	if event == PreToolUse || event == PostToolUse {
		in.ToolName, in.ToolInput = call.Tool, call.Input
		if len(in.ToolInput) == 0 {
			in.ToolInput = json.RawMessage("{}")
		}
		if event == PostToolUse {
			in.ToolResponse = call.Response
		}
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		// Only a malformed RawMessage can do this; the hooks cannot be
		// told about the call, which fails them.
		for _, h := range hs {
			out.Runs = append(out.Runs, Run{Hook: h, Status: StatusFailed, ExitCode: -1,
				Summary: fmt.Sprintf("%s hook %q could not be given the call: %v", event, h.Name(), err)})
		}
		if event == PreToolUse || event == PostToolUse {
			out.Blocked, out.Reason = true, out.Runs[0].Summary
		}
		return out
	}
	tool := event == PreToolUse || event == PostToolUse
	var ctxs []string
	for _, h := range hs {
		run, reason, addCtx := r.runOne(ctx, h, stdin)
		out.Runs = append(out.Runs, run)
		if addCtx != "" && run.Status != StatusFailed {
			ctxs = append(ctxs, addCtx)
		}
		if tool && run.Status != StatusOK {
			out.Blocked = true
			out.Reason = reason
			break
		}
	}
	out.Context = clip(strings.Join(ctxs, "\n"), MaxContext)
	return out
}

// runOne runs h and reads its verdict: the run, the block reason (for a
// block or a failure) and the context it asked to add.
func (r *Runner) runOne(ctx context.Context, h Hook, stdin []byte) (run Run, reason, addCtx string) {
	run = Run{Hook: h, ExitCode: -1}
	name := h.Name()
	fail := func(summary, detail string) (Run, string, string) {
		run.Status, run.Summary, run.Detail = StatusFailed, summary, detail
		return run, summary, ""
	}
	p := r.sess.Policy()
	path, err := p.HookCommand(h.Command)
	if err != nil {
		// confine's reason names no host path.
		return fail(fmt.Sprintf("%s hook %q could not run: %v", h.Event, name, err), err.Error())
	}
	stdout := &capped{max: MaxStdout}
	stderr := &capped{max: MaxStderr}
	res, err := r.sess.Run(ctx, confine.Command{
		Args: []string{path}, Stdin: bytes.NewReader(stdin),
		Stdout: stdout, Stderr: stderr, Timeout: h.Timeout,
	})
	switch {
	case err != nil:
		return fail(fmt.Sprintf("%s hook %q could not start in the sandbox", h.Event, name), err.Error())
	case ctx.Err() != nil:
		run.TimedOut = res.TimedOut
		return fail(fmt.Sprintf("%s hook %q was cancelled (the call or the session ended first)", h.Event, name), "")
	case res.TimedOut:
		run.TimedOut = true
		return fail(fmt.Sprintf("%s hook %q timed out after %s", h.Event, name, h.Timeout), "")
	}
	run.ExitCode = res.ExitCode
	tool := h.Event == PreToolUse || h.Event == PostToolUse
	switch {
	case res.ExitCode == 2 && tool:
		run.Status = StatusBlocked
		why := Sanitize(stderr.String(), p.Workdir(), MaxReason)
		if why == "" {
			why = "no reason given"
		}
		return run, fmt.Sprintf("%s hook %q: %s", h.Event, name, why), ""
	case res.Signal != "":
		return fail(fmt.Sprintf("%s hook %q was ended by a signal (%s, exit %d)", h.Event, name, res.Signal, res.ExitCode), "")
	case res.ExitCode != 0:
		return fail(fmt.Sprintf("%s hook %q failed (exit %d)", h.Event, name, res.ExitCode), "")
	case stdout.over:
		return fail(fmt.Sprintf("%s hook %q failed (exit 0, but more than %d bytes of stdout)", h.Event, name, MaxStdout), "")
	}
	v, err := parseOutput(stdout.Bytes())
	if err != nil {
		return fail(fmt.Sprintf("%s hook %q failed (exit 0, but its JSON output is unreadable: %s)", h.Event, name, err), "")
	}
	run.Status = StatusOK
	addCtx = Sanitize(v.context, p.Workdir(), MaxContext)
	if v.block && tool {
		run.Status = StatusBlocked
		why := Sanitize(v.reason, p.Workdir(), MaxReason)
		if why == "" {
			why = "no reason given"
		}
		return run, fmt.Sprintf("%s hook %q: %s", h.Event, name, why), addCtx
	}
	return run, "", addCtx
}

// verdict is what a hook's JSON stdout says.
type verdict struct {
	block           bool
	reason, context string
}

// output is the JSON a hook may print on exit 0.
type output struct {
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	AdditionalContext  string `json:"additionalContext"`
	HookSpecificOutput *struct {
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
		AdditionalContext        string `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// parseOutput reads stdout: a JSON object (leading and trailing space
// allowed) is the hook's verdict; anything not starting with "{" is plain
// output and says nothing. An object that cannot be read is an error: the
// hook meant to say something.
func parseOutput(b []byte) (verdict, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return verdict{}, nil
	}
	var o output
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&o); err != nil {
		return verdict{}, errors.New("not a JSON object of the documented shape")
	}
	if dec.More() {
		return verdict{}, errors.New("more than one JSON value")
	}
	var v verdict
	var ctxs []string
	if o.AdditionalContext != "" {
		ctxs = append(ctxs, o.AdditionalContext)
	}
	decide := func(d, reason string, blocking ...string) error {
		switch {
		case d == "" || d == "allow" || d == "approve":
		case slices.Contains(blocking, d):
			v.block = true
			if v.reason == "" {
				v.reason = reason
			}
		default:
			return fmt.Errorf("unknown decision %q", clip(d, 40))
		}
		return nil
	}
	if err := decide(o.Decision, o.Reason, "block", "deny"); err != nil {
		return verdict{}, err
	}
	if hs := o.HookSpecificOutput; hs != nil {
		if err := decide(hs.PermissionDecision, hs.PermissionDecisionReason, "deny", "ask", "block"); err != nil {
			return verdict{}, err
		}
		if hs.AdditionalContext != "" {
			ctxs = append(ctxs, hs.AdditionalContext)
		}
	}
	v.context = strings.Join(ctxs, "\n")
	return v, nil
}

// capped keeps the first max bytes written and notes that there were more.
// The buffer is a field, not embedded: an embedded bytes.Buffer would lend
// capped its ReadFrom, and io.Copy would bypass the bound.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }
