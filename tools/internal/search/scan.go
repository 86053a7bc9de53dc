package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
)

const (
	binaryProbeBytes = 8 << 10  // a NUL byte in this prefix marks a binary file
	maxPatternBytes  = 64 << 10 // longer grep patterns are refused
	maxFileOutput    = 4 << 20  // bytes of line text one file may contribute
	ellipsis         = "…"
)

// lineMatcher finds the lines of a buffer that contain a match.
type lineMatcher struct {
	lit []byte         // searched with bytes.Index when re is nil
	re  *regexp.Regexp // compiled so it can never match across a newline
	pf  *prefilter     // candidate lines for re, when it has required literals
}

var errNewline = errors.New("grep matches within one line; the pattern cannot contain a newline")

// compileLineMatcher compiles a grep pattern for searching whole buffers.
// The regexp is rewritten so it can never match a newline, with its
// anchors at line boundaries (see lineOriented): one FindIndex over the
// buffer then finds the first matching line, and searching on from the
// next line start finds the next. Plain literals use bytes.Index; regexps
// with required literals get a prefilter.
func compileLineMatcher(pattern string, literal, ignoreCase bool) (*lineMatcher, error) {
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadPattern, maxPatternBytes)
	}
	if literal {
		if strings.ContainsRune(pattern, '\n') {
			return nil, fmt.Errorf("%w: %v", ErrBadPattern, errNewline)
		}
		if !ignoreCase {
			return &lineMatcher{lit: []byte(pattern)}, nil
		}
		pattern = regexp.QuoteMeta(pattern)
	}
	flags := syntax.Perl &^ syntax.OneLine // "^" and "$" at line boundaries
	if ignoreCase {
		flags |= syntax.FoldCase
	}
	re, err := syntax.Parse(pattern, flags)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPattern, err)
	}
	if err := lineOriented(re); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPattern, err)
	}
	re = re.Simplify()
	if re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0 {
		return &lineMatcher{lit: []byte(string(re.Rune))}, nil
	}
	compiled, err := regexp.Compile(re.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPattern, err)
	}
	return &lineMatcher{re: compiled, pf: newPrefilter(re)}, nil
}

// lineOriented makes re match within single lines: it can never match
// "\n", "$" (and "\z") also matches before a "\r\n" so patterns work the
// same on CRLF files, and "\A" is "^" (each line is searched on its own).
func lineOriented(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpBeginText:
		re.Op = syntax.OpBeginLine
	case syntax.OpEndLine, syntax.OpEndText:
		cr := &syntax.Regexp{Op: syntax.OpLiteral, Rune: []rune{'\r'}}
		end := &syntax.Regexp{Op: syntax.OpEndLine}
		*re = syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{
			{Op: syntax.OpQuest, Sub: []*syntax.Regexp{cr}}, end,
		}}
		return nil
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return errNewline
			}
		}
	case syntax.OpAnyChar:
		re.Op = syntax.OpAnyCharNotNL
	case syntax.OpCharClass:
		var out []rune
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo <= '\n' && '\n' <= hi {
				if lo < '\n' {
					out = append(out, lo, '\n'-1)
				}
				if hi > '\n' {
					out = append(out, '\n'+1, hi)
				}
				continue
			}
			out = append(out, lo, hi)
		}
		if len(out) == 0 {
			re.Op, re.Rune = syntax.OpNoMatch, nil
		} else {
			re.Rune = out
		}
	}
	for _, sub := range re.Sub {
		if err := lineOriented(sub); err != nil {
			return err
		}
	}
	return nil
}

// lineHit is a matching line: its bounds (without the "\n"), number and
// where the first match in it starts.
type lineHit struct {
	start, end int
	line       int
	at         int
}

// scanWindow is how much of a buffer one regexp call searches (extended to
// the end of a line), so a slow pattern on a large file still notices a
// cancelled context.
const scanWindow = 1 << 20

