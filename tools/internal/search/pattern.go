package search

import (
	"fmt"
	"math/bits"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Pattern bounds. A glob expands its {a,b} groups into alternatives before
// matching, so its length and the number of alternatives are capped to keep
// compilation cheap whatever the model sends.
const (
	maxGlobLen         = 1024 // bytes in one glob pattern
	maxAlternatives    = 256  // alternatives after brace expansion
	maxIgnoreLineBytes = 4096 // longer gitignore lines are skipped
)

// segKind says how a segment matches one path component.
type segKind uint8

const (
	segExact    segKind = iota // name == lit
	segAny                     // "*": any name
	segPrefix                  // "lit*"
	segSuffix                  // "*lit"
	segRegexp                  // anything else, compiled to an anchored RE2 regexp
	segNever                   // a character class that can match nothing
	segGlobstar                // "**": zero or more components
)

// segment matches one path component (a name without "/").
type segment struct {
	kind segKind
	lit  string
	re   *regexp.Regexp
	// dotOK: the segment begins with a literal '.', so it may match a hidden
	// name even when wildcards may not (the shell rule).
	dotOK bool
}

func (s *segment) match(name string) bool {
	switch s.kind {
	case segExact:
		return name == s.lit
	case segAny, segGlobstar:
		return true
	case segPrefix:
		return strings.HasPrefix(name, s.lit)
	case segSuffix:
		return strings.HasSuffix(name, s.lit)
	case segRegexp:
		return s.re.MatchString(name)
	}
	return false
}

// token kinds inside one segment.
type tokKind uint8

const (
	tokLit tokKind = iota
	tokStar
	tokQuestion
	tokClass
)

type token struct {
	kind tokKind
	text string // the literal for tokLit, the RE2 class for tokClass
}

// posixClasses are the [:name:] classes wildmatch and RE2 both know.
var posixClasses = map[string]bool{
	"alnum": true, "alpha": true, "ascii": true, "blank": true, "cntrl": true, "digit": true,
	"graph": true, "lower": true, "print": true, "punct": true, "space": true, "upper": true,
	"word": true, "xdigit": true,
}

// compileSegment compiles one component of a pattern: "*" (any run of
// characters), "?" (one character), "[...]" (a class: "!" or "^" negates, a
// leading "]" is literal, ranges, [:alpha:] classes, backslash escapes) and
// "\x" (a literal x). A segment that is exactly "**" is the globstar.
func compileSegment(s string) (segment, error) {
	if s == "**" {
		return segment{kind: segGlobstar}, nil
	}
	var toks []token
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			toks = append(toks, token{kind: tokLit, text: lit.String()})
			lit.Reset()
		}
	}
	never := false
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\\':
			if i+1 >= len(s) {
				return segment{}, fmt.Errorf("%w: trailing backslash", ErrBadPattern)
			}
			_, w := utf8.DecodeRuneInString(s[i+1:])
			lit.WriteString(s[i+1 : i+1+w])
			i += 1 + w
		case '*':
			flush()
			if len(toks) == 0 || toks[len(toks)-1].kind != tokStar {
				toks = append(toks, token{kind: tokStar})
			}
			i++
		case '?':
			flush()
			toks = append(toks, token{kind: tokQuestion})
			i++
		case '[':
			class, empty, n, err := parseClass(s[i:])
			if err != nil {
				return segment{}, err
			}
			flush()
			never = never || empty
			toks = append(toks, token{kind: tokClass, text: class})
			i += n
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	seg := segment{dotOK: len(toks) > 0 && toks[0].kind == tokLit && toks[0].text[0] == '.'}
	switch {
	case never:
		seg.kind = segNever
	case len(toks) == 0:
		// An empty segment never matches a name.
		seg.kind = segNever
	case len(toks) == 1 && toks[0].kind == tokLit:
		seg.kind, seg.lit = segExact, toks[0].text
	case len(toks) == 1 && toks[0].kind == tokStar:
		seg.kind = segAny
	case len(toks) == 2 && toks[0].kind == tokLit && toks[1].kind == tokStar:
		seg.kind, seg.lit = segPrefix, toks[0].text
	case len(toks) == 2 && toks[0].kind == tokStar && toks[1].kind == tokLit:
		seg.kind, seg.lit = segSuffix, toks[1].text
	default:
		var b strings.Builder
		b.WriteString(`\A(?s:`)
		for _, t := range toks {
			switch t.kind {
			case tokLit:
				writeQuoted(&b, t.text)
			case tokStar:
				b.WriteString(`.*`)
			case tokQuestion:
				b.WriteString(`.`)
			case tokClass:
				b.WriteString(t.text)
			}
		}
		b.WriteString(`)\z`)
		re, err := regexp.Compile(b.String())
		if err != nil {
			return segment{}, fmt.Errorf("%w: %v", ErrBadPattern, err)
		}
		seg.kind, seg.re = segRegexp, re
	}
	return seg, nil
}

