package textedit

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Fuzz is how loosely a chunk's lines had to be compared to be found.
type Fuzz int

const (
	// FuzzNone: byte for byte, or differing only in CRLF against LF.
	FuzzNone Fuzz = iota
	// FuzzTrailingSpace: trailing white space ignored.
	FuzzTrailingSpace
	// FuzzSpace: leading and trailing white space ignored.
	FuzzSpace
)

func (f Fuzz) String() string {
	switch f {
	case FuzzNone:
		return "none"
	case FuzzTrailingSpace:
		return "trailing-space"
	case FuzzSpace:
		return "space"
	}
	return "Fuzz(" + strconv.Itoa(int(f)) + ")"
}

// ChunkResult reports where and how one chunk applied.
type ChunkResult struct {
	// Line is the 1-based line of the current content where the chunk's
	// old lines start; for a pure addition, the line the new lines go
	// before (one past the last line for the end of the file).
	Line int
	Fuzz Fuzz
	// Offset, for a unified hunk with line numbers, is Line minus the line
	// its header named.
	Offset int
}

// ApplyError is an error of ApplyOp.
type ApplyError struct {
	Chunk     int // 1-based chunk number; 0 for the whole op
	PatchLine int // 1-based patch line of the chunk; 0 if unknown
	Msg       string
}

func (e *ApplyError) Error() string {
	switch {
	case e.Chunk == 0:
		return e.Msg
	case e.PatchLine == 0:
		return fmt.Sprintf("chunk %d: %s", e.Chunk, e.Msg)
	}
	return fmt.Sprintf("chunk %d (patch line %d): %s", e.Chunk, e.PatchLine, e.Msg)
}

// ApplyOp computes the new content of the file op changes, given its
// current content. For Update, the chunks apply in order, each located at or
// after the end of the previous one; see the package documentation for how
// chunks are located, fuzz, line endings and final newlines. For Add it
// returns op.NewContent. For Delete it returns "", after checking, when the
// op carries hunks (unified diffs), that they remove the whole content.
func ApplyOp(op FileOp, current string) (string, error) {
	s, _, err := ApplyOpDetailed(op, current)
	return s, err
}

