package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/evener-dev/evener-mcp/terminal"
	"github.com/evener-dev/evener-mcp/tools/internal/termsafe"
	"github.com/mark3labs/mcp-go/mcp"
)

// The terminal_* tools (docs/terminals.md, "Terminals"): interactive and long-running
// programs on a pseudo-terminal, under the session's sandbox, sharing the
// session's loopback with its shell calls. Package terminal does the work.

var (
	terminalStartFacts = Facts{Name: "terminal_start", Processes: true, Terminal: true}
	terminalSendFacts  = Facts{Name: "terminal_send", Terminal: true}
	terminalReadFacts  = Facts{Name: "terminal_read", Terminal: true}
	terminalCloseFacts = Facts{Name: "terminal_close", Terminal: true}
	terminalListFacts  = Facts{Name: "terminal_list", Terminal: true}
)

type terminalStartArgs struct {
	Command string `json:"command,omitempty"`
	Workdir string `json:"workdir,omitempty"`
	Cols    int    `json:"cols,omitempty"`
	Rows    int    `json:"rows,omitempty"`
}

// TerminalStartResult is terminal_start's structured result.
type TerminalStartResult struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
}

const terminalStartSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "Command line run with bash -c (default: an interactive bash)."},
    "workdir": {"type": "string", "description": "Working directory, relative to the worktree (default: the worktree)."},
    "cols": {"type": "integer", "minimum": 10, "maximum": 500, "description": "Columns (default 120)."},
    "rows": {"type": "integer", "minimum": 2, "maximum": 200, "description": "Rows (default 40)."}
  },
  "additionalProperties": false
}`

const terminalStartOutputSchema = `{
  "type": "object",
  "properties": {"id": {"type": "string"}, "backend": {"type": "string"}},
  "required": ["id", "backend"]
}`

// TerminalRecorder is implemented by an audit that records terminals
// (session.Audit): starts, sends (their size and named keys, never the
// text) and closes.
type TerminalRecorder interface {
	Terminal(tool, id, detail string, exitCode *int)
}

func (d Deps) recordTerminal(tool, id, detail string, exitCode *int) {
	if r, ok := d.Audit.(TerminalRecorder); ok && d.Audit != nil {
		r.Terminal(tool, id, detail, exitCode)
	}
}

func (d Deps) terminals() (*terminal.Set, error) {
	if d.Terminals == nil {
		return nil, errors.New("terminals are not available in this session")
	}
	return d.Terminals, nil
}

// TerminalStart starts a program on a pseudo-terminal in the sandbox.
func TerminalStart(d Deps) Tool {
	tool := mcp.NewTool("terminal_start",
		mcp.WithDescription("Start an interactive or long-running program (a REPL, a dev server, a TUI, a long build) on a terminal in the sandbox ("+string(d.Policy.Mode())+" mode, network "+string(d.Policy.Network())+"). It shares one loopback with this session's shell calls. Use terminal_send, terminal_read, terminal_close."),
		schemas(terminalStartSchema, terminalStartOutputSchema),
		annotations("Start a terminal", false, true, false, d.Policy.Network() == "on"),
	)
	return d.tool(terminalStartFacts, tool, handler(d, terminalStartFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a terminalStartArgs) (*mcp.CallToolResult, error) {
		set, err := d.terminals()
		if err != nil {
			return nil, err
		}
		t, err := set.Start(terminal.StartOptions{Command: a.Command, Workdir: a.Workdir, Cols: a.Cols, Rows: a.Rows})
		if err != nil {
			return nil, err
		}
		d.recordTerminal("terminal_start", t.ID, t.Command, nil)
		r := TerminalStartResult{ID: t.ID, Backend: t.Backend}
		return mcp.NewToolResultStructured(r, fmt.Sprintf("terminal %s started (backend %s)", t.ID, t.Backend)), nil
	}))
}

type terminalSendArgs struct {
	ID   string   `json:"id"`
	Text string   `json:"text,omitempty"`
	Keys []string `json:"keys,omitempty"`
}

const terminalSendSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "minLength": 1},
    "text": {"type": "string", "description": "Text typed as is (no Enter unless keys has one)."},
    "keys": {"type": "array", "items": {"type": "string"}, "description": "Keys sent after text: Enter, Tab, Esc, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, F1-F12, C-c (control-c), M-x (alt-x)."}
  },
  "required": ["id"],
  "additionalProperties": false
}`

const terminalOKOutputSchema = `{
  "type": "object",
  "properties": {"id": {"type": "string"}},
  "required": ["id"]
}`

// TerminalSend types text and keys into a terminal.
func TerminalSend(d Deps) Tool {
	tool := mcp.NewTool("terminal_send",
		mcp.WithDescription("Type text and named keys into a terminal. Read the answer with terminal_read."),
		schemas(terminalSendSchema, terminalOKOutputSchema),
		annotations("Type into a terminal", false, true, false, false),
	)
	return d.tool(terminalSendFacts, tool, handler(d, terminalSendFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a terminalSendArgs) (*mcp.CallToolResult, error) {
		set, err := d.terminals()
		if err != nil {
			return nil, err
		}
		if err := set.Send(a.ID, a.Text, a.Keys); err != nil {
			return nil, err
		}
		d.recordTerminal("terminal_send", a.ID, fmt.Sprintf("%d bytes of text, keys %s", len(a.Text), strings.Join(a.Keys, " ")), nil)
		return mcp.NewToolResultStructured(map[string]any{"id": a.ID}, "sent"), nil
	}))
}