// writeQuoted writes lit as an RE2 literal. Bytes that are not valid UTF-8
// become U+FFFD, which is what the regexp engine decodes them to.
func writeQuoted(b *strings.Builder, lit string) {
	if utf8.ValidString(lit) {
		b.WriteString(regexp.QuoteMeta(lit))
		return
	}
	for i := 0; i < len(lit); {
		r, w := utf8.DecodeRuneInString(lit[i:])
		if r == utf8.RuneError && w == 1 {
			b.WriteString(`\x{fffd}`)
		} else {
			b.WriteString(regexp.QuoteMeta(lit[i : i+w]))
		}
		i += w
	}
}

// parseClass parses the bracket expression at the start of s and returns it
// as an RE2 class, whether it can match nothing, and how many bytes it used.
func parseClass(s string) (class string, empty bool, n int, err error) {
	i := 1
	negate := false
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		negate = true
		i++
	}
	var b strings.Builder
	items := 0
	first := true
	// next reads one (possibly escaped) character of the class.
	next := func() (rune, bool) {
		if i >= len(s) {
			return 0, false
		}
		if s[i] == '\\' {
			i++
			if i >= len(s) {
				return 0, false
			}
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		return r, true
	}
	for {
		if i >= len(s) {
			return "", false, 0, fmt.Errorf("%w: unterminated [", ErrBadPattern)
		}
		if s[i] == ']' && !first {
			i++
			break
		}
		first = false
		if s[i] == '[' && i+1 < len(s) && s[i+1] == ':' {
			end := strings.Index(s[i+2:], ":]")
			if end < 0 {
				return "", false, 0, fmt.Errorf("%w: unterminated [:", ErrBadPattern)
			}
			name := s[i+2 : i+2+end]
			if !posixClasses[name] {
				return "", false, 0, fmt.Errorf("%w: unknown class [:%s:]", ErrBadPattern, name)
			}
			b.WriteString("[:" + name + ":]")
			items++
			i += 2 + end + 2
			continue
		}
		lo, ok := next()
		if !ok {
			return "", false, 0, fmt.Errorf("%w: unterminated [", ErrBadPattern)
		}
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			i++
			if hi, ok = next(); !ok {
				return "", false, 0, fmt.Errorf("%w: unterminated [", ErrBadPattern)
			}
		}
		if lo > hi {
			continue // an empty range matches nothing, as in wildmatch
		}
		fmt.Fprintf(&b, `\x{%x}-\x{%x}`, lo, hi)
		items++
	}
	switch {
	case items == 0 && !negate:
		return "", true, i, nil
	case items == 0:
		return `[\x{0}-\x{10ffff}]`, false, i, nil
	case negate:
		return "[^" + b.String() + "]", false, i, nil
	}
	return "[" + b.String() + "]", false, i, nil
}

// alternative is one brace-free pattern: a sequence of segments.
type alternative struct {
	segs    []segment
	dirOnly bool // the pattern ended in "/": only directories match
	off     int  // id of the state before segs[0]
}

// matcher matches slash-separated paths against a set of alternatives with
// a small NFA whose states are (alternative, segment index) pairs. Walks use
// it incrementally, one component at a time, to prune directories no match
// can lie under. Its cost is linear in the path length times the number of
// states, whatever the pattern.
type matcher struct {
	alts []alternative
	// hidden lets wildcards ("*", "?", "[...]", "**") match names beginning
	// with "."; otherwise only a segment beginning with a literal "." can.
	hidden  bool
	nstates int
	stAlt   []int32 // state id -> alternative
	stIdx   []int32 // state id -> segment index (len(segs) is accepting)
}

// stateSet is a bitset of matcher states.
type stateSet []uint64

func (s stateSet) has(id int) bool { return s[id>>6]&(1<<(uint(id)&63)) != 0 }
func (s stateSet) add(id int)      { s[id>>6] |= 1 << (uint(id) & 63) }

func (s stateSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// each calls fn for every state in s, in increasing order.
func (s stateSet) each(fn func(id int)) {
	for wi, w := range s {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			fn(wi<<6 + b)
			w &= w - 1
		}
	}
}

func newMatcher(alts []alternative, hidden bool) *matcher {
	m := &matcher{alts: alts, hidden: hidden}
	for i := range m.alts {
		a := &m.alts[i]
		a.off = m.nstates
		for j := 0; j <= len(a.segs); j++ {
			m.stAlt = append(m.stAlt, int32(i))
			m.stIdx = append(m.stIdx, int32(j))
		}
		m.nstates += len(a.segs) + 1
	}
	return m
}

