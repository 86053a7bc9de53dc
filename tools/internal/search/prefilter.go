package search

import (
	"bytes"
	"regexp/syntax"
)

// A prefilter finds candidate lines for a regexp with plain substring
// search: every match contains one of its needles, so only lines holding a
// needle need the (much slower) regexp engine. Go's regexp has no DFA and
// scans text it cannot skip at tens of MB/s; bytes.Index runs at GB/s.
type prefilter struct {
	needles [][]byte
	fold    bool // ASCII case-insensitive needles
	anchors []int
}

const (
	maxNeedles   = 8 // more alternatives are not worth a search each
	minNeedleLen = 2 // shorter needles match nearly every line
)

// reqSet says that every match of a regexp contains one of lits.
type reqSet struct {
	lits []string
	fold bool
	ok   bool
}

// score ranks a requirement: the length of its shortest needle.
func (r reqSet) score() int {
	if !r.ok {
		return -1
	}
	s := -1
	for _, l := range r.lits {
		if s < 0 || len(l) < s {
			s = len(l)
		}
	}
	return s
}

// required computes a requirement of re, or one with ok false.
func required(re *syntax.Regexp) reqSet {
	switch re.Op {
	case syntax.OpLiteral:
		return reqSet{lits: []string{string(re.Rune)}, fold: re.Flags&syntax.FoldCase != 0, ok: true}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best reqSet
		for _, sub := range re.Sub {
			if r := required(sub); r.score() > best.score() ||
				r.ok && r.score() == best.score() && len(r.lits) < len(best.lits) {
				best = r
			}
		}
		return best
	case syntax.OpAlternate:
		out := reqSet{ok: true}
		for _, sub := range re.Sub {
			r := required(sub)
			if !r.ok || len(out.lits)+len(r.lits) > maxNeedles {
				return reqSet{}
			}
			out.lits = append(out.lits, r.lits...)
			out.fold = out.fold || r.fold
		}
		return out
	}
	return reqSet{}
}

// newPrefilter returns a prefilter for re, or nil when no useful one
// exists.
func newPrefilter(re *syntax.Regexp) *prefilter {
	r := required(re)
	if r.score() < minNeedleLen {
		return nil
	}
	p := &prefilter{fold: r.fold}
	for _, l := range r.lits {
		if r.fold && !foldSafe(l) {
			return nil
		}
		p.needles = append(p.needles, []byte(l))
		if r.fold {
			p.anchors = append(p.anchors, anchorFor(l))
		}
	}
	return p
}

// foldSafe reports whether every case-insensitive match of lit is an ASCII
// string of the same length, so comparing windows with EqualFold finds
// them all. Under Unicode simple folding only k and s have non-ASCII
// partners (U+212A KELVIN SIGN, U+017F LONG S).
func foldSafe(lit string) bool {
	for i := 0; i < len(lit); i++ {
		switch c := lit[i]; {
		case c >= 0x80, c == 'k', c == 'K', c == 's', c == 'S':
			return false
		}
	}
	return true
}

// anchorFor picks the byte of lit least likely to occur in text, so a
// case-insensitive search jumps between few candidates.
func anchorFor(lit string) int {
	best, bestRank := 0, 1<<30
	for i := 0; i < len(lit); i++ {
		if r := byteRank(lit[i]); r < bestRank {
			best, bestRank = i, r
		}
	}
	return best
}

// byteRank is a rough frequency rank for bytes in source code (lower is
// rarer): punctuation other than the commonest, then letters by their
// English frequency, then space.
func byteRank(c byte) int {
	const letters = "zqxjkvbpygfwmucldrhsnioate"
	switch {
	case c == ' ' || c == '\t':
		return 100
	case c == '.' || c == ',' || c == '(' || c == ')' || c == '=' || c == '"' || c == ';':
		return 40
	case c >= '0' && c <= '9':
		return 30
	case c|0x20 >= 'a' && c|0x20 <= 'z':
		return 50 + bytes.IndexByte([]byte(letters), c|0x20)
	}
	return 10
}

// find returns the first offset at or after pos where a needle occurs, or
// -1. next caches each needle's next occurrence between calls (-2: not yet
// searched, -1: none left), so each needle scans the buffer once.
func (p *prefilter) find(buf []byte, pos int, next []int) int {
	best := -1
	for i, n := range p.needles {
		if next[i] == -1 {
			continue
		}
		if next[i] < pos {
			var j int
			if p.fold {
				j = indexFold(buf[pos:], n, p.anchors[i])
			} else {
				j = bytes.Index(buf[pos:], n)
			}
			if j < 0 {
				next[i] = -1
				continue
			}
			next[i] = pos + j
		}
		if best < 0 || next[i] < best {
			best = next[i]
		}
	}
	return best
}

// indexFold is bytes.Index ignoring ASCII case, for a foldSafe needle,
// jumping between occurrences of the needle's anchor byte in either case.
func indexFold(s, needle []byte, anchor int) int {
	a := needle[anchor]
	lo, up := a, a
	if a|0x20 >= 'a' && a|0x20 <= 'z' {
		lo, up = a|0x20, a&^0x20
	}
	nextLo, nextUp := -2, -2
	for off := anchor; off+len(needle)-anchor <= len(s); {
		if nextLo != -1 && nextLo < off {
			if nextLo = bytes.IndexByte(s[off:], lo); nextLo >= 0 {
				nextLo += off
			}
		}
		if lo == up {
			nextUp = nextLo
		} else if nextUp != -1 && nextUp < off {
			if nextUp = bytes.IndexByte(s[off:], up); nextUp >= 0 {
				nextUp += off
			}
		}
		c := nextLo
		if c < 0 || nextUp >= 0 && nextUp < c {
			c = nextUp
		}
		if c < 0 {
			return -1
		}
		start := c - anchor
		if start+len(needle) <= len(s) && bytes.EqualFold(s[start:start+len(needle)], needle) {
			return start
		}
		off = c + 1
	}
	return -1
}
