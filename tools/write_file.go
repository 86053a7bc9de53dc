package tools

import (
	"context"
	"fmt"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/mark3labs/mcp-go/mcp"
)

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// WriteResult is write_file's structured result.
type WriteResult struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

const writeSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to create or replace, relative to the worktree or absolute."},
    "content": {"type": "string", "description": "The whole new content."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

const writeOutputSchema = `{
  "type": "object",
  "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}, "created": {"type": "boolean"}},
  "required": ["path", "bytes", "created"]
}`

// WriteFile creates or replaces a file atomically (temp file and rename
// through a held directory handle), keeping an existing file's mode and
// never writing through a symlink.
// writeFileFacts are write_file's facts.
var writeFileFacts = Facts{Name: "write_file", Changes: true, Approval: "write", Files: true}

func WriteFile(d Deps) Tool {
	tool := mcp.NewTool("write_file",
		mcp.WithDescription("Create or replace a file with the given content, atomically. Missing parent directories are created."),
		schemas(writeSchema, writeOutputSchema),
		annotations("Write a file", false, true, true, false),
	)
	return d.tool(writeFileFacts, tool, handler(d, writeFileFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, error) {
		if int64(len(a.Content)) > d.Bounds.WriteBytes {
			return nil, fmt.Errorf("content is %d bytes, over the %d-byte cap", len(a.Content), d.Bounds.WriteBytes)
		}
		_, display, err := d.Files.Resolve(a.Path)
		if err != nil {
			return nil, err
		}
		created, err := d.Files.WriteFile(a.Path, []byte(a.Content), confine.WriteOptions{CreateParents: true})
		if err != nil {
			return nil, err
		}
		verb := "replaced"
		if created {
			verb = "created"
		}
		return mcp.NewToolResultStructured(WriteResult{Path: display, Bytes: len(a.Content), Created: created},
			fmt.Sprintf("%s %s (%d bytes)", verb, display, len(a.Content))), nil
	}))
}