func (m *matcher) newSet() stateSet { return make(stateSet, (m.nstates+63)/64) }

// start is the state set before any component is consumed.
func (m *matcher) start() stateSet {
	s := m.newSet()
	for _, a := range m.alts {
		s.add(a.off)
	}
	m.closure(s)
	return s
}

// closure lets a non-final globstar match zero components. Ids within an
// alternative increase with the segment index, so one forward pass reaches
// the fixed point.
func (m *matcher) closure(s stateSet) {
	for id := 0; id < m.nstates; id++ {
		if !s.has(id) {
			continue
		}
		a := &m.alts[m.stAlt[id]]
		i := int(m.stIdx[id])
		if i < len(a.segs)-1 && a.segs[i].kind == segGlobstar {
			s.add(id + 1)
		}
	}
}

// step consumes one path component. It returns nil when no state survives.
func (m *matcher) step(s stateSet, name string) stateSet {
	hiddenName := !m.hidden && name != "" && name[0] == '.'
	out := m.newSet()
	any := false
	s.each(func(id int) {
		a := &m.alts[m.stAlt[id]]
		i := int(m.stIdx[id])
		if i == len(a.segs) {
			return
		}
		seg := &a.segs[i]
		if seg.kind == segGlobstar {
			if hiddenName {
				return
			}
			out.add(id)
			if i == len(a.segs)-1 {
				// A final "**" matches one or more components: "a/**"
				// matches everything inside a, not a itself.
				out.add(id + 1)
			}
			any = true
			return
		}
		if hiddenName && !seg.dotOK {
			return
		}
		if seg.match(name) {
			out.add(id + 1)
			any = true
		}
	})
	if !any {
		return nil
	}
	m.closure(out)
	return out
}

// accepts reports whether a path that led to s matches.
func (m *matcher) accepts(s stateSet, isDir bool) bool {
	for i := range m.alts {
		a := &m.alts[i]
		if s.has(a.off+len(a.segs)) && (isDir || !a.dirOnly) {
			return true
		}
	}
	return false
}

// acceptsResult is accepts for Glob results: a pattern ending in "/"
// returns directories only, any other pattern non-directories only.
func (m *matcher) acceptsResult(s stateSet, isDir bool) bool {
	for i := range m.alts {
		a := &m.alts[i]
		if s.has(a.off+len(a.segs)) && isDir == a.dirOnly {
			return true
		}
	}
	return false
}

// live reports whether a descendant of a directory that led to s can match.
func (m *matcher) live(s stateSet) bool {
	found := false
	s.each(func(id int) {
		if int(m.stIdx[id]) < len(m.alts[m.stAlt[id]].segs) {
			found = true
		}
	})
	return found
}

// matchPath matches a whole root-relative path.
func (m *matcher) matchPath(p string, isDir bool) bool {
	s := m.start()
	for p != "" {
		name := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			name, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if name == "" {
			continue
		}
		if s = m.step(s, name); s == nil {
			return false
		}
	}
	return m.accepts(s, isDir)
}

// compileGlob compiles a glob pattern relative to the search root: "*",
// "?", "[...]", "{a,b}" (nestable), and "**" as a whole component for any
// number of directories. A trailing "/" restricts matches to directories. A
// leading "./" is accepted; an absolute pattern or a ".." component is
// ErrBadPath.
func compileGlob(pattern string, hidden bool) (*matcher, error) {
	if pattern == "" {
		return nil, fmt.Errorf("%w: empty pattern", ErrBadPattern)
	}
	if len(pattern) > maxGlobLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadPattern, maxGlobLen)
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, fmt.Errorf("%w: NUL byte in pattern", ErrBadPath)
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("%w: pattern %q is absolute; patterns are relative to the search root", ErrBadPath, pattern)
	}
	expanded, err := expandBraces(pattern, maxAlternatives)
	if err != nil {
		return nil, err
	}
	alts := make([]alternative, 0, len(expanded))
	for _, p := range expanded {
		if strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%w: pattern %q is absolute; patterns are relative to the search root", ErrBadPath, pattern)
		}
		a, err := compileAlternative(p, true)
		if err != nil {
			return nil, err
		}
		if len(a.segs) == 0 {
			return nil, fmt.Errorf("%w: pattern %q names the search root itself", ErrBadPattern, pattern)
		}
		alts = append(alts, a)
	}
	return newMatcher(alts, hidden), nil
}

