package textedit

import (
	"regexp"
	"strconv"
	"strings"
)

const devNull = "/dev/null"

var hunkHeader = regexp.MustCompile(`^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// uniFile collects one file section of a unified diff.
type uniFile struct {
	line                 int // patch line where the section starts
	git                  bool
	gitOld, gitNew       string
	oldName, newName     string
	haveNames            bool
	renameFrom, renameTo string
	newFile, deleted     bool
	hunks                []Chunk
}

// parseUnified parses lines[start:end] as one or more unified diffs.
func parseUnified(lines []string, start, end int) ([]FileOp, error) {
	var ops []FileOp
	var cur *uniFile
	flush := func() error {
		if cur == nil {
			return nil
		}
		op, keep, err := cur.op()
		cur = nil
		if err != nil {
			return err
		}
		if keep {
			ops = append(ops, op)
		}
		return nil
	}
	for i := start; i < end; {
		raw := lines[i]
		t := trimRight(raw)
		switch {
		case strings.HasPrefix(raw, "diff --git "):
			if err := flush(); err != nil {
				return nil, err
			}
			cur = &uniFile{line: i + 1, git: true}
			cur.gitOld, cur.gitNew = splitGitNames(t[len("diff --git "):])
			i++
		header:
			for ; i < end; i++ {
				h := trimRight(lines[i])
				switch {
				case strings.HasPrefix(h, "new file mode "):
					cur.newFile = true
				case strings.HasPrefix(h, "deleted file mode "):
					cur.deleted = true
				case strings.HasPrefix(h, "rename from "):
					cur.renameFrom = unquoteName(h[len("rename from "):])
				case strings.HasPrefix(h, "rename to "):
					cur.renameTo = unquoteName(h[len("rename to "):])
				case strings.HasPrefix(h, "copy from "), strings.HasPrefix(h, "copy to "):
					return nil, parseErr(i+1, "git copies are not supported; add the copy as a new file")
				case strings.HasPrefix(h, "old mode "), strings.HasPrefix(h, "new mode "),
					strings.HasPrefix(h, "index "), strings.HasPrefix(h, "similarity index "),
					strings.HasPrefix(h, "dissimilarity index "):
				default:
					break header
				}
			}
		case isBinaryMarker(t):
			return nil, parseErr(i+1, "binary patches are not supported")
		case strings.HasPrefix(raw, "--- ") && i+1 < end && strings.HasPrefix(lines[i+1], "+++ "):
			if cur == nil || cur.haveNames || len(cur.hunks) > 0 {
				if err := flush(); err != nil {
					return nil, err
				}
				cur = &uniFile{line: i + 1}
			}
			cur.oldName = headerName(lines[i][4:])
			cur.newName = headerName(lines[i+1][4:])
			cur.haveNames = true
			i += 2
		case strings.HasPrefix(raw, "@@"):
			if cur == nil || !cur.haveNames {
				return nil, parseErr(i+1, "hunk without a ---/+++ file header")
			}
			ch, next, err := parseHunk(lines, i, end)
			if err != nil {
				return nil, err
			}
			cur.hunks = append(cur.hunks, ch)
			i = next
		default:
			i++ // commit messages, "Index:" lines, signatures: not ours
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return ops, nil
}

func isBinaryMarker(t string) bool {
	return t == "GIT binary patch" || (strings.HasPrefix(t, "Binary files ") && strings.HasSuffix(t, " differ"))
}

// parseHunk parses the hunk whose header is lines[i]. The header's counts
// are hints: a hunk ends where its counts are met, unless the next line
// still continues it; it also ends early at a line that cannot be part of a
// hunk (an "@@", a "diff --git", text without a prefix, the end).
func parseHunk(lines []string, i, end int) (Chunk, int, error) {
	t := trimRight(lines[i])
	ch := Chunk{PatchLine: i + 1}
	var oldN, newN int
	if m := hunkHeader.FindStringSubmatch(t); m != nil {
		num := func(s string, def int) (int, error) {
			if s == "" {
				return def, nil
			}
			return strconv.Atoi(s)
		}
		var errs [4]error
		ch.OldStart, errs[0] = num(m[1], 0)
		oldN, errs[1] = num(m[2], 1)
		ch.NewStart, errs[2] = num(m[3], 0)
		newN, errs[3] = num(m[4], 1)
		for _, err := range errs {
			if err != nil {
				return Chunk{}, 0, parseErr(i+1, "bad hunk header %q", excerpt(t))
			}
		}
		ch.HasRange = true
	} else if strings.Trim(t, "@ ") != "" {
		return Chunk{}, 0, parseErr(i+1, "bad hunk header %q: expected @@ -l,s +l,s @@", excerpt(t))
	}
	i++
	oldSeen, newSeen, trailingBare := 0, 0, 0
lines:
	for i < end {
		raw := lines[i]
		if strings.HasPrefix(raw, "\\") {
			if n := len(ch.Lines); n > 0 {
				ch.Lines[n-1].NoEOL = true
			}
			i++
			continue
		}
		full := !ch.HasRange || (oldSeen >= oldN && newSeen >= newN)
		header := strings.HasPrefix(raw, "--- ") && i+1 < end && strings.HasPrefix(lines[i+1], "+++ ")
		if full && (header || trimRight(raw) == "--") {
			break
		}
		if ch.HasRange && full && (raw == "" || raw == "\r") {
			break
		}
		var l Line
		bare := false
		switch {
		case raw == "" || raw == "\r":
			l, bare = Line{Kind: LineContext, Text: raw}, true
		case raw[0] == ' ' || raw[0] == '-' || raw[0] == '+':
			l = Line{Kind: LineKind(raw[0]), Text: raw[1:]}
		default:
			break lines
		}
		ch.Lines = append(ch.Lines, l)
		if l.Kind != LineAdd {
			oldSeen++
		}
		if l.Kind != LineRemove {
			newSeen++
		}
		if bare {
			trailingBare++
		} else {
			trailingBare = 0
		}
		i++
	}
	ch.Lines = ch.Lines[:len(ch.Lines)-trailingBare]
	for _, l := range ch.Lines {
		if l.Kind != LineAdd {
			ch.OldCount++
		}
		if l.Kind != LineRemove {
			ch.NewCount++
		}
	}
	if len(ch.Lines) == 0 {
		return Chunk{}, 0, parseErr(ch.PatchLine, "empty hunk")
	}
	return ch, i, nil
}

// headerName extracts the file name of a "--- "/"+++ " line: what precedes
// a tab (diff -u puts a time stamp there), unquoted the way git quotes.
func headerName(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return unquoteName(trimRight(s))
}

func unquoteName(s string) string {
	s = trimRight(s)
	if len(s) >= 2 && s[0] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// splitGitNames splits "a/x b/x" of a "diff --git" line.
func splitGitNames(s string) (string, string) {
	if strings.HasPrefix(s, `"`) {
		if j := closingQuote(s); j > 0 {
			return unquoteName(s[:j+1]), unquoteName(strings.TrimSpace(s[j+1:]))
		}
	}
	// Prefer the split whose halves name the same file.
	for k := strings.Index(s, " "); k >= 0; {
		l, r := s[:k], s[k+1:]
		if strings.TrimPrefix(l, "a/") == strings.TrimPrefix(r, "b/") {
			return l, r
		}
		n := strings.Index(s[k+1:], " ")
		if n < 0 {
			break
		}
		k += n + 1
	}
	if k := strings.Index(s, " b/"); k >= 0 && strings.Count(s, " b/") == 1 {
		return s[:k], s[k+1:]
	}
	if k := strings.LastIndex(s, ` "`); k >= 0 {
		return s[:k], unquoteName(s[k+1:])
	}
	return "", ""
}

