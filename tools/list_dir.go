package tools

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/mark3labs/mcp-go/mcp"
)

type listArgs struct {
	Path  string `json:"path"`
	Depth int    `json:"depth,omitempty"`
}

// ListEntry is one entry of list_dir.
type ListEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	Target string `json:"target,omitempty"`
}

// ListResult is list_dir's structured result.
type ListResult struct {
	Path      string      `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

const maxListDepth = 5

const listSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "Directory to list, relative to the worktree or absolute."},
    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Levels to descend (default 1)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const listOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "entries": {"type": "array", "items": {"type": "object", "properties": {
      "path": {"type": "string"}, "type": {"type": "string", "enum": ["file", "dir", "symlink", "other"]},
      "size": {"type": "integer"}, "target": {"type": "string"}}, "required": ["path", "type", "size"]}},
    "truncated": {"type": "boolean"}
  },
  "required": ["path", "entries", "truncated"]
}`

// ListDir lists a directory to a given depth. Symlinks are shown as
// symlinks with their target and never followed, so a listing cannot leave
// the tree or loop.
// listDirFacts are list_dir's facts.
var listDirFacts = Facts{Name: "list_dir", Files: true}

func ListDir(d Deps) Tool {
	tool := mcp.NewTool("list_dir",
		mcp.WithDescription("List a directory, optionally several levels deep. Symlinks are shown, never followed."),
		schemas(listSchema, listOutputSchema),
		annotations("List a directory", true, false, true, false),
	)
	return d.tool(listDirFacts, tool, handler(d, listDirFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a listArgs) (*mcp.CallToolResult, error) {
		depth := min(max(a.Depth, 1), maxListDepth)
		dir, err := d.Files.OpenDir(a.Path)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		res := ListResult{Path: dir.Display(), Entries: []ListEntry{}}
		budget := d.Bounds.ListEntries * 5
		if err := walkList(ctx, dir, "", depth, d.Bounds.ListEntries, &budget, &res); err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, e := range res.Entries {
			switch e.Type {
			case "dir":
				fmt.Fprintf(&b, "%s/\n", e.Path)
			case "symlink":
				fmt.Fprintf(&b, "%s -> %s\n", e.Path, e.Target)
			default:
				fmt.Fprintf(&b, "%s\n", e.Path)
			}
		}
		if res.Truncated {
			b.WriteString("[listing truncated]\n")
		}
		return mcp.NewToolResultStructured(res, b.String()), nil
	}))
}

func walkList(ctx context.Context, dir *confine.Dir, prefix string, depth, perDir int, budget *int, res *ListResult) error {
	ents, truncated, err := dir.Entries(perDir)
	if err != nil {
		return err
	}
	res.Truncated = res.Truncated || truncated
	for _, e := range ents {
		if *budget <= 0 || ctx.Err() != nil {
			res.Truncated = true
			return nil
		}
		*budget--
		p := path.Join(prefix, e.Name)
		le := ListEntry{Path: p, Size: e.Size, Type: kindName(e.Kind)}
		if e.Kind == confine.PathSymlink {
			le.Target = e.Target
		}
		res.Entries = append(res.Entries, le)
		if e.Kind == confine.PathDir && depth > 1 {
			sub, err := dir.OpenDir(e.Name)
			if err != nil {
				continue // vanished or refused: listed, not entered
			}
			err = walkList(ctx, sub, p, depth-1, perDir, budget, res)
			sub.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func kindName(k confine.PathKind) string {
	switch k {
	case confine.PathFile:
		return "file"
	case confine.PathDir:
		return "dir"
	case confine.PathSymlink:
		return "symlink"
	}
	return "other"
}
