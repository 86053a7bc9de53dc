package textedit

import (
	"regexp"
	"strings"
	"unicode"
)

const (
	envAdd    = "*** Add File:"
	envDelete = "*** Delete File:"
	envUpdate = "*** Update File:"
	envMove   = "*** Move to:"
	envEnd    = "*** End Patch"
	envEOF    = "*** End of File"
)

// unifiedHunkHeader matches a unified hunk header, which inside an envelope
// is read as an "@@" without anchor.
var unifiedHunkHeader = regexp.MustCompile(`^@@+ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@+`)

func trimRight(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }

// parseEnvelope parses lines[begin:end], lines[begin] being "*** Begin Patch".
func parseEnvelope(lines []string, begin, end int) ([]FileOp, error) {
	var ops []FileOp
	i := begin + 1
	for {
		if i >= end {
			return nil, parseErr(max(end, 1), "missing %q at the end of the patch", envEnd)
		}
		t := strings.TrimSpace(lines[i])
		ln := i + 1
		switch {
		case t == "":
			i++
		case t == envEnd:
			for j := i + 1; j < end; j++ {
				if strings.TrimSpace(lines[j]) != "" {
					return nil, parseErr(j+1, "unexpected text after %q", envEnd)
				}
			}
			return ops, nil
		case strings.HasPrefix(t, envAdd):
			p, err := validPath(strings.TrimSpace(t[len(envAdd):]), ln)
			if err != nil {
				return nil, err
			}
			i++
			var b strings.Builder
			for i < end {
				l := lines[i]
				if strings.HasPrefix(l, "+") {
					b.WriteString(l[1:])
					b.WriteByte('\n')
					i++
					continue
				}
				if l == "" || l == "\r" {
					// A bare empty line is an empty content line when more
					// content follows.
					j := i
					for j < end && (lines[j] == "" || lines[j] == "\r") {
						j++
					}
					if j < end && strings.HasPrefix(lines[j], "+") {
						for ; i < j; i++ {
							b.WriteString(lines[i])
							b.WriteByte('\n')
						}
						continue
					}
				}
				break
			}
			if i < end && !strings.HasPrefix(strings.TrimSpace(lines[i]), "***") && strings.TrimSpace(lines[i]) != "" {
				return nil, parseErr(i+1, "in %s %s: every line of an added file must start with '+' (got %q)", envAdd, p, excerpt(lines[i]))
			}
			ops = append(ops, FileOp{Kind: Add, Path: p, NewContent: b.String(), Format: FormatEnvelope, PatchLine: ln})
		case strings.HasPrefix(t, envDelete):
			p, err := validPath(strings.TrimSpace(t[len(envDelete):]), ln)
			if err != nil {
				return nil, err
			}
			ops = append(ops, FileOp{Kind: Delete, Path: p, Format: FormatEnvelope, PatchLine: ln})
			i++
		case strings.HasPrefix(t, envUpdate):
			op, next, err := parseEnvelopeUpdate(lines, i, end)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
			i = next
		default:
			return nil, parseErr(ln, "expected %q, %q, %q or %q, got %q", envAdd, envDelete, envUpdate, envEnd, excerpt(lines[i]))
		}
	}
}

// parseEnvelopeUpdate parses an "*** Update File:" section starting at
// lines[i] and returns the index of the first line after it.
func parseEnvelopeUpdate(lines []string, i, end int) (FileOp, int, error) {
	t := strings.TrimSpace(lines[i])
	ln := i + 1
	p, err := validPath(strings.TrimSpace(t[len(envUpdate):]), ln)
	if err != nil {
		return FileOp{}, 0, err
	}
	op := FileOp{Kind: Update, Path: p, Format: FormatEnvelope, PatchLine: ln}
	i++
	if i < end {
		if mt := strings.TrimSpace(lines[i]); strings.HasPrefix(mt, envMove) {
			mp, err := validPath(strings.TrimSpace(mt[len(envMove):]), i+1)
			if err != nil {
				return FileOp{}, 0, err
			}
			if mp != p {
				op.MoveTo = mp
			}
			i++
		}
	}

	var cur *Chunk
	trailingBare := 0
	finish := func() error {
		if cur == nil {
			return nil
		}
		cur.Lines = cur.Lines[:len(cur.Lines)-trailingBare]
		trailingBare = 0
		if len(cur.Lines) == 0 {
			if len(cur.Anchors) > 0 {
				return parseErr(cur.PatchLine, "chunk @@ %s has no lines", excerpt(cur.Anchors[len(cur.Anchors)-1]))
			}
			if cur.EndOfFile {
				return parseErr(cur.PatchLine, "chunk has no lines before %q", envEOF)
			}
			cur = nil
			return nil
		}
		op.Chunks = append(op.Chunks, *cur)
		cur = nil
		return nil
	}
	closed := false // the previous chunk ended with *** End of File
	for i < end {
		raw := lines[i]
		if strings.HasPrefix(raw, "***") {
			if trimRight(raw) != envEOF {
				break
			}
			if cur == nil || len(cur.Lines) == trailingBare {
				return FileOp{}, 0, parseErr(i+1, "%q outside a chunk", envEOF)
			}
			cur.EndOfFile = true
			if err := finish(); err != nil {
				return FileOp{}, 0, err
			}
			closed = true
			i++
			continue
		}
		if strings.HasPrefix(raw, "@@") {
			t := trimRight(raw)
			anchor := ""
			if !unifiedHunkHeader.MatchString(t) {
				anchor = strings.TrimPrefix(t[2:], " ")
			}
			if cur != nil && len(cur.Lines) == trailingBare {
				// Stacked "@@" lines narrow the position step by step.
				cur.Lines, trailingBare = cur.Lines[:0], 0
				if anchor != "" {
					cur.Anchors = append(cur.Anchors, anchor)
				}
			} else {
				if err := finish(); err != nil {
					return FileOp{}, 0, err
				}
				cur = &Chunk{PatchLine: i + 1}
				if anchor != "" {
					cur.Anchors = []string{anchor}
				}
			}
			closed = false
			i++
			continue
		}
		var l Line
		bare := false
		switch {
		case raw == "" || raw == "\r":
			l, bare = Line{Kind: LineContext, Text: raw}, true
		case raw[0] == ' ' || raw[0] == '-' || raw[0] == '+':
			l = Line{Kind: LineKind(raw[0]), Text: raw[1:]}
		case raw[0] == '\\':
			i++ // "\ No newline at end of file" has no meaning here
			continue
		default:
			return FileOp{}, 0, parseErr(i+1, "in %s %s: a chunk line must start with ' ', '-' or '+' (got %q)", envUpdate, p, excerpt(raw))
		}
		if cur == nil {
			if bare {
				i++ // blank lines between chunks
				continue
			}
			if len(op.Chunks) > 0 || closed {
				return FileOp{}, 0, parseErr(i+1, "in %s %s: expected \"@@\" before a new chunk (got %q)", envUpdate, p, excerpt(raw))
			}
			cur = &Chunk{PatchLine: i + 1}
		}
		cur.Lines = append(cur.Lines, l)
		if bare {
			trailingBare++
		} else {
			trailingBare = 0
		}
		i++
	}
	if err := finish(); err != nil {
		return FileOp{}, 0, err
	}
	if len(op.Chunks) == 0 && op.MoveTo == "" {
		return FileOp{}, 0, parseErr(ln, "%s %s has no chunks", envUpdate, p)
	}
	return op, i, nil
}
