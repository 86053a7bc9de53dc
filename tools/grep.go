package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/evener-dev/evener-mcp/tools/internal/search"
	"github.com/mark3labs/mcp-go/mcp"
)

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path,omitempty"`
	Glob       string `json:"glob,omitempty"`
	Literal    bool   `json:"literal,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	Context    int    `json:"context,omitempty"`
	OutputMode string `json:"output_mode,omitempty"`
	Limit      int    `json:"limit,omitempty"`
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path   string   `json:"path"`
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// GrepCount is a per-file match count.
type GrepCount struct {
	Path  string `json:"path"`
	Count int    `json:"count"`
}

// GrepResult is grep's structured result.
type GrepResult struct {
	Mode          string      `json:"output_mode"`
	Matches       []GrepMatch `json:"matches,omitempty"`
	Files         []string    `json:"files,omitempty"`
	Counts        []GrepCount `json:"counts,omitempty"`
	Truncated     bool        `json:"truncated"`
	FilesSearched int64       `json:"files_searched"`
	SkippedBinary int         `json:"skipped_binary"`
}

const grepSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "RE2 regular expression (linear time), or a literal string with literal=true."},
    "path": {"type": "string", "description": "File or directory to search (default: the worktree)."},
    "glob": {"type": "string", "description": "Only files whose path or name matches this glob."},
    "literal": {"type": "boolean"},
    "ignore_case": {"type": "boolean"},
    "context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Lines of context before and after each match."},
    "output_mode": {"type": "string", "enum": ["content", "files", "count"]},
    "limit": {"type": "integer", "minimum": 1, "maximum": 10000}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

const grepOutputSchema = `{
  "type": "object",
  "properties": {
    "output_mode": {"type": "string"},
    "matches": {"type": "array", "items": {"type": "object", "properties": {
      "path": {"type": "string"}, "line": {"type": "integer"}, "text": {"type": "string"},
      "before": {"type": "array", "items": {"type": "string"}}, "after": {"type": "array", "items": {"type": "string"}}},
      "required": ["path", "line", "text"]}},
    "files": {"type": "array", "items": {"type": "string"}},
    "counts": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}, "count": {"type": "integer"}}, "required": ["path", "count"]}},
    "truncated": {"type": "boolean"}, "files_searched": {"type": "integer"}, "skipped_binary": {"type": "integer"}
  },
  "required": ["output_mode", "truncated", "files_searched", "skipped_binary"]
}`

// Grep searches file contents with a linear-time regular expression or a
// literal, honouring ignore files and skipping binaries, capped.
// grepFacts are grep's facts.
var grepFacts = Facts{Name: "grep", Files: true, Computes: true}

func Grep(d Deps) Tool {
	tool := mcp.NewTool("grep",
		mcp.WithDescription("Search file contents (RE2 regex or literal). Honours .gitignore, skips binary files; output as matching lines, file names or counts; capped."),
		schemas(grepSchema, grepOutputSchema),
		annotations("Search file contents", true, false, true, false),
	)
	return d.tool(grepFacts, tool, handler(d, grepFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a grepArgs) (*mcp.CallToolResult, error) {
		fsys, sub, _, err := searchRoot(d, a.Path)
		if err != nil {
			return nil, err
		}
		defer fsys.close()
		mode := a.OutputMode
		if mode == "" {
			mode = search.ModeContent
		}
		o := search.GrepOptions{Pattern: a.Pattern, Literal: a.Literal, IgnoreCase: a.IgnoreCase, Context: a.Context,
			Path: sub, OutputMode: mode, Limit: a.Limit, MaxFileBytes: d.Bounds.ReadBytes}
		if o.Limit == 0 {
			o.Limit = d.Bounds.Results
		}
		if a.Glob != "" {
			o.Include = []string{a.Glob}
		}
		r, err := search.Grep(ctx, fsys, o)
		if err != nil {
			return nil, err
		}
		root := fsys.root.Display()
		res := GrepResult{Mode: mode, Truncated: r.Truncated, FilesSearched: r.FilesSearched, SkippedBinary: r.Skipped.Binary}
		var b strings.Builder
		switch mode {
		case search.ModeContent:
			res.Matches = make([]GrepMatch, 0, len(r.Matches))
			for _, m := range r.Matches {
				// Raw bytes that are not UTF-8 are shown as \xNN, never
				// silently replaced by JSON encoding.
				m.Text = escapeInvalidUTF8(m.Text)
				for i := range m.Before {
					m.Before[i] = escapeInvalidUTF8(m.Before[i])
				}
				for i := range m.After {
					m.After[i] = escapeInvalidUTF8(m.After[i])
				}
				p := joinDisplay(root, m.Path)
				res.Matches = append(res.Matches, GrepMatch{Path: p, Line: m.Line, Text: m.Text, Before: m.Before, After: m.After})
				for i, l := range m.Before {
					fmt.Fprintf(&b, "%s-%d-%s\n", p, m.Line-len(m.Before)+i, l)
				}
				fmt.Fprintf(&b, "%s:%d:%s\n", p, m.Line, m.Text)
				for i, l := range m.After {
					fmt.Fprintf(&b, "%s-%d-%s\n", p, m.Line+1+i, l)
				}
			}
		case search.ModeFiles:
			res.Files = make([]string, 0, len(r.Files))
			for _, f := range r.Files {
				p := joinDisplay(root, f)
				res.Files = append(res.Files, p)
				b.WriteString(p + "\n")
			}
		case search.ModeCount:
			res.Counts = make([]GrepCount, 0, len(r.Counts))
			for _, c := range r.Counts {
				p := joinDisplay(root, c.Path)
				res.Counts = append(res.Counts, GrepCount{Path: p, Count: c.Count})
				fmt.Fprintf(&b, "%s:%d\n", p, c.Count)
			}
		}
		if b.Len() == 0 {
			b.WriteString("no matches\n")
		}
		if res.Truncated {
			b.WriteString("[results truncated]\n")
		}
		return mcp.NewToolResultStructured(res, b.String()), nil
	}))
}
