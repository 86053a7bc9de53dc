package tools

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/memory"
	"github.com/mark3labs/mcp-go/mcp"
)

// The five memory tools (docs/memory.md, "Memory"): notes the agent keeps between
// sessions, in the project's scope (the default) or the user's personal
// one, each a confined root of its own under the state directory (package
// memory). They never touch the worktree, start no process and reach no
// network; they are not mutation tools for the delegate floor (Changes is
// false). A session without workspace-mutation tools gets the two that
// only read (Facts.Memory "read").

// MemoryRecorder is implemented by an audit that records memory writes
// and deletes (tool, scope, base name; never content).
type MemoryRecorder interface {
	Memory(tool, scope, path string)
}

var (
	memoryViewFacts   = Facts{Name: "memory_view", Memory: "read"}
	memoryWriteFacts  = Facts{Name: "memory_write", Memory: "write"}
	memoryEditFacts   = Facts{Name: "memory_edit", Memory: "write"}
	memorySearchFacts = Facts{Name: "memory_search", Memory: "read"}
	memoryDeleteFacts = Facts{Name: "memory_delete", Memory: "write"}
)

// scopeProp is the scope property every memory tool takes.
const scopeProp = `"scope": {"type": "string", "enum": ["project", "personal"], "description": "project (default): this worktree's memory; personal: yours, in every project."}`

const memoryPathDesc = `"description": "Relative to the scope's root."`

// memoryRoot is the scope's root for a call, or why there is none.
func (d Deps) memoryRoot(scope string) (*memory.Root, error) {
	sc, err := memory.ParseScope(scope)
	if err != nil {
		return nil, err
	}
	if d.Memory == nil {
		return nil, errors.New("memory is not available in this session")
	}
	return d.Memory.Root(sc)
}

func (d Deps) recordMemory(tool string, r *memory.Root, path string) {
	if mr, ok := d.Audit.(MemoryRecorder); ok && d.Audit != nil {
		mr.Memory(tool, string(r.Scope()), filepath.Base(path))
	}
}

// memoryFailure is a memory error as the model reads it: a plain error
// result (no typed denial: the memory roots follow their own rules, not
// the session's mode). A refusal by the memory file layer (a symlink, a
// masked file, a FIFO) is audited like a file tool's.
func (d Deps) memoryFailure(tool string, err error) *mcp.CallToolResult {
	var den *confine.Denial
	if errors.As(err, &den) {
		if d.Audit != nil {
			d.Audit.Denied(tool, den)
		}
		return mcp.NewToolResultError(fmt.Sprintf("%s refused in memory: %q (rule: %s)", den.Op, den.Base, den.Rule))
	}
	return mcp.NewToolResultError(err.Error())
}