type terminalReadArgs struct {
	ID     string `json:"id"`
	WaitMS int64  `json:"wait_ms,omitempty"`
	View   string `json:"view,omitempty"`
}

const terminalReadSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "minLength": 1},
    "wait_ms": {"type": "integer", "minimum": 0, "maximum": 30000, "description": "Wait up to this long for output to arrive and go quiet, or for the program to end (default 0)."},
    "view": {"type": "string", "enum": ["output", "screen"], "description": "output (default): text written since the last output read, escape sequences removed. screen: the rendered screen rows and the cursor."}
  },
  "required": ["id"],
  "additionalProperties": false
}`

const terminalReadOutputSchema = `{
  "type": "object",
  "properties": {
    "text": {"type": "string"},
    "exited": {"type": "boolean"},
    "exit_code": {"type": "integer"},
    "dropped_bytes": {"type": "integer"},
    "cursor_row": {"type": "integer"},
    "cursor_col": {"type": "integer"},
    "screen_degraded": {"type": "boolean", "description": "Screen view: some output was not rendered (the terminal went over its share of the server's CPU); the screen may be incomplete, the output view is not."},
    "unrendered_bytes": {"type": "integer"}
  },
  "required": ["text", "exited"]
}`

// TerminalRead returns a terminal's new output or its screen.
func TerminalRead(d Deps) Tool {
	tool := mcp.NewTool("terminal_read",
		mcp.WithDescription("Read a terminal: its output since the last read (escape sequences removed) or its rendered screen, waiting up to wait_ms for output to settle or the program to end."),
		schemas(terminalReadSchema, terminalReadOutputSchema),
		annotations("Read a terminal", true, false, false, false),
	)
	return d.tool(terminalReadFacts, tool, handler(d, terminalReadFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a terminalReadArgs) (*mcp.CallToolResult, error) {
		set, err := d.terminals()
		if err != nil {
			return nil, err
		}
		r, err := set.Read(ctx, a.ID, time.Duration(a.WaitMS)*time.Millisecond, a.View)
		if err != nil {
			return nil, err
		}
		// The human watching the client may be at a terminal too.
		r.Text = termsafe.Clean(r.Text)
		var b strings.Builder
		b.WriteString(r.Text)
		if r.Dropped > 0 {
			fmt.Fprintf(&b, "\n[%d earlier bytes dropped: the scrollback bound]", r.Dropped)
		}
		if r.ScreenDegraded {
			fmt.Fprintf(&b, "\n[screen degraded: %d bytes of output were not rendered (this terminal went over its share of the server's CPU); the screen may be incomplete; view=output has all of it]", r.Unrendered)
		}
		if r.Exited {
			fmt.Fprintf(&b, "\n[exited with status %d]", *r.ExitCode)
		}
		return mcp.NewToolResultStructured(r, b.String()), nil
	}))
}

type terminalIDArgs struct {
	ID string `json:"id"`
}

const terminalIDSchema = `{
  "type": "object",
  "properties": {"id": {"type": "string", "minLength": 1}},
  "required": ["id"],
  "additionalProperties": false
}`

const terminalCloseOutputSchema = `{
  "type": "object",
  "properties": {"exited": {"type": "boolean"}, "exit_code": {"type": "integer"}, "text": {"type": "string"}},
  "required": ["exited"]
}`

// TerminalClose ends a terminal's whole process tree.
func TerminalClose(d Deps) Tool {
	tool := mcp.NewTool("terminal_close",
		mcp.WithDescription("Close a terminal: kills its program and everything it started."),
		schemas(terminalIDSchema, terminalCloseOutputSchema),
		annotations("Close a terminal", false, true, true, false),
	)
	return d.tool(terminalCloseFacts, tool, handler(d, terminalCloseFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a terminalIDArgs) (*mcp.CallToolResult, error) {
		set, err := d.terminals()
		if err != nil {
			return nil, err
		}
		r, err := set.Close(a.ID)
		if err != nil {
			return nil, err
		}
		d.recordTerminal("terminal_close", a.ID, "", r.ExitCode)
		r.Text = termsafe.Clean(r.Text)
		return mcp.NewToolResultStructured(r, "terminal "+a.ID+" closed"), nil
	}))
}

const terminalListOutputSchema = `{
  "type": "object",
  "properties": {"terminals": {"type": "array", "items": {"type": "object",
    "properties": {"id": {"type": "string"}, "command": {"type": "string"}, "backend": {"type": "string"},
      "exited": {"type": "boolean"}, "exit_code": {"type": "integer"}, "started": {"type": "string"}},
    "required": ["id", "command", "backend", "exited", "started"]}}},
  "required": ["terminals"]
}`

// TerminalList lists the session's terminals.
func TerminalList(d Deps) Tool {
	tool := mcp.NewTool("terminal_list",
		mcp.WithDescription("List this session's terminals."),
		schemas(`{"type": "object", "properties": {}, "additionalProperties": false}`, terminalListOutputSchema),
		annotations("List terminals", true, false, true, false),
	)
	return d.tool(terminalListFacts, tool, handler(d, terminalListFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
		set, err := d.terminals()
		if err != nil {
			return nil, err
		}
		ts := set.List()
		var b strings.Builder
		for _, t := range ts {
			state := "running"
			if t.Exited {
				state = fmt.Sprintf("exited %d", *t.ExitCode)
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", t.ID, state, t.Backend, termsafe.Clean(t.Command))
		}
		if len(ts) == 0 {
			b.WriteString("no terminals")
		}
		return mcp.NewToolResultStructured(map[string]any{"terminals": ts}, strings.TrimRight(b.String(), "\n")), nil
	}))
}
