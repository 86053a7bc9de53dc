package textedit

import (
	"strings"
	"unicode"
)

// eolStyle is a text's line-ending convention.
type eolStyle int

const (
	eolNone eolStyle = iota // the text has no line ending at all
	eolLF
	eolCRLF
)

// detectEOL returns the majority line ending of s: CRLF when more lines end
// in "\r\n" than in a bare "\n", LF when fewer; on a tie, the ending of the
// first line. eolNone when s has no "\n".
func detectEOL(s string) eolStyle {
	total := strings.Count(s, "\n")
	if total == 0 {
		return eolNone
	}
	crlf := strings.Count(s, "\r\n")
	switch lf := total - crlf; {
	case crlf > lf:
		return eolCRLF
	case lf > crlf:
		return eolLF
	}
	if i := strings.IndexByte(s, '\n'); i > 0 && s[i-1] == '\r' {
		return eolCRLF
	}
	return eolLF
}

// translateEOL rewrites every line ending of s ("\r\n" or "\n") to style.
// With eolNone, s is made consistent with its own majority ending.
func translateEOL(s string, style eolStyle) string {
	if style == eolNone {
		style = detectEOL(s)
	}
	switch style {
	case eolLF:
		return strings.ReplaceAll(s, "\r\n", "\n")
	case eolCRLF:
		return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
	}
	return s
}

// splitFile splits content into lines without their "\n" (a CRLF line keeps
// its "\r") and reports whether the last line is terminated. Empty content
// has no lines and counts as terminated, so that lines added to it end with
// a newline.
func splitFile(s string) (lines []string, finalNL bool) {
	if s == "" {
		return nil, true
	}
	finalNL = strings.HasSuffix(s, "\n")
	if finalNL {
		s = s[:len(s)-1]
	}
	return strings.Split(s, "\n"), finalNL
}

// matchMode is how two lines are compared when locating a patch chunk.
type matchMode int

const (
	modeEOL     matchMode = iota // ignoring one trailing "\r": CRLF and LF alike
	modeTrimEnd                  // ignoring trailing white space
	modeTrim                     // ignoring leading and trailing white space
	numModes
)

// fuzz is the fuzz level a mode reports.
func (m matchMode) fuzz() Fuzz {
	switch m {
	case modeTrimEnd:
		return FuzzTrailingSpace
	case modeTrim:
		return FuzzSpace
	}
	return FuzzNone
}

func normalize(s string, m matchMode) string {
	switch m {
	case modeEOL:
		return strings.TrimSuffix(s, "\r")
	case modeTrimEnd:
		return strings.TrimRightFunc(s, unicode.IsSpace)
	case modeTrim:
		return strings.TrimSpace(s)
	}
	return s
}

// lineIndex interns the lines of a file per match mode so that sequences of
// lines can be searched in linear time (KMP over line ids).
type lineIndex struct {
	lines []string
	ids   [numModes][]int32
	dict  [numModes]map[string]int32
	pos   [numModes]map[int32][]int // the lines of each id, ascending
}

// positions maps each line id of mode m to the lines that have it.
func (x *lineIndex) positions(m matchMode) map[int32][]int {
	if x.pos[m] == nil {
		p := make(map[int32][]int)
		for i, id := range x.fileIDs(m) {
			p[id] = append(p[id], i)
		}
		x.pos[m] = p
	}
	return x.pos[m]
}

func newLineIndex(lines []string) *lineIndex { return &lineIndex{lines: lines} }

func (x *lineIndex) fileIDs(m matchMode) []int32 {
	if x.ids[m] == nil {
		d := make(map[string]int32)
		ids := make([]int32, len(x.lines))
		for i, l := range x.lines {
			k := normalize(l, m)
			id, ok := d[k]
			if !ok {
				id = int32(len(d))
				d[k] = id
			}
			ids[i] = id
		}
		x.ids[m], x.dict[m] = ids, d
	}
	return x.ids[m]
}

// patternIDs maps pattern lines to ids; a line absent from the file gets a
// fresh id that no file line has.
func (x *lineIndex) patternIDs(m matchMode, pat []string) []int32 {
	x.fileIDs(m)
	d := x.dict[m]
	ids := make([]int32, len(pat))
	for i, l := range pat {
		k := normalize(l, m)
		id, ok := d[k]
		if !ok {
			id = int32(len(d))
			d[k] = id
		}
		ids[i] = id
	}
	return ids
}

// matchAt reports whether pat matches the file at line pos under mode m.
func (x *lineIndex) matchAt(m matchMode, pat []int32, pos int) bool {
	t := x.fileIDs(m)
	if pos < 0 || pos+len(pat) > len(t) {
		return false
	}
	for i, id := range pat {
		if t[pos+i] != id {
			return false
		}
	}
	return true
}

// kmpTable is the KMP failure function of p.
func kmpTable(p []int32) []int {
	f := make([]int, len(p))
	k := 0
	for i := 1; i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = f[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		f[i] = k
	}
	return f
}

// kmpScan walks t looking for p (len(p) > 0). For every occurrence it calls
// found with the start index; found returns false to stop. It returns the
// length of the longest prefix of p seen anywhere in t and where that prefix
// started.
func kmpScan(t, p []int32, found func(start int) bool) (bestLen, bestAt int) {
	f := kmpTable(p)
	q := 0
	bestAt = -1
	for i, c := range t {
		for q > 0 && p[q] != c {
			q = f[q-1]
		}
		if p[q] == c {
			q++
		}
		if q > bestLen {
			bestLen, bestAt = q, i-q+1
		}
		if q == len(p) {
			if found != nil && !found(i-q+1) {
				return bestLen, bestAt
			}
			q = f[q-1]
		}
	}
	return bestLen, bestAt
}

// excerpt quotes the first line of s, shortened, for error messages.
func excerpt(s string) string {
	s = strings.TrimRight(s, "\r\n")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSuffix(s[:i], "\r") + " …"
	}
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