// scan calls hit for each matching line of buf, in order, until hit
// returns false. It searches the buffer as a whole (in windows of whole
// lines) and counts lines only up to each hit, so its cost is linear in
// len(buf). It returns false when ctx was cancelled before the end.
func (lm *lineMatcher) scan(ctx context.Context, buf []byte, hit func(lineHit) bool) bool {
	if lm.pf != nil {
		return lm.scanCandidates(ctx, buf, hit)
	}
	pos, line, counted := 0, 1, 0
	for pos < len(buf) {
		var s int
		if lm.re == nil {
			i := bytes.Index(buf[pos:], lm.lit)
			if i < 0 {
				return true
			}
			s = pos + i
		} else {
			// A match never spans lines, so a window of whole lines finds
			// the same first match as the rest of the buffer would.
			wend := len(buf)
			if pos+scanWindow < len(buf) {
				if i := bytes.IndexByte(buf[pos+scanWindow:], '\n'); i >= 0 {
					wend = pos + scanWindow + i
				}
			}
			loc := lm.re.FindIndex(buf[pos:wend])
			if loc == nil {
				if wend == len(buf) {
					return true
				}
				pos = wend + 1
				if ctx.Err() != nil {
					return false
				}
				continue
			}
			s = pos + loc[0]
		}
		if s == len(buf) && buf[len(buf)-1] == '\n' {
			return true // an empty match after the final newline is not a line
		}
		start := pos + bytes.LastIndexByte(buf[pos:s], '\n') + 1
		end := len(buf)
		if i := bytes.IndexByte(buf[s:], '\n'); i >= 0 {
			end = s + i
		}
		line += bytes.Count(buf[counted:start], []byte{'\n'})
		counted = start
		if !hit(lineHit{start: start, end: end, line: line, at: s}) {
			return true
		}
		pos = end + 1
	}
	return true
}

// scanCandidates is scan for a regexp with a prefilter: the regexp runs
// only on the lines where a needle occurs. Every match lies within one
// line and contains a needle, so no matching line is missed.
func (lm *lineMatcher) scanCandidates(ctx context.Context, buf []byte, hit func(lineHit) bool) bool {
	next := make([]int, len(lm.pf.needles))
	for i := range next {
		next[i] = -2
	}
	pos, line, counted := 0, 1, 0
	for n := 0; pos < len(buf); n++ {
		if n%1024 == 1023 && ctx.Err() != nil {
			return false
		}
		c := lm.pf.find(buf, pos, next)
		if c < 0 {
			return true
		}
		start := pos + bytes.LastIndexByte(buf[pos:c], '\n') + 1
		end := len(buf)
		if i := bytes.IndexByte(buf[c:], '\n'); i >= 0 {
			end = c + i
		}
		if loc := lm.re.FindIndex(buf[start:end]); loc != nil {
			line += bytes.Count(buf[counted:start], []byte{'\n'})
			counted = start
			if !hit(lineHit{start: start, end: end, line: line, at: start + loc[0]}) {
				return true
			}
		}
		pos = end + 1
	}
	return true
}

