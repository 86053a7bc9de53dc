// Package tools defines the MCP tools evener-mcp publishes: the file and
// shell tools over the worktree (one file each), the memory tools
// (memory.go) and the terminal tools (terminal.go). Each is a constructor
// returning a Tool (the definition, its handler and its Facts); the
// constructors list is the single registration list, in publishing order,
// and All, Catalog and Names read it.
//
// # Rules every tool follows
//
//   - Files are reached only through confine.FileAccess and processes are
//     started only through the session's confine.Launcher (directly, or by
//     the terminal package's terminals): no tool imports os/exec or opens
//     a file itself (a test enforces it).
//   - Failures the model should read are tool results with isError set;
//     refusals carry a structured denial (tool, mode, path, rule). Go errors
//     are kept for faults of the server itself.
//   - Paths in results are workdir-relative where they lie in the workdir,
//     and messages never echo a host path of a secret.
//   - Every size is capped with a clear error.
package tools

import (
	"context"
	"errors"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/memory"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/terminal"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Bounds bounds what one call may read, write or return.
type Bounds struct {
	ReadBytes    int64         // a read_file result
	WriteBytes   int64         // write_file content, an edited file
	PatchBytes   int64         // an apply_patch patch
	ShellOutput  int           // head+tail kept of a shell call's output
	ShellMax     time.Duration // the longest timeout_ms honoured
	ShellTimeout time.Duration // the default when timeout_ms is absent
	ListEntries  int           // list_dir entries per directory
	Results      int           // glob paths / grep matches by default
}

// DefaultBounds are sized for a model's context.
var DefaultBounds = Bounds{
	ReadBytes:    10 << 20,
	WriteBytes:   10 << 20,
	PatchBytes:   10 << 20,
	ShellOutput:  1 << 20,
	ShellMax:     30 * time.Minute,
	ShellTimeout: 10 * time.Minute,
	ListEntries:  2000,
	Results:      500,
}

// Recorder receives every decision worth auditing. Implementations apply
// the redaction contract (docs/tools.md, "The tools"): mode, tool, redacted path, truncated
// command; never file contents, never a full secret path.
type Recorder interface {
	Denied(tool string, d *confine.Denial)
	Shell(command string, res confine.Result, violations int)
	// Violated records violations a tool found itself (docs/observability.md,
	// "Violations"); egress refusals are recorded as they happen.
	Violated(tool string, vs []session.Violation)
}

// Deps is what the tools stand on; one per session.
type Deps struct {
	Policy   *confine.Policy
	Launcher *confine.Launcher
	Files    *confine.FileAccess
	// Memory is the session's memory (nil: none; the memory tools say so).
	Memory *memory.Store
	// Terminals are the session's terminals (nil: none; the terminal
	// tools say so).
	Terminals *terminal.Set
	Audit     Recorder
	Bounds    Bounds
	// Notify sends a notification about the call in ctx (progress) so
	// that it reaches the client before the call's result; nil sends
	// through the MCP library's session channel.
	Notify func(ctx context.Context, method string, params map[string]any)
	// NetViolations returns the egress refusals recorded in [from, to]
	// (nil when the session has no network bridge).
	NetViolations func(from, to time.Time) []session.Violation
}

// Tool is one tool: its MCP definition and handler, and its facts.
type Tool struct {
	server.ServerTool
	Facts
}

// Facts are what the rest of the server needs to know about a tool,
// declared once, beside the tool (each tool's file), and read by the
// session's policy, the call pipeline and the transports.
type Facts struct {
	Name string
	// Changes says the tool changes files: a session without any such
	// tool runs its shell read-only (docs/http.md, "Narrower sessions": the
	// delegate floor).
	Changes bool
	// Approval is "read" or "write" when a denial for lying outside the
	// roots may ask the human to allow the one call (docs/http.md, "Approval
	// (escalation)"); "" never asks.
	Approval string
	// Processes says the tool starts processes: its calls count against
	// the session's max_concurrent_calls.
	Processes bool
	// Files says the tool needs the confined file layer; a build without
	// one offers only the tools that do not.
	Files bool
	// Terminal says the tool works on the session's terminals (docs/terminals.md,
	// "Terminals"): a session that cannot have them offers none of these.
	Terminal bool
	// Memory is "read" or "write" for the memory tools (docs/memory.md,
	// "Memory"): they need the session's memory, not its file layer, and
	// a session without a tool that Changes files gets the "read" ones
	// only; "" for every other tool.
	Memory string
	// Computes says the tool's work is the server's own CPU across many
	// files (grep, glob): a stdio server, which otherwise keeps a
	// scheduler slot fewer than CPUs, uses every CPU while one runs.
	Computes bool
}

// constructors build each tool, in the order they are published.
var constructors = []struct {
	facts Facts
	build func(Deps) Tool
}{
	{readFileFacts, ReadFile}, {writeFileFacts, WriteFile}, {editFileFacts, EditFile}, {applyPatchFacts, ApplyPatch},
	{globFacts, Glob}, {grepFacts, Grep}, {listDirFacts, ListDir}, {shellFacts, Shell},
	{memoryViewFacts, MemoryView}, {memoryWriteFacts, MemoryWrite}, {memoryEditFacts, MemoryEdit},
	{memorySearchFacts, MemorySearch}, {memoryDeleteFacts, MemoryDelete},
	{terminalStartFacts, TerminalStart}, {terminalSendFacts, TerminalSend}, {terminalReadFacts, TerminalRead},
	{terminalCloseFacts, TerminalClose}, {terminalListFacts, TerminalList},
}

// All returns every tool in the order they are published.
func All(d Deps) []Tool {
	out := make([]Tool, 0, len(constructors))
	for _, c := range constructors {
		out = append(out, c.build(d))
	}
	return out
}

// Build returns the one tool called name (an approved call re-runs just
// that tool with a wider file layer).
func Build(name string, d Deps) (Tool, bool) {
	for _, c := range constructors {
		if c.facts.Name == name {
			return c.build(d), true
		}
	}
	return Tool{}, false
}

// Catalog lists every tool's facts, in publishing order.
func Catalog() []Facts {
	out := make([]Facts, 0, len(constructors))
	for _, c := range constructors {
		out = append(out, c.facts)
	}
	return out
}

// FactsOf returns the facts of the tool called name.
func FactsOf(name string) (Facts, bool) {
	for _, c := range constructors {
		if c.facts.Name == name {
			return c.facts, true
		}
	}
	return Facts{}, false
}

// Names lists the tool names, in publishing order.
func Names() []string {
	var out []string
	for _, f := range Catalog() {
		out = append(out, f.Name)
	}
	return out
}

// ChangesFiles reports whether any of the named tools changes files.
func ChangesFiles(names []string) bool {
	for _, n := range names {
		if f, ok := FactsOf(n); ok && f.Changes {
			return true
		}
	}
	return false
}

// tool pairs a definition and handler with the tool's facts.
func (d Deps) tool(f Facts, def mcp.Tool, h server.ToolHandlerFunc) Tool {
	return Tool{ServerTool: server.ServerTool{Tool: def, Handler: h}, Facts: f}
}

// annotations sets all four hints explicitly: mcp-go presets destructive
// and open-world to true, which would be wrong for most of these tools.
func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    mcp.ToBoolPtr(readOnly),
		DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint:  mcp.ToBoolPtr(idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(openWorld),
	})
}

