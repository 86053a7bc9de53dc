package tools

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/evener-dev/evener-mcp/tools/internal/search"
	"github.com/mark3labs/mcp-go/mcp"
)

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
}

// GlobResult is glob's structured result.
type GlobResult struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated"`
}

const globSchema = `{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Glob relative to path: *, ?, [..], {a,b}, and ** for any number of directories."},
    "path": {"type": "string", "description": "Directory to search (default: the worktree)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

const globOutputSchema = `{
  "type": "object",
  "properties": {"paths": {"type": "array", "items": {"type": "string"}}, "truncated": {"type": "boolean"}},
  "required": ["paths", "truncated"]
}`

// Glob lists the paths matching a pattern, honouring ignore files, in a
// stable (sorted) order, capped with a truncation flag.
// globFacts are glob's facts.
var globFacts = Facts{Name: "glob", Files: true, Computes: true}

func Glob(d Deps) Tool {
	tool := mcp.NewTool("glob",
		mcp.WithDescription("Find files by glob pattern (** matches any number of directories). Honours .gitignore; sorted; capped."),
		schemas(globSchema, globOutputSchema),
		annotations("Find files by pattern", true, false, true, false),
	)
	return d.tool(globFacts, tool, handler(d, globFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a globArgs) (*mcp.CallToolResult, error) {
		fsys, sub, isFile, err := searchRoot(d, a.Path)
		if err != nil {
			return nil, err
		}
		defer fsys.close()
		if isFile {
			return nil, fmt.Errorf("path %s is a file, not a directory", a.Path)
		}
		pattern := strings.TrimPrefix(a.Pattern, "./")
		if path.IsAbs(pattern) || strings.HasPrefix(pattern, "../") || pattern == ".." {
			return nil, fmt.Errorf("pattern %q must be relative to path (set path to search elsewhere)", a.Pattern)
		}
		r, err := search.Glob(fsys, pattern, search.GlobOptions{Path: sub, Limit: d.Bounds.Results * 2})
		if err != nil {
			return nil, err
		}
		res := GlobResult{Paths: make([]string, 0, len(r.Paths)), Truncated: r.Truncated}
		for _, p := range r.Paths {
			res.Paths = append(res.Paths, joinDisplay(fsys.root.Display(), p))
		}
		text := strings.Join(res.Paths, "\n")
		if res.Truncated {
			text += "\n[more matches not shown]"
		}
		if len(res.Paths) == 0 {
			text = "no matches"
		}
		return mcp.NewToolResultStructured(res, text), nil
	}))
}
