package textedit

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// OpKind is what a FileOp does to its file.
type OpKind int

const (
	Add    OpKind = iota + 1 // create Path with NewContent
	Delete                   // remove Path
	Update                   // change Path (and maybe rename it to MoveTo)
)

func (k OpKind) String() string {
	switch k {
	case Add:
		return "add"
	case Delete:
		return "delete"
	case Update:
		return "update"
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// Format is the syntax a patch was written in.
type Format int

const (
	FormatEnvelope Format = iota + 1 // *** Begin Patch … *** End Patch
	FormatUnified                    // diff -u / git diff
)

func (f Format) String() string {
	switch f {
	case FormatEnvelope:
		return "envelope"
	case FormatUnified:
		return "unified"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// LineKind is the role of a line in a chunk.
type LineKind byte

const (
	LineContext LineKind = ' '
	LineRemove  LineKind = '-'
	LineAdd     LineKind = '+'
)

// Line is one line of a chunk, without its prefix character and without its
// "\n"; a "\r" from a CRLF patch stays in Text.
type Line struct {
	Kind LineKind
	Text string
	// NoEOL: a "\ No newline at end of file" marker followed this line
	// (unified diffs only).
	NoEOL bool
}

// Chunk is one hunk of an Update (or a unified Delete).
type Chunk struct {
	// Anchors are the envelope's "@@ <line>" texts, sought in order before
	// the chunk's lines; empty for unified diffs (whose "@@ … @@ heading"
	// text is informational and ignored).
	Anchors []string
	Lines   []Line
	// EndOfFile: the envelope's "*** End of File": the chunk's old lines
	// must be the last lines of the file (or, for a pure addition, the
	// lines are appended).
	EndOfFile bool
	// HasRange: the unified header gave line numbers. OldStart is the
	// 1-based first old line (for an empty old side, the line after which
	// the new lines go); the numbers are hints, located by content.
	HasRange                               bool
	OldStart, OldCount, NewStart, NewCount int
	// PatchLine is the 1-based line of the patch where the chunk starts.
	PatchLine int
}

// FileOp is one file's change in a patch.
type FileOp struct {
	Kind OpKind
	// Path is the cleaned, relative path (see ValidatePath) of the file
	// the op reads: the created file for Add, the deleted one for Delete,
	// the original for Update.
	Path string
	// MoveTo, for Update, is where the result goes ("" when it stays);
	// the tool layer writes the new content there and removes Path.
	MoveTo string
	// NewContent is the whole content of an Add.
	NewContent string
	// Chunks are an Update's hunks, in file order; a Delete from a unified
	// diff keeps its hunks so the deletion can be checked with ApplyOp.
	Chunks []Chunk
	Format Format
	// PatchLine is the 1-based line of the patch where the op starts.
	PatchLine int
}

// ParseError is an error of ParsePatch, at a 1-based line of the patch.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

func parseErr(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// ParsePatch parses a patch in either format (see the package
// documentation), validates every path, and refuses a patch that touches a
// file twice. The format is the envelope when the first non-blank line is
// "*** Begin Patch", otherwise a unified diff. A patch wrapped in a Markdown
// code fence or a shell here-document (apply_patch <<'EOF' … EOF) is
// unwrapped first.
func ParsePatch(text string) ([]FileOp, error) {
	if i := strings.IndexByte(text, 0); i >= 0 {
		return nil, parseErr(1+strings.Count(text[:i], "\n"), "the patch contains a NUL byte; binary content cannot be patched")
	}
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	start, end := unwrap(lines)
	first := start
	for first < end && strings.TrimSpace(lines[first]) == "" {
		first++
	}
	if first == end {
		return nil, parseErr(max(1, min(first, len(lines))), "the patch is empty")
	}
	var ops []FileOp
	var err error
	if strings.TrimSpace(lines[first]) == "*** Begin Patch" {
		ops, err = parseEnvelope(lines, first, end)
	} else {
		for i := first; i < end; i++ {
			if trimRight(lines[i]) == "*** Begin Patch" {
				return nil, parseErr(first+1, "the patch must start with \"*** Begin Patch\" (found at line %d)", i+1)
			}
		}
		ops, err = parseUnified(lines, first, end)
	}
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, parseErr(first+1, "no file changes found: expected \"*** Begin Patch\" or a unified diff with ---/+++ headers")
	}
	seen := map[string]int{}
	for _, op := range ops {
		for _, p := range []string{op.Path, op.MoveTo} {
			if p == "" {
				continue
			}
			if l, dup := seen[p]; dup {
				return nil, parseErr(op.PatchLine, "%s is touched twice in one patch (first at line %d); put all its changes in one file section", p, l)
			}
			seen[p] = op.PatchLine
		}
	}
	return ops, nil
}

// unwrap returns the range of lines inside a Markdown fence or a shell
// here-document that encloses the whole patch, or all lines.
func unwrap(lines []string) (int, int) {
	s, e := 0, len(lines)
	for s < e && strings.TrimSpace(lines[s]) == "" {
		s++
	}
	for e > s && strings.TrimSpace(lines[e-1]) == "" {
		e--
	}
	if e-s < 1 {
		return 0, len(lines)
	}
	open, last := strings.TrimSpace(lines[s]), strings.TrimSpace(lines[e-1])
	if strings.HasPrefix(open, "```") {
		if last == "```" && e-s >= 2 {
			return s + 1, e - 1
		}
		return s + 1, len(lines) // an unclosed fence
	}
	if i := strings.Index(open, "<<"); i >= 0 {
		cmd := strings.TrimSpace(open[:i])
		tag := strings.Trim(strings.TrimSpace(open[i+2:]), `'"`)
		if (cmd == "apply_patch" || cmd == "applypatch") && tag != "" && last == tag {
			return s + 1, e - 1
		}
	}
	return 0, len(lines)
}

// ValidatePath refuses a path that is empty, contains NUL, starts with "~",
// is absolute, or has a ".." component, and returns it cleaned
// (path.Clean; "a/./b//c/" becomes "a/b/c"). A path that cleans to "." is
// refused too.
func ValidatePath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("empty path")
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("path %q starts with ~; use a path relative to the working directory", p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q is absolute; use a path relative to the working directory", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("path %q has a \"..\" component", p)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", fmt.Errorf("path %q names the working directory itself", p)
	}
	return c, nil
}

func validPath(p string, line int) (string, error) {
	c, err := ValidatePath(p)
	if err != nil {
		return "", &ParseError{Line: line, Msg: err.Error()}
	}
	return c, nil
}
