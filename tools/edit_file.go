package tools

import (
	"context"
	"fmt"
	"io"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools/internal/textedit"
	"github.com/mark3labs/mcp-go/mcp"
)

type editArgs struct {
	Path   string     `json:"path"`
	Edits  []editItem `json:"edits"`
	DryRun bool       `json:"dry_run,omitempty"`
}

type editItem struct {
	OldText    string `json:"old_text"`
	NewText    string `json:"new_text"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// EditResult is edit_file's structured result.
type EditResult struct {
	Path         string `json:"path"`
	Applied      bool   `json:"applied"`
	Replacements []int  `json:"replacements"`
	Diff         string `json:"diff"`
}

const editSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to edit, relative to the worktree or absolute."},
    "edits": {"type": "array", "minItems": 1, "maxItems": 100, "description": "Applied in order, all or nothing.", "items": {
      "type": "object",
      "properties": {
        "old_text": {"type": "string", "minLength": 1, "description": "Exact text to replace; it must occur once unless replace_all."},
        "new_text": {"type": "string"},
        "replace_all": {"type": "boolean"}
      },
      "required": ["old_text", "new_text"],
      "additionalProperties": false}},
    "dry_run": {"type": "boolean", "description": "Return the diff without writing."}
  },
  "required": ["path", "edits"],
  "additionalProperties": false
}`

const editOutputSchema = `{
  "type": "object",
  "properties": {"path": {"type": "string"}, "applied": {"type": "boolean"},
    "replacements": {"type": "array", "items": {"type": "integer"}}, "diff": {"type": "string"}},
  "required": ["path", "applied", "replacements", "diff"]
}`

// EditFile applies a list of exact-text replacements all or nothing,
// keeping CRLF line endings and indentation, and returns a unified diff.
// editFileFacts are edit_file's facts.
var editFileFacts = Facts{Name: "edit_file", Changes: true, Approval: "write", Files: true}

func EditFile(d Deps) Tool {
	tool := mcp.NewTool("edit_file",
		mcp.WithDescription("Replace exact text in a file. Each old_text must match once (or set replace_all); all edits apply or none do. Returns a unified diff."),
		schemas(editSchema, editOutputSchema),
		annotations("Edit a file", false, true, false, false),
	)
	return d.tool(editFileFacts, tool, handler(d, editFileFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a editArgs) (*mcp.CallToolResult, error) {
		old, display, err := readWhole(d, a.Path)
		if err != nil {
			return nil, err
		}
		edits := make([]textedit.Edit, len(a.Edits))
		for i, e := range a.Edits {
			edits[i] = textedit.Edit{OldText: e.OldText, NewText: e.NewText, ReplaceAll: e.ReplaceAll}
		}
		updated, counts, err := textedit.ApplyEdits(old, edits)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (nothing was changed)", display, err)
		}
		if int64(len(updated)) > d.Bounds.WriteBytes {
			return nil, fmt.Errorf("%s would be %d bytes, over the %d-byte cap", display, len(updated), d.Bounds.WriteBytes)
		}
		diff := textedit.UnifiedDiff("a/"+display, "b/"+display, old, updated)
		res := EditResult{Path: display, Replacements: counts, Diff: diff}
		if !a.DryRun {
			if _, err := d.Files.WriteFile(a.Path, []byte(updated), confine.WriteOptions{}); err != nil {
				return nil, err
			}
			res.Applied = true
		}
		return mcp.NewToolResultStructured(res, diff), nil
	}))
}

// readWhole reads a whole text file under the read cap.
func readWhole(d Deps, p string) (string, string, error) {
	f, info, err := d.Files.OpenRead(p)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	if info.Size > d.Bounds.WriteBytes {
		return "", "", fmt.Errorf("%s is %d bytes, over the %d-byte cap", info.Display, info.Size, d.Bounds.WriteBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, d.Bounds.WriteBytes+1))
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", info.Display, err)
	}
	return string(b), info.Display, nil
}