// compileAlternative splits a brace-free pattern into segments. With glob
// set, "." components are dropped and ".." is refused; in gitignore
// patterns they are literal names that never match.
func compileAlternative(p string, glob bool) (alternative, error) {
	var a alternative
	if strings.HasSuffix(p, "/") {
		a.dirOnly = true
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || (glob && c == ".") {
			continue
		}
		if glob && c == ".." {
			return a, fmt.Errorf("%w: \"..\" in pattern; patterns are relative to the search root", ErrBadPath)
		}
		seg, err := compileSegment(c)
		if err != nil {
			return a, err
		}
		if seg.kind == segGlobstar && len(a.segs) > 0 && a.segs[len(a.segs)-1].kind == segGlobstar {
			continue // "**/**" is "**"
		}
		a.segs = append(a.segs, seg)
	}
	return a, nil
}

// braceNode is a piece of a pattern: literal text or a {a,b} group.
type braceNode struct {
	lit  string
	alts [][]braceNode // nil for literal text
}

// expandBraces expands every {a,b} group of p (groups nest; "\{" and "{"
// inside a bracket expression are literal; a lone "}" or "," is literal) and
// returns at most max distinct alternatives, in order.
func expandBraces(p string, max int) ([]string, error) {
	if !strings.ContainsRune(p, '{') {
		return []string{p}, nil
	}
	bp := braceParser{s: p}
	seq, err := bp.seq(false)
	if err != nil {
		return nil, err
	}
	out, err := expandSeq(seq, max)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(out))
	uniq := out[:0]
	for _, s := range out {
		if !seen[s] {
			seen[s] = true
			uniq = append(uniq, s)
		}
	}
	return uniq, nil
}

type braceParser struct {
	s string
	i int
}

// seq parses until the end of the string or, inside a group, until the
// "," or "}" that ends the current alternative.
func (bp *braceParser) seq(inGroup bool) ([]braceNode, error) {
	var nodes []braceNode
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			nodes = append(nodes, braceNode{lit: lit.String()})
			lit.Reset()
		}
	}
	for bp.i < len(bp.s) {
		c := bp.s[bp.i]
		switch {
		case c == '\\':
			end := min(bp.i+2, len(bp.s))
			lit.WriteString(bp.s[bp.i:end]) // the escape stays for the segment compiler
			bp.i = end
		case c == '[':
			// Copy a bracket expression whole so "{", "," and "}" inside it
			// stay literal; an unterminated one is left to the segment
			// compiler to report.
			n := bracketLen(bp.s[bp.i:])
			lit.WriteString(bp.s[bp.i : bp.i+n])
			bp.i += n
		case c == '{':
			flush()
			bp.i++
			var alts [][]braceNode
			for {
				alt, err := bp.seq(true)
				if err != nil {
					return nil, err
				}
				alts = append(alts, alt)
				if bp.i >= len(bp.s) {
					return nil, fmt.Errorf("%w: unmatched {", ErrBadPattern)
				}
				sep := bp.s[bp.i]
				bp.i++
				if sep == '}' {
					break
				}
			}
			nodes = append(nodes, braceNode{alts: alts})
		case inGroup && (c == ',' || c == '}'):
			flush()
			return nodes, nil
		default:
			lit.WriteByte(c)
			bp.i++
		}
	}
	flush()
	return nodes, nil
}

// bracketLen returns the length of the bracket expression at the start of
// s, or 1 when it is unterminated.
func bracketLen(s string) int {
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		i++
	}
	if i < len(s) && s[i] == ']' {
		i++
	}
	for i < len(s) {
		switch {
		case s[i] == '\\':
			i += 2
		case s[i] == '[' && i+1 < len(s) && s[i+1] == ':':
			if end := strings.Index(s[i+2:], ":]"); end >= 0 {
				i += 2 + end + 2
			} else {
				i++
			}
		case s[i] == ']':
			return i + 1
		default:
			i++
		}
	}
	return 1
}

// expandSeq returns the cartesian product of a sequence's nodes.
func expandSeq(seq []braceNode, max int) ([]string, error) {
	out := []string{""}
	for _, n := range seq {
		if n.alts == nil {
			for i := range out {
				out[i] += n.lit
			}
			continue
		}
		var choices []string
		for _, alt := range n.alts {
			e, err := expandSeq(alt, max)
			if err != nil {
				return nil, err
			}
			if len(choices)+len(e) > max {
				return nil, fmt.Errorf("%w: more than %d alternatives", ErrBadPattern, max)
			}
			choices = append(choices, e...)
		}
		if len(out)*len(choices) > max {
			return nil, fmt.Errorf("%w: more than %d alternatives", ErrBadPattern, max)
		}
		next := make([]string, 0, len(out)*len(choices))
		for _, o := range out {
			for _, c := range choices {
				next = append(next, o+c)
			}
		}
		out = next
	}
	return out, nil
}
