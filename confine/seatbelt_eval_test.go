package confine

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// A small reader and evaluator of the SBPL subset SeatbeltProfile emits,
// for the tests: rules (allow|deny OP... FILTER...) where a rule with
// several filters matches when any one does, file operations matched by
// literal, subpath and regex filters, and the last matching rule wins
// (Seatbelt's own order). Filters it does not know (targets, Mach names,
// network addresses) never match a path. Anything it cannot read is an
// error, so a profile it accepts is at least well formed.

type sbToken struct {
	text string
	str  bool // a string literal (text is its value)
}

func tokenizeSBPL(s string) ([]sbToken, error) {
	var out []sbToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ';':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\n' || c == '\t':
			i++
		case c == '(' || c == ')':
			out = append(out, sbToken{text: string(c)})
			i++
		case c == '"':
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated string")
				}
				if s[i] == '\\' {
					if i+1 >= len(s) || (s[i+1] != '\\' && s[i+1] != '"') {
						return nil, fmt.Errorf("unknown escape at %d", i)
					}
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] < 0x20 {
					return nil, fmt.Errorf("control character in a string at %d", i)
				}
				b.WriteByte(s[i])
				i++
			}
			out = append(out, sbToken{text: b.String(), str: true})
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \n\t()\";", rune(s[j])) {
				j++
			}
			out = append(out, sbToken{text: s[i:j]})
			i = j
		}
	}
	return out, nil
}

// sbNode is a parsed list or atom.
type sbNode struct {
	atom *sbToken
	list []sbNode
}

func parseNodes(toks []sbToken, i int) (sbNode, int, error) {
	if i >= len(toks) {
		return sbNode{}, i, fmt.Errorf("unexpected end")
	}
	if toks[i].text == "(" && !toks[i].str {
		n := sbNode{list: []sbNode{}}
		i++
		for {
			if i >= len(toks) {
				return sbNode{}, i, fmt.Errorf("unbalanced (")
			}
			if toks[i].text == ")" && !toks[i].str {
				return n, i + 1, nil
			}
			var c sbNode
			var err error
			c, i, err = parseNodes(toks, i)
			if err != nil {
				return sbNode{}, i, err
			}
			n.list = append(n.list, c)
		}
	}
	if toks[i].text == ")" && !toks[i].str {
		return sbNode{}, i, fmt.Errorf("unbalanced )")
	}
	t := toks[i]
	return sbNode{atom: &t}, i + 1, nil
}

type sbFilter struct {
	kind string // literal, subpath, regex, or the head of any other list
	arg  string
	re   *regexp.Regexp
}

type sbRule struct {
	action  string // allow, deny, version
	ops     []string
	filters []sbFilter
}

func parseSBPL(s string) ([]sbRule, error) {
	toks, err := tokenizeSBPL(s)
	if err != nil {
		return nil, err
	}
	var rules []sbRule
	for i := 0; i < len(toks); {
		var n sbNode
		n, i, err = parseNodes(toks, i)
		if err != nil {
			return nil, err
		}
		if n.atom != nil || len(n.list) == 0 || n.list[0].atom == nil {
			return nil, fmt.Errorf("top level: not a rule")
		}
		r := sbRule{action: n.list[0].atom.text}
		switch r.action {
		case "version":
			if len(n.list) != 2 || n.list[1].atom == nil || n.list[1].atom.text != "1" {
				return nil, fmt.Errorf("bad version form")
			}
			rules = append(rules, r)
			continue
		case "allow", "deny":
		default:
			return nil, fmt.Errorf("unknown form %q", r.action)
		}
		for _, c := range n.list[1:] {
			if c.atom != nil {
				if c.atom.str || len(r.filters) > 0 {
					return nil, fmt.Errorf("%s: operation %q after a filter or quoted", r.action, c.atom.text)
				}
				r.ops = append(r.ops, c.atom.text)
				continue
			}
			if len(c.list) == 0 || c.list[0].atom == nil {
				return nil, fmt.Errorf("empty filter")
			}
			f := sbFilter{kind: c.list[0].atom.text}
			switch f.kind {
			case "literal", "subpath", "regex":
				if len(c.list) != 2 || c.list[1].atom == nil || !c.list[1].atom.str {
					return nil, fmt.Errorf("%s takes one string", f.kind)
				}
				f.arg = c.list[1].atom.text
				if f.kind == "regex" {
					if f.re, err = regexp.Compile(f.arg); err != nil {
						return nil, fmt.Errorf("regex %q: %v", f.arg, err)
					}
				}
			}
			r.filters = append(r.filters, f)
		}
		if len(r.ops) == 0 {
			return nil, fmt.Errorf("%s without an operation", r.action)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// The file operations the parity tests ask about.
const (
	opRead   = "file-read-data"
	opMeta   = "file-read-metadata"
	opWrite  = "file-write-data"
	opUnlink = "file-write-unlink"
	opLink   = "file-link"
)

func opMatches(pattern, op string) bool {
	if strings.HasSuffix(pattern, "*") {
		return strings.HasPrefix(op, strings.TrimSuffix(pattern, "*"))
	}
	return pattern == op
}

// evalSBPL says whether op on path is allowed: (allow default) or (deny
// default) first, then every rule in order, the last match winning.
func evalSBPL(rules []sbRule, op, path string) bool {
	allowed := false
	for _, r := range rules {
		if r.action == "version" {
			continue
		}
		match := false
		for _, o := range r.ops {
			if o == "default" || opMatches(o, op) {
				match = true
			}
		}
		if !match {
			continue
		}
		if len(r.filters) > 0 && !filtersMatch(r.filters, path) {
			continue
		}
		allowed = r.action == "allow"
	}
	return allowed
}

func filtersMatch(fs []sbFilter, path string) bool {
	for _, f := range fs {
		switch f.kind {
		case "literal":
			if path == f.arg {
				return true
			}
		case "subpath":
			if Within(path, f.arg) {
				return true
			}
		case "regex":
			if f.re.MatchString(path) {
				return true
			}
		}
	}
	return false
}

// macCanonical is the spelling the macOS kernel judges: /tmp, /var and
// /etc resolved into /private.
func macCanonical(p string) string {
	for _, a := range privateAliases {
		if Within(p, a) {
			return "/private" + p
		}
	}
	return filepath.Clean(p)
}