// searcher searches one file at a time; it is shared by the workers.
type searcher struct {
	fsys    FS
	lm      *lineMatcher
	mode    string
	need    int // matching lines worth collecting per file in content mode
	context int
	maxFile int64
	maxLine int
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func (s *searcher) file(ctx context.Context, j job) fileResult {
	r := fileResult{path: j.path}
	if ctx.Err() != nil {
		r.canceled = true
		return r
	}
	if j.size > s.maxFile {
		r.tooLarge = true
		return r
	}
	f, err := s.fsys.Open(j.path)
	if err != nil {
		r.unreadable = true
		return r
	}
	bp := bufPool.Get().(*[]byte)
	data, status, err := readFile(f, j.size, s.maxFile, (*bp)[:0])
	f.Close()
	defer func() {
		*bp = data[:0]
		bufPool.Put(bp)
	}()
	switch {
	case err != nil:
		r.unreadable = true
		return r
	case status == readBinary:
		r.binary = true
		return r
	case status == readTooLarge:
		r.tooLarge = true
		return r
	}
	r.searched = true
	r.bytes = int64(len(data))
	var complete bool
	switch s.mode {
	case ModeFiles:
		complete = s.lm.scan(ctx, data, func(lineHit) bool { r.count = 1; return false })
	case ModeCount:
		complete = s.lm.scan(ctx, data, func(lineHit) bool { r.count++; return true })
	default:
		var hits []lineHit
		complete = s.lm.scan(ctx, data, func(h lineHit) bool { hits = append(hits, h); return len(hits) < s.need })
		r.matches, r.partial = s.matches(j.path, data, hits)
		r.count = len(r.matches)
	}
	if !complete {
		return fileResult{path: j.path, canceled: true}
	}
	return r
}

// matches builds the content-mode results of one file. Context is merged:
// a match's after-context stops before the next match, and its
// before-context starts after the previous match's after-context. Past
// maxFileOutput bytes of text it stops and reports partial, which bounds
// the memory a file's results (and results waiting to be put in order)
// can take.
func (s *searcher) matches(path string, data []byte, hits []lineHit) (out []Match, partial bool) {
	out = make([]Match, 0, len(hits))
	last := 0 // the last line number already in the output
	size := 0
	for i, h := range hits {
		if size > maxFileOutput {
			return out, true
		}
		m := Match{
			Path:   path,
			Line:   h.line,
			Column: h.at - h.start + 1,
			Text:   clipLine(data[h.start:h.end], h.at-h.start, s.maxLine),
		}
		if s.context > 0 {
			if n := h.line - max(h.line-s.context, last+1); n > 0 {
				m.Before = make([]string, n)
				pos := h.start
				for k := n - 1; k >= 0 && pos > 0; k-- {
					end := pos - 1
					start := bytes.LastIndexByte(data[:end], '\n') + 1
					m.Before[k] = clipLine(data[start:end], 0, s.maxLine)
					pos = start
				}
			}
			want := s.context
			if i+1 < len(hits) {
				want = min(want, hits[i+1].line-h.line-1)
			}
			for pos := h.end + 1; want > 0 && pos < len(data); want-- {
				end := len(data)
				if j := bytes.IndexByte(data[pos:], '\n'); j >= 0 {
					end = pos + j
				}
				m.After = append(m.After, clipLine(data[pos:end], 0, s.maxLine))
				pos = end + 1
			}
			last = h.line + len(m.After)
		} else {
			last = h.line
		}
		size += len(m.Text)
		for _, l := range m.Before {
			size += len(l)
		}
		for _, l := range m.After {
			size += len(l)
		}
		out = append(out, m)
	}
	return out, false
}

// clipLine returns line without a trailing "\r", cut to about n bytes
// around offset at (a window starting a little before it) with "…" where
// text was cut, never splitting a UTF-8 sequence.
func clipLine(line []byte, at, n int) string {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) <= n {
		return string(line)
	}
	start := 0
	if at > n/4 {
		start = min(at-n/4, len(line)-n)
	}
	end := start + n
	for start > 0 && !isRuneStart(line[start]) {
		start--
	}
	for end < len(line) && end > start && !isRuneStart(line[end]) {
		end--
	}
	var b strings.Builder
	b.Grow(end - start + 2*len(ellipsis))
	if start > 0 {
		b.WriteString(ellipsis)
	}
	b.Write(line[start:end])
	if end < len(line) {
		b.WriteString(ellipsis)
	}
	return b.String()
}

type readStatus int

const (
	readOK readStatus = iota
	readBinary
	readTooLarge
)

// readFile reads r into buf (grown as needed), stopping early when the
// first 8 KiB hold a NUL byte or the content exceeds limit. size is the
// listed size, a hint (-1 when unknown): the file may have changed since.
func readFile(r io.Reader, size, limit int64, buf []byte) ([]byte, readStatus, error) {
	if want := min(limit, size) + 1; size >= 0 && int64(cap(buf)) < want {
		buf = make([]byte, 0, want)
	}
	probed := false
	idle := 0
	for {
		if len(buf) == cap(buf) {
			grow := min(int64(max(cap(buf), 32<<10)), limit+1-int64(len(buf)))
			if grow <= 0 {
				return buf, readTooLarge, nil
			}
			buf = append(buf, make([]byte, grow)...)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if !probed && (len(buf) >= binaryProbeBytes || err != nil) {
			probed = true
			if bytes.IndexByte(buf[:min(len(buf), binaryProbeBytes)], 0) >= 0 {
				return buf, readBinary, nil
			}
		}
		if int64(len(buf)) > limit {
			return buf, readTooLarge, nil
		}
		if err == io.EOF {
			return buf, readOK, nil
		}
		if err != nil {
			return buf, readOK, err
		}
		if n == 0 {
			if idle++; idle > 100 {
				return buf, readOK, io.ErrNoProgress
			}
		} else {
			idle = 0
		}
	}
}