// schemas sets the hand-written input and output schemas. mcp.NewTool
// presets a structured input schema of type object; it must be cleared or
// the definition carries two schemas and cannot be marshalled.
func schemas(in, out string) mcp.ToolOption {
	return func(t *mcp.Tool) {
		t.InputSchema = mcp.ToolInputSchema{}
		t.RawInputSchema = []byte(in)
		t.OutputSchema = mcp.ToolOutputSchema{}
		t.RawOutputSchema = []byte(withHookContext(out))
	}
}

// DenialMetaKey is where a refusal's typed Denial travels: the result's
// _meta (docs/tools.md, "Denials"). It is not the structured content, because
// strict clients validate structuredContent against the tool's output
// schema even on error results, and no tool's output schema describes a
// refusal.
const DenialMetaKey = "evener-mcp/denial"

// Denial is the typed, machine-readable form of a refusal.
type Denial struct {
	Denied bool   `json:"denied"`
	Tool   string `json:"tool"`
	Mode   string `json:"mode"`
	Path   string `json:"path"`
	Rule   string `json:"rule"`
}

// changesFiles are the tools whose Facts say Changes, by name (filled at
// init: failure cannot read constructors, which refer to it).
var changesFiles = map[string]bool{}

func init() {
	for _, c := range constructors {
		changesFiles[c.facts.Name] = c.facts.Changes
	}
}

// failure turns an error into the result the model reads. A confine.Denial
// becomes a typed, audited refusal; anything else a plain error result.
func (d Deps) failure(tool string, err error) *mcp.CallToolResult {
	var den *confine.Denial
	if errors.As(err, &den) {
		if d.Audit != nil {
			rec := den
			if den.Op == "resolve" && changesFiles[tool] {
				// A path refused before any operation, by a tool that
				// writes: recorded as the write it was for (docs/observability.md,
				// "Violations": file-read or file-write).
				c := *den
				c.Op, rec = "write", &c
			}
			d.Audit.Denied(tool, rec)
		}
		return DenialResult(Denial{Denied: true, Tool: tool, Mode: string(den.Mode), Path: den.Base, Rule: den.Rule}, den.Error())
	}
	return mcp.NewToolResultError(err.Error())
}

// DenialResult is the result of a refusal: isError, one plain sentence for
// the model, and the typed denial in _meta[DenialMetaKey]. It carries no
// structuredContent, so it validates against any output schema.
func DenialResult(d Denial, sentence string) *mcp.CallToolResult {
	res := mcp.NewToolResultError(sentence)
	res.Meta = mcp.NewMetaFromMap(map[string]any{DenialMetaKey: d})
	return res
}

// DenialOf returns the typed denial a result carries, if any.
func DenialOf(res *mcp.CallToolResult) (Denial, bool) {
	if res == nil || res.Meta == nil {
		return Denial{}, false
	}
	d, ok := res.Meta.AdditionalFields[DenialMetaKey].(Denial)
	return d, ok
}

// handler adapts a typed handler: decode, run, map failures.
func handler[A any](d Deps, tool string, run func(ctx context.Context, req mcp.CallToolRequest, args A) (*mcp.CallToolResult, error)) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args A
		if err := decodeArgs(req, &args); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		res, err := run(ctx, req, args)
		if err != nil {
			return d.failure(tool, err), nil
		}
		return res, nil
	}
}
