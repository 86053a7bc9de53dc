package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools/internal/textedit"
	"github.com/mark3labs/mcp-go/mcp"
)

type patchArgs struct {
	Patch string `json:"patch"`
}

// PatchFile is one file a patch touched.
type PatchFile struct {
	Path    string `json:"path"`
	Action  string `json:"action"` // add, delete, update, move
	MovedTo string `json:"moved_to,omitempty"`
}

// PatchResult is apply_patch's structured result.
type PatchResult struct {
	Files []PatchFile `json:"files"`
}

const patchSchema = `{
  "type": "object",
  "properties": {
    "patch": {"type": "string", "minLength": 1, "description": "A '*** Begin Patch' envelope (Add/Delete/Update/Move File, @@ chunks, *** End of File) or a unified diff. Paths are relative to the worktree."}
  },
  "required": ["patch"],
  "additionalProperties": false
}`

const patchOutputSchema = `{
  "type": "object",
  "properties": {"files": {"type": "array", "items": {"type": "object", "properties": {
    "path": {"type": "string"}, "action": {"type": "string", "enum": ["add", "delete", "update", "move"]},
    "moved_to": {"type": "string"}}, "required": ["path", "action"]}}},
  "required": ["files"]
}`

// modeLine finds git's file-mode headers: a patch may not create symlinks
// (120000) or gitlinks (160000); other modes are ignored (new files are
// 0644, updated files keep theirs).
var modeLine = regexp.MustCompile(`(?m)^(?:new file mode|new mode|old mode|deleted file mode|index [0-9a-f]+\.\.[0-9a-f]+) *(120000|160000)\b`)

// ApplyPatch applies a patch atomically across all the files it names:
// every file is read, patched and staged first, and nothing is visible
// until all of it succeeded; a failure leaves every file as it was.
// applyPatchFacts are apply_patch's facts.
var applyPatchFacts = Facts{Name: "apply_patch", Changes: true, Files: true}

func ApplyPatch(d Deps) Tool {
	tool := mcp.NewTool("apply_patch",
		mcp.WithDescription("Apply a patch ('*** Begin Patch' format or a unified diff) to files in the worktree, all files or none."),
		schemas(patchSchema, patchOutputSchema),
		annotations("Apply a patch", false, true, false, false),
	)
	return d.tool(applyPatchFacts, tool, handler(d, applyPatchFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a patchArgs) (*mcp.CallToolResult, error) {
		if int64(len(a.Patch)) > d.Bounds.PatchBytes {
			return nil, fmt.Errorf("patch is %d bytes, over the %d-byte cap", len(a.Patch), d.Bounds.PatchBytes)
		}
		if m := modeLine.FindStringSubmatch(a.Patch); m != nil {
			return nil, fmt.Errorf("patch creates a symlink or gitlink (mode %s); refused", m[1])
		}
		ops, err := textedit.ParsePatch(a.Patch)
		if err != nil {
			return nil, fmt.Errorf("patch: %w (nothing was changed)", err)
		}
		stage := d.Files.NewStage()
		defer stage.Abort()
		res := PatchResult{Files: []PatchFile{}}
		for _, op := range ops {
			pf, err := stageOp(d, stage, op)
			if err != nil {
				return nil, withNothingChanged(err)
			}
			res.Files = append(res.Files, pf)
		}
		if err := stage.Commit(); err != nil {
			return nil, withNothingChanged(err)
		}
		var b strings.Builder
		for _, f := range res.Files {
			if f.MovedTo != "" {
				fmt.Fprintf(&b, "%s %s -> %s\n", f.Action, f.Path, f.MovedTo)
			} else {
				fmt.Fprintf(&b, "%s %s\n", f.Action, f.Path)
			}
		}
		return mcp.NewToolResultStructured(res, b.String()), nil
	}))
}

func stageOp(d Deps, stage *confine.Stage, op textedit.FileOp) (PatchFile, error) {
	for _, p := range []string{op.Path, op.MoveTo} {
		if p == "" {
			continue
		}
		if _, err := textedit.ValidatePath(p); err != nil {
			return PatchFile{}, fmt.Errorf("patch line %d: %w", op.PatchLine, err)
		}
	}
	path := filepath.FromSlash(op.Path)
	switch op.Kind {
	case textedit.Add:
		if _, err := d.Files.Lstat(path); err == nil {
			return PatchFile{}, fmt.Errorf("%s: cannot add, it already exists", op.Path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return PatchFile{}, err
		}
		if int64(len(op.NewContent)) > d.Bounds.WriteBytes {
			return PatchFile{}, fmt.Errorf("%s: new content over the %d-byte cap", op.Path, d.Bounds.WriteBytes)
		}
		return PatchFile{Path: op.Path, Action: "add"}, stage.Write(path, []byte(op.NewContent), confine.WriteOptions{CreateParents: true})
	case textedit.Delete:
		if len(op.Chunks) > 0 {
			// A unified diff's deletion carries the old content: check it.
			cur, _, err := readWhole(d, path)
			if err != nil {
				return PatchFile{}, err
			}
			if _, err := textedit.ApplyOp(op, cur); err != nil {
				return PatchFile{}, fmt.Errorf("%s: the deletion does not match the file: %w", op.Path, err)
			}
		}
		return PatchFile{Path: op.Path, Action: "delete"}, stage.Delete(path)
	case textedit.Update:
		cur, _, err := readWhole(d, path)
		if err != nil {
			return PatchFile{}, err
		}
		updated, err := textedit.ApplyOp(op, cur)
		if err != nil {
			return PatchFile{}, fmt.Errorf("%s: %w", op.Path, err)
		}
		if int64(len(updated)) > d.Bounds.WriteBytes {
			return PatchFile{}, fmt.Errorf("%s: result over the %d-byte cap", op.Path, d.Bounds.WriteBytes)
		}
		if op.MoveTo == "" || op.MoveTo == op.Path {
			return PatchFile{Path: op.Path, Action: "update"}, stage.Write(path, []byte(updated), confine.WriteOptions{})
		}
		to := filepath.FromSlash(op.MoveTo)
		if _, err := d.Files.Lstat(to); err == nil {
			return PatchFile{}, fmt.Errorf("%s: cannot move onto %s, it exists", op.Path, op.MoveTo)
		}
		if err := stage.Write(to, []byte(updated), confine.WriteOptions{CreateParents: true}); err != nil {
			return PatchFile{}, err
		}
		return PatchFile{Path: op.Path, Action: "move", MovedTo: op.MoveTo}, stage.Delete(path)
	}
	return PatchFile{}, fmt.Errorf("patch line %d: unknown operation", op.PatchLine)
}

func withNothingChanged(err error) error {
	var den *confine.Denial
	if errors.As(err, &den) {
		return err
	}
	return fmt.Errorf("%w (nothing was changed)", err)
}