type memoryViewArgs struct {
	Scope  string `json:"scope,omitempty"`
	Path   string `json:"path,omitempty"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// MemoryViewResult is memory_view's structured result: a listing (files)
// or a file's line range (content, numbered as in the text content, which
// is the same text: a client shows the model one or the other).
type MemoryViewResult struct {
	Scope      string         `json:"scope"`
	Path       string         `json:"path,omitempty"`
	Files      []memory.Entry `json:"files,omitempty"`
	Content    *string        `json:"content,omitempty"`
	TotalLines int            `json:"total_lines,omitempty"`
	More       bool           `json:"more,omitempty"`
}

// MemoryView lists a scope (or a directory of it) or shows a file with
// line numbers.
func MemoryView(d Deps) Tool {
	tool := mcp.NewTool(memoryViewFacts.Name,
		mcp.WithDescription("View your memory: without path, list its files (size, first line); with a file's path, show it with line numbers."),
		schemas(`{"type": "object", "properties": {`+scopeProp+`,
    "path": {"type": "string", `+memoryPathDesc+`},
    "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
    "limit": {"type": "integer", "minimum": 1}},
  "additionalProperties": false}`,
			`{"type": "object", "properties": {"scope": {"type": "string"}, "path": {"type": "string"},
    "files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}, "size": {"type": "integer"}, "first_line": {"type": "string"}}, "required": ["path", "size"]}},
    "content": {"type": "string", "description": "A file's lines, each after its number and a tab."},
    "total_lines": {"type": "integer"}, "more": {"type": "boolean"}},
  "required": ["scope"]}`),
		annotations("View memory", true, false, true, false),
	)
	return d.tool(memoryViewFacts, tool, handler(d, memoryViewFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a memoryViewArgs) (*mcp.CallToolResult, error) {
		r, err := d.memoryRoot(a.Scope)
		if err != nil {
			return d.memoryFailure(memoryViewFacts.Name, err), nil
		}
		res := MemoryViewResult{Scope: string(r.Scope()), Path: a.Path}
		isDir := a.Path == ""
		if !isDir {
			if isDir, err = r.IsDir(a.Path); err != nil {
				return d.memoryFailure(memoryViewFacts.Name, err), nil
			}
		}
		if isDir {
			es, err := r.List(a.Path, true)
			if err != nil {
				return d.memoryFailure(memoryViewFacts.Name, err), nil
			}
			res.Files = es
			var b strings.Builder
			fmt.Fprintf(&b, "%s memory", r.Scope())
			if a.Path != "" {
				fmt.Fprintf(&b, ", %s/", a.Path)
			}
			if len(es) == 1 {
				b.WriteString(": 1 file\n")
			} else {
				fmt.Fprintf(&b, ": %d files\n", len(es))
			}
			for _, e := range es {
				fmt.Fprintf(&b, "%s (%d bytes): %s\n", e.Path, e.Size, e.FirstLine)
			}
			return mcp.NewToolResultStructured(res, b.String()), nil
		}
		data, err := r.Read(a.Path)
		if err != nil {
			return d.memoryFailure(memoryViewFacts.Name, err), nil
		}
		text := string(data)
		if !utf8.ValidString(text) {
			text = escapeInvalidUTF8(text)
		}
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		res.TotalLines = len(lines)
		first := max(a.Offset, 1)
		if first > len(lines) && len(lines) > 0 {
			return d.memoryFailure(memoryViewFacts.Name, fmt.Errorf("offset %d is past the end of %s (%d lines)", first, a.Path, len(lines))), nil
		}
		end := len(lines)
		if a.Limit > 0 && first-1+a.Limit < end {
			end, res.More = first-1+a.Limit, true
		}
		var b strings.Builder
		for i := first - 1; i < end; i++ {
			fmt.Fprintf(&b, "%6d\t%s", i+1, lines[i])
			if !strings.HasSuffix(lines[i], "\n") {
				b.WriteByte('\n')
			}
		}
		content := b.String()
		res.Content = &content
		return mcp.NewToolResultStructured(res, content), nil
	}))
}

type memoryWriteArgs struct {
	Scope   string `json:"scope,omitempty"`
	Path    string `json:"path"`
	Content string `json:"content"`
}

// MemoryWriteResult is memory_write's structured result.
type MemoryWriteResult struct {
	Scope   string `json:"scope"`
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

// MemoryWrite creates or replaces a memory file, atomically.
func MemoryWrite(d Deps) Tool {
	tool := mcp.NewTool(memoryWriteFacts.Name,
		mcp.WithDescription("Remember something for later sessions: create or replace a memory file (Markdown notes; never secrets)."),
		schemas(`{"type": "object", "properties": {`+scopeProp+`,
    "path": {"type": "string", "minLength": 1, `+memoryPathDesc+`},
    "content": {"type": "string", "description": "The whole new content."}},
  "required": ["path", "content"], "additionalProperties": false}`,
			`{"type": "object", "properties": {"scope": {"type": "string"}, "path": {"type": "string"}, "bytes": {"type": "integer"}, "created": {"type": "boolean"}},
  "required": ["scope", "path", "bytes", "created"]}`),
		annotations("Write memory", false, true, true, false),
	)
	return d.tool(memoryWriteFacts, tool, handler(d, memoryWriteFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a memoryWriteArgs) (*mcp.CallToolResult, error) {
		r, err := d.memoryRoot(a.Scope)
		if err != nil {
			return d.memoryFailure(memoryWriteFacts.Name, err), nil
		}
		created, err := r.Write(a.Path, []byte(a.Content))
		if err != nil {
			return d.memoryFailure(memoryWriteFacts.Name, err), nil
		}
		d.recordMemory(memoryWriteFacts.Name, r, a.Path)
		verb := "replaced"
		if created {
			verb = "created"
		}
		return mcp.NewToolResultStructured(MemoryWriteResult{Scope: string(r.Scope()), Path: a.Path, Bytes: len(a.Content), Created: created},
			fmt.Sprintf("%s %s memory %s (%d bytes)", verb, r.Scope(), a.Path, len(a.Content))), nil
	}))
}

type memoryEditArgs struct {
	Scope   string `json:"scope,omitempty"`
	Path    string `json:"path"`
	OldText string `json:"old_text"`
	NewText string `json:"new_text"`
}

// MemoryFileResult is the structured result of memory_edit and
// memory_delete: the file they acted on.
type MemoryFileResult struct {
	Scope string `json:"scope"`
	Path  string `json:"path"`
}

// MemoryEdit replaces the one occurrence of old_text in a memory file.
func MemoryEdit(d Deps) Tool {
	tool := mcp.NewTool(memoryEditFacts.Name,
		mcp.WithDescription("Edit a memory file: replace old_text, which must occur exactly once, with new_text."),
		schemas(`{"type": "object", "properties": {`+scopeProp+`,
    "path": {"type": "string", "minLength": 1, `+memoryPathDesc+`},
    "old_text": {"type": "string", "minLength": 1},
    "new_text": {"type": "string"}},
  "required": ["path", "old_text", "new_text"], "additionalProperties": false}`,
			`{"type": "object", "properties": {"scope": {"type": "string"}, "path": {"type": "string"}}, "required": ["scope", "path"]}`),
		annotations("Edit memory", false, true, false, false),
	)
	return d.tool(memoryEditFacts, tool, handler(d, memoryEditFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a memoryEditArgs) (*mcp.CallToolResult, error) {
		r, err := d.memoryRoot(a.Scope)
		if err != nil {
			return d.memoryFailure(memoryEditFacts.Name, err), nil
		}
		if err := r.Edit(a.Path, a.OldText, a.NewText); err != nil {
			return d.memoryFailure(memoryEditFacts.Name, err), nil
		}
		d.recordMemory(memoryEditFacts.Name, r, a.Path)
		return mcp.NewToolResultStructured(MemoryFileResult{Scope: string(r.Scope()), Path: a.Path},
			fmt.Sprintf("edited %s memory %s", r.Scope(), a.Path)), nil
	}))
}

type memorySearchArgs struct {
	Scope   string `json:"scope,omitempty"`
	Pattern string `json:"pattern"`
	Literal bool   `json:"literal,omitempty"`
}

// MemorySearchResult is memory_search's structured result.
type MemorySearchResult struct {
	Scope     string         `json:"scope"`
	Matches   []memory.Match `json:"matches"`
	Truncated bool           `json:"truncated"`
}

// MemorySearch finds the lines of a scope's files matching a pattern.
func MemorySearch(d Deps) Tool {
	tool := mcp.NewTool(memorySearchFacts.Name,
		mcp.WithDescription("Search your memory files for a regular expression (RE2) or, with literal, plain text."),
		schemas(`{"type": "object", "properties": {`+scopeProp+`,
    "pattern": {"type": "string", "minLength": 1},
    "literal": {"type": "boolean"}},
  "required": ["pattern"], "additionalProperties": false}`,
			`{"type": "object", "properties": {"scope": {"type": "string"},
    "matches": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "text": {"type": "string"}}, "required": ["path", "line", "text"]}},
    "truncated": {"type": "boolean"}},
  "required": ["scope", "matches", "truncated"]}`),
		annotations("Search memory", true, false, true, false),
	)
	return d.tool(memorySearchFacts, tool, handler(d, memorySearchFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a memorySearchArgs) (*mcp.CallToolResult, error) {
		r, err := d.memoryRoot(a.Scope)
		if err != nil {
			return d.memoryFailure(memorySearchFacts.Name, err), nil
		}
		ms, trunc, err := r.Search(a.Pattern, a.Literal)
		if err != nil {
			return d.memoryFailure(memorySearchFacts.Name, err), nil
		}
		if ms == nil {
			ms = []memory.Match{}
		}
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "%s:%d:%s\n", m.Path, m.Line, m.Text)
		}
		if len(ms) == 0 {
			fmt.Fprintf(&b, "no match in %s memory\n", r.Scope())
		}
		if trunc {
			fmt.Fprintf(&b, "(stopped at %d matches)\n", memory.MaxMatches)
		}
		return mcp.NewToolResultStructured(MemorySearchResult{Scope: string(r.Scope()), Matches: ms, Truncated: trunc}, b.String()), nil
	}))
}

type memoryDeleteArgs struct {
	Scope string `json:"scope,omitempty"`
	Path  string `json:"path"`
}

// MemoryDelete removes a memory file or an empty directory, and the
// parent directories that leaves empty.
func MemoryDelete(d Deps) Tool {
	tool := mcp.NewTool(memoryDeleteFacts.Name,
		mcp.WithDescription("Delete a memory file that is wrong or no longer useful, or an empty directory."),
		schemas(`{"type": "object", "properties": {`+scopeProp+`,
    "path": {"type": "string", "minLength": 1, `+memoryPathDesc+`}},
  "required": ["path"], "additionalProperties": false}`,
			`{"type": "object", "properties": {"scope": {"type": "string"}, "path": {"type": "string"}}, "required": ["scope", "path"]}`),
		annotations("Delete memory", false, true, true, false),
	)
	return d.tool(memoryDeleteFacts, tool, handler(d, memoryDeleteFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a memoryDeleteArgs) (*mcp.CallToolResult, error) {
		r, err := d.memoryRoot(a.Scope)
		if err != nil {
			return d.memoryFailure(memoryDeleteFacts.Name, err), nil
		}
		if err := r.Delete(a.Path); err != nil {
			return d.memoryFailure(memoryDeleteFacts.Name, err), nil
		}
		d.recordMemory(memoryDeleteFacts.Name, r, a.Path)
		return mcp.NewToolResultStructured(MemoryFileResult{Scope: string(r.Scope()), Path: a.Path},
			fmt.Sprintf("deleted %s memory %s", r.Scope(), a.Path)), nil
	}))
}