func closingQuote(s string) int {
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// stripPrefixes resolves the old and new paths of a section, stripping git's a/ and
// b/ prefixes: both when old has a/ and new has b/ (or the other side is
// /dev/null), or one of them when that makes the two names equal.
func stripPrefixes(old, new string) (string, string) {
	oa, nb := strings.HasPrefix(old, "a/"), strings.HasPrefix(new, "b/")
	switch {
	case oa && (nb || new == devNull):
		old = old[2:]
		if nb {
			new = new[2:]
		}
	case nb && old == devNull:
		new = new[2:]
	case oa && old[2:] == new:
		old = old[2:]
	case nb && new[2:] == old:
		new = new[2:]
	}
	return old, new
}

// op turns the section into a FileOp; keep is false for a section that
// changes nothing the tools model (a mode change).
func (f *uniFile) op() (FileOp, bool, error) {
	old, new := f.oldName, f.newName
	if !f.haveNames {
		old, new = f.gitOld, f.gitNew
		if f.newFile {
			old = devNull
		}
		if f.deleted {
			new = devNull
		}
	}
	old, new = stripPrefixes(old, new)
	if f.renameFrom != "" && old != devNull {
		old = f.renameFrom
	}
	if f.renameTo != "" && new != devNull {
		new = f.renameTo
	}
	op := FileOp{Format: FormatUnified, PatchLine: f.line}
	switch {
	case old == devNull && new == devNull:
		return op, false, parseErr(f.line, "both sides of the file header are /dev/null")
	case old == "" || new == "":
		return op, false, parseErr(f.line, "cannot tell the file names of this diff section")
	case old == devNull:
		p, err := validPath(new, f.line)
		if err != nil {
			return op, false, err
		}
		op.Kind, op.Path = Add, p
		var b strings.Builder
		for _, h := range f.hunks {
			for _, l := range h.Lines {
				if l.Kind == LineRemove || (l.Kind == LineContext && l.Text != "" && l.Text != "\r") {
					return op, false, parseErr(h.PatchLine, "a new file's hunk can only add lines")
				}
				b.WriteString(l.Text)
				if !l.NoEOL {
					b.WriteByte('\n')
				}
			}
		}
		op.NewContent = b.String()
		return op, true, nil
	case new == devNull:
		p, err := validPath(old, f.line)
		if err != nil {
			return op, false, err
		}
		op.Kind, op.Path, op.Chunks = Delete, p, f.hunks
		return op, true, nil
	}
	p, err := validPath(old, f.line)
	if err != nil {
		return op, false, err
	}
	np, err := validPath(new, f.line)
	if err != nil {
		return op, false, err
	}
	op.Kind, op.Path, op.Chunks = Update, p, f.hunks
	if np != p {
		if !f.git && f.renameTo == "" {
			return op, false, parseErr(f.line, "--- and +++ name different files (%s, %s); a rename needs git's \"rename from\"/\"rename to\" lines", p, np)
		}
		op.MoveTo = np
	}
	if len(op.Chunks) == 0 && op.MoveTo == "" {
		return op, false, nil
	}
	return op, true, nil
}