// ApplyOpDetailed is ApplyOp reporting where and with which fuzz each chunk
// applied.
func ApplyOpDetailed(op FileOp, current string) (string, []ChunkResult, error) {
	switch op.Kind {
	case Add:
		return op.NewContent, nil, nil
	case Delete:
		if len(op.Chunks) == 0 {
			return "", nil, nil
		}
		rest, res, err := applyChunks(op, current)
		if err != nil {
			return "", nil, err
		}
		if rest != "" {
			return "", nil, &ApplyError{Msg: fmt.Sprintf("the deletion's hunks do not remove the whole file: %d lines would remain", strings.Count(rest, "\n")+1-boolInt(strings.HasSuffix(rest, "\n")))}
		}
		return "", res, nil
	case Update:
		return applyChunks(op, current)
	}
	return "", nil, &ApplyError{Msg: fmt.Sprintf("unknown op kind %d", int(op.Kind))}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// outLine is a line of the result; crlf asks for "\r\n" rather than "\n"
// when the line is terminated.
type outLine struct {
	text string
	crlf bool
}

func applyChunks(op FileOp, current string) (string, []ChunkResult, error) {
	lines, finalNL := splitFile(current)
	style := detectEOL(current)
	x := newLineIndex(lines)
	unified := op.Format == FormatUnified

	fileLine := func(k int) outLine {
		if k < len(lines)-1 || finalNL {
			// A terminated line: a trailing "\r" is its line ending's.
			if t, ok := strings.CutSuffix(lines[k], "\r"); ok {
				return outLine{t, true}
			}
			return outLine{lines[k], false}
		}
		return outLine{lines[k], style == eolCRLF && !strings.HasSuffix(lines[k], "\r")}
	}
	addedLine := func(text string, exact bool) outLine {
		if exact || style == eolNone {
			return outLine{text, false}
		}
		return outLine{strings.TrimSuffix(text, "\r"), style == eolCRLF}
	}

	var out []outLine
	copied, cursor, drift := 0, 0, 0
	newFinal := finalNL
	results := make([]ChunkResult, len(op.Chunks))
	for ci := range op.Chunks {
		ch := &op.Chunks[ci]
		fail := func(format string, args ...any) (string, []ChunkResult, error) {
			return "", nil, &ApplyError{Chunk: ci + 1, PatchLine: ch.PatchLine, Msg: fmt.Sprintf(format, args...)}
		}
		var old []string
		var oldKinds []LineKind
		for _, l := range ch.Lines {
			if l.Kind != LineAdd {
				old = append(old, l.Text)
				oldKinds = append(oldKinds, l.Kind)
			}
		}

		searchFrom := cursor
		anchorAt := -1
		for _, a := range ch.Anchors {
			at, ok := findLine(x, a, searchFrom)
			if !ok {
				if before, ok := findLine(x, a, 0); ok {
					return fail("anchor @@ %q is at line %d, before line %d where the previous chunk or anchor ended: chunks must follow file order", excerpt(a), before+1, searchFrom+1)
				}
				return fail("anchor @@ %q not found after line %d", excerpt(a), searchFrom)
			}
			anchorAt, searchFrom = at, at+1
		}
		if anchorAt >= 0 {
			searchFrom = anchorAt // the chunk's context may begin with the anchor line
		}

		base := -1 // where the unified header puts the chunk
		if ch.HasRange {
			base = ch.OldStart - 1
			if len(old) == 0 {
				base = ch.OldStart
			}
			base = max(base, 0)
		}
		hint := -1
		if base >= 0 {
			hint = base + drift
		}

		pos, mode := 0, modeEOL
		if len(old) == 0 {
			switch {
			case ch.EndOfFile:
				pos = len(lines)
			case anchorAt >= 0:
				pos = anchorAt + 1
			case hint >= 0:
				pos = hint
			default:
				pos = len(lines)
			}
			if pos < cursor {
				return fail("the insertion point (after line %d) is before the end of the previous chunk (line %d): chunks must follow file order", pos, cursor)
			}
			if pos > len(lines) {
				return fail("the insertion point (after line %d) is past the end of the file (%d lines)", pos, len(lines))
			}
		} else {
			found := false
			for m := modeEOL; m < numModes && !found; m++ {
				pat := x.patternIDs(m, old)
				switch {
				case ch.EndOfFile:
					if p := len(lines) - len(old); p >= searchFrom && x.matchAt(m, pat, p) {
						pos, mode, found = p, m, true
					}
				case hint >= searchFrom && x.matchAt(m, pat, hint):
					pos, mode, found = hint, m, true
				default:
					if p, ok := search(x, m, pat, searchFrom, hint); ok {
						pos, mode, found = p, m, true
					}
				}
			}
			if !found {
				return fail("%s", diagnose(x, old, oldKinds, ch.EndOfFile, searchFrom))
			}
		}

		for k := copied; k < pos; k++ {
			out = append(out, fileLine(k))
		}
		k := pos
		// Added lines are copied as written when the chunk's old lines are
		// byte for byte those of the file, including at least one line
		// ending (so the patch shows which ending it means); otherwise they
		// follow the file's convention.
		exact := len(old) > 0 && (pos < len(lines)-1 || finalNL)
		for i := 0; exact && i < len(old); i++ {
			exact = old[i] == lines[pos+i]
		}
		for _, l := range ch.Lines {
			switch l.Kind {
			case LineRemove:
				k++
			case LineAdd:
				out = append(out, addedLine(l.Text, exact))
			default:
				out = append(out, fileLine(k))
				k++
			}
		}
		copied, cursor = k, k
		if unified && k == len(lines) {
			newFinal = true
			for j := len(ch.Lines) - 1; j >= 0; j-- {
				if ch.Lines[j].Kind != LineRemove {
					newFinal = !ch.Lines[j].NoEOL
					break
				}
			}
		}
		results[ci] = ChunkResult{Line: pos + 1, Fuzz: mode.fuzz()}
		if base >= 0 {
			results[ci].Offset = pos - base
			drift = pos - base
		}
	}
	for k := copied; k < len(lines); k++ {
		out = append(out, fileLine(k))
	}

	var b strings.Builder
	b.Grow(len(current) + 64)
	for i, l := range out {
		b.WriteString(l.text)
		if i < len(out)-1 || newFinal {
			if l.crlf {
				b.WriteByte('\r')
			}
			b.WriteByte('\n')
		}
	}
	return b.String(), results, nil
}

// findLine finds the first line at or after from equal to s, trying the
// match modes in order.
func findLine(x *lineIndex, s string, from int) (int, bool) {
	for m := modeEOL; m < numModes; m++ {
		id := x.patternIDs(m, []string{s})[0]
		ps := x.positions(m)[id]
		if i := sort.SearchInts(ps, from); i < len(ps) {
			return ps[i], true
		}
	}
	return 0, false
}

// search finds pat in the file at or after from: the first occurrence, or,
// with a hint, the one nearest to it (the earlier one on a tie).
func search(x *lineIndex, m matchMode, pat []int32, from, hint int) (int, bool) {
	t := x.fileIDs(m)
	if from < 0 || from+len(pat) > len(t) {
		return 0, false
	}
	best := -1
	kmpScan(t[from:], pat, func(s int) bool {
		p := s + from
		if hint < 0 {
			best = p
			return false
		}
		if p >= hint {
			if best < 0 || p-hint < hint-best {
				best = p
			}
			return false
		}
		best = p
		return true
	})
	return best, best >= 0
}

// diagnose explains why a chunk's old lines were not found.
func diagnose(x *lineIndex, old []string, kinds []LineKind, eof bool, from int) string {
	kind := func(i int) string {
		if kinds[i] == LineRemove {
			return "removed line"
		}
		return "context line"
	}
	for m := modeEOL; m < numModes; m++ {
		p, ok := search(x, m, x.patternIDs(m, old), 0, -1)
		if ok && eof {
			return fmt.Sprintf("the chunk is marked %q but its lines are at line %d, not at the end of the file", envEOF, p+1)
		}
		if ok && p < from {
			return fmt.Sprintf("the chunk's lines are at line %d, before line %d where the previous chunk or anchor ended: chunks must follow file order and apply once", p+1, from+1)
		}
	}
	if eof {
		n := len(x.lines)
		for i := range old {
			j := n - len(old) + i
			if j < 0 || normalize(x.lines[j], modeTrim) != normalize(old[i], modeTrim) {
				got := "nothing"
				if j >= 0 {
					got = strconv.Quote(excerpt(x.lines[j]))
				}
				return fmt.Sprintf("the chunk is marked %q but its %s %q does not match the file's line %d (%s)", envEOF, kind(i), excerpt(old[i]), j+1, got)
			}
		}
		return fmt.Sprintf("the chunk is marked %q but does not match the end of the file", envEOF)
	}
	t := x.fileIDs(modeTrim)
	if from > len(t) {
		from = len(t)
	}
	n, at := kmpScan(t[from:], x.patternIDs(modeTrim, old), nil)
	if n == 0 {
		return fmt.Sprintf("%s %q not found after line %d (the chunk's lines must appear in the file in order, even ignoring white space)", kind(0), excerpt(old[0]), from)
	}
	at += from
	if at+n >= len(x.lines) {
		return fmt.Sprintf("%s %q not found: the chunk's first %d lines match at line %d, then the file ends", kind(n), excerpt(old[n]), n, at+1)
	}
	return fmt.Sprintf("%s %q not found: the chunk's first %d lines match at line %d, but line %d is %q", kind(n), excerpt(old[n]), n, at+1, at+n+1, excerpt(x.lines[at+n]))
}
