package textedit

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Edit is one replacement of edit_file.
type Edit struct {
	OldText    string
	NewText    string
	ReplaceAll bool
}

// MatchLevel says how an edit's OldText was found.
type MatchLevel int

const (
	// MatchExact: OldText occurs byte for byte.
	MatchExact MatchLevel = iota
	// MatchLineEndings: OldText occurs once "\r\n" and "\n" are treated alike.
	MatchLineEndings
	// MatchIndentation: OldText's lines equal whole lines of the file once
	// leading white space is set aside, with a consistent indentation
	// offset; NewText was re-indented.
	MatchIndentation
)

func (l MatchLevel) String() string {
	switch l {
	case MatchExact:
		return "exact"
	case MatchLineEndings:
		return "line-endings"
	case MatchIndentation:
		return "indentation"
	}
	return "MatchLevel(" + strconv.Itoa(int(l)) + ")"
}

// EditResult reports how one edit was applied.
type EditResult struct {
	Count int        // replacements made
	Level MatchLevel // how OldText was matched
	Lines []int      // 1-based line of each replacement, in the text the edit applied to
}

// EditErrorKind classifies an EditError.
type EditErrorKind string

const (
	EditEmptyOldText EditErrorKind = "empty_old_text"
	EditNotFound     EditErrorKind = "not_found"
	EditAmbiguous    EditErrorKind = "ambiguous"
)

// EditError is the error of ApplyEdits.
type EditError struct {
	Index   int // 0-based index of the failing edit
	Kind    EditErrorKind
	Matches int   // for EditAmbiguous: how many matches (at least)
	Lines   []int // for EditAmbiguous: 1-based lines of the first matches
	msg     string
}

func (e *EditError) Error() string { return e.msg }

// maxListed bounds how many matches an ambiguity error counts and lists.
const (
	maxCounted = 1000
	maxListed  = 10
)

// ApplyEdits applies edits in order to content, all or nothing, and returns
// the new content and the number of replacements of each edit. On error it
// returns content unchanged, nil and an *EditError. See the package
// documentation for the matching rules.
func ApplyEdits(content string, edits []Edit) (string, []int, error) {
	out, res, err := ApplyEditsDetailed(content, edits)
	if err != nil {
		return content, nil, err
	}
	counts := make([]int, len(res))
	for i, r := range res {
		counts[i] = r.Count
	}
	return out, counts, nil
}

// ApplyEditsDetailed is ApplyEdits reporting, per edit, the match level and
// the lines replaced.
func ApplyEditsDetailed(content string, edits []Edit) (string, []EditResult, error) {
	style := detectEOL(content)
	cur := content
	results := make([]EditResult, len(edits))
	for i, e := range edits {
		if e.OldText == "" {
			return content, nil, &EditError{Index: i, Kind: EditEmptyOldText,
				msg: fmt.Sprintf("edits[%d]: old_text is empty", i)}
		}
		next, r, err := applyEdit(cur, e, i, style)
		if err != nil {
			return content, nil, err
		}
		cur, results[i] = next, r
	}
	return cur, results, nil
}

// span is a replacement of cur[start:end] by text.
type span struct {
	start, end int
	text       string
}

func applyEdit(cur string, e Edit, idx int, style eolStyle) (string, EditResult, error) {
	if style == eolNone {
		style = detectEOL(e.NewText)
	}
	newText := translateEOL(e.NewText, style)

	// Level 0: byte for byte.
	if starts := findAll(cur, e.OldText, e.ReplaceAll, true); len(starts) > 0 {
		if err := checkUnique(cur, starts, e, idx); err != nil {
			return "", EditResult{}, err
		}
		spans := make([]span, len(starts))
		for i, s := range starts {
			spans[i] = span{s, s + len(e.OldText), newText}
		}
		return splice(cur, spans, MatchExact)
	}

	// Level 1: "\r\n" and "\n" alike.
	view := newLFView(cur)
	oldLF := strings.ReplaceAll(e.OldText, "\r\n", "\n")
	if len(view.cr) > 0 || oldLF != e.OldText {
		if starts := findAll(view.s, oldLF, e.ReplaceAll, false); len(starts) > 0 {
			spans := make([]span, len(starts))
			for i, s := range starts {
				spans[i] = span{view.orig(s), view.orig(s + len(oldLF)), newText}
			}
			if err := checkUniqueSpans(cur, spans, e, idx); err != nil {
				return "", EditResult{}, err
			}
			return splice(cur, spans, MatchLineEndings)
		}
	}

	// Level 2: whole lines, leading white space set aside.
	newLF := strings.ReplaceAll(e.NewText, "\r\n", "\n")
	spans, ok := indentMatches(view, oldLF, newLF, e.ReplaceAll, style)
	if ok && len(spans) > 0 {
		if err := checkUniqueSpans(cur, spans, e, idx); err != nil {
			return "", EditResult{}, err
		}
		return splice(cur, spans, MatchIndentation)
	}

	return "", EditResult{}, &EditError{Index: idx, Kind: EditNotFound,
		msg: fmt.Sprintf("edits[%d]: old_text not found (it starts %q)%s", idx, excerpt(e.OldText), nearMiss(view, oldLF))}
}

// findAll returns where sub occurs in s: every start, overlapping ones
// included, up to maxCounted+1 of them; with nonOverlapping, every
// non-overlapping occurrence from the left instead. With keepCRLF, an
// occurrence that would split a "\r\n" is not one.
func findAll(s, sub string, nonOverlapping, keepCRLF bool) []int {
	var starts []int
	for off := 0; off <= len(s); {
		k := strings.Index(s[off:], sub)
		if k < 0 {
			break
		}
		b, e := off+k, off+k+len(sub)
		if keepCRLF && ((b > 0 && s[b-1] == '\r' && s[b] == '\n') || (e < len(s) && s[e-1] == '\r' && s[e] == '\n')) {
			off = b + 1
			continue
		}
		starts = append(starts, b)
		if nonOverlapping {
			off = e
			continue
		}
		if len(starts) > maxCounted {
			break
		}
		off += k + 1
	}
	return starts
}

func checkUnique(cur string, starts []int, e Edit, idx int) error {
	if e.ReplaceAll || len(starts) == 1 {
		return nil
	}
	return ambiguous(cur, starts, idx)
}

func checkUniqueSpans(cur string, spans []span, e Edit, idx int) error {
	if e.ReplaceAll || len(spans) == 1 {
		return nil
	}
	starts := make([]int, len(spans))
	for i, s := range spans {
		starts[i] = s.start
	}
	return ambiguous(cur, starts, idx)
}

func ambiguous(cur string, starts []int, idx int) error {
	n := len(starts)
	count := strconv.Itoa(n)
	if n > maxCounted {
		n, count = maxCounted, "more than "+strconv.Itoa(maxCounted)
	}
	lines := lineNumbers(cur, starts[:min(n, maxListed)])
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = strconv.Itoa(l)
	}
	list := strings.Join(parts, ", ")
	if n > maxListed {
		list += ", …"
	}
	return &EditError{Index: idx, Kind: EditAmbiguous, Matches: n, Lines: lines,
		msg: fmt.Sprintf("edits[%d]: old_text is ambiguous: %s matches (lines %s); add surrounding lines to make it unique, or set replace_all", idx, count, list)}
}

// lineNumbers maps sorted byte offsets to 1-based line numbers.
func lineNumbers(s string, offs []int) []int {
	out := make([]int, len(offs))
	line, pos := 1, 0
	for i, o := range offs {
		line += strings.Count(s[pos:o], "\n")
		pos = o
		out[i] = line
	}
	return out
}

// splice replaces the (sorted, non-overlapping) spans of cur.
func splice(cur string, spans []span, level MatchLevel) (string, EditResult, error) {
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	pos := 0
	starts := make([]int, len(spans))
	for i, s := range spans {
		b.WriteString(cur[pos:s.start])
		b.WriteString(s.text)
		pos = s.end
		starts[i] = s.start
	}
	b.WriteString(cur[pos:])
	return b.String(), EditResult{Count: len(spans), Level: level, Lines: lineNumbers(cur, starts)}, nil
}

// lfView is cur with every "\r\n" read as "\n", and the way back.
type lfView struct {
	orig0 string
	s     string
	cr    []int // positions in s of the "\n"s that were "\r\n"
}

func newLFView(cur string) lfView {
	if !strings.Contains(cur, "\r\n") {
		return lfView{orig0: cur, s: cur}
	}
	var b strings.Builder
	b.Grow(len(cur))
	var cr []int
	for i := 0; i < len(cur); i++ {
		if cur[i] == '\r' && i+1 < len(cur) && cur[i+1] == '\n' {
			cr = append(cr, b.Len())
			continue
		}
		b.WriteByte(cur[i])
	}
	return lfView{orig0: cur, s: b.String(), cr: cr}
}

// orig maps an offset of the view to the original: a "\n" that was "\r\n"
// maps to its "\r", so a span never splits a CRLF.
func (v lfView) orig(i int) int {
	return i + sort.SearchInts(v.cr, i)
}

// indentMatches implements level 2: see the package documentation.
func indentMatches(v lfView, oldLF, newLF string, all bool, style eolStyle) ([]span, bool) {
	oldLines := strings.Split(oldLF, "\n")
	trailingNL := false
	if len(oldLines) > 1 && oldLines[len(oldLines)-1] == "" {
		oldLines, trailingNL = oldLines[:len(oldLines)-1], true
	}
	nonBlank := false
	for _, l := range oldLines {
		if !isBlank(l) {
			nonBlank = true
		}
	}
	if !nonBlank {
		return nil, false
	}
	fl := splitViewLines(v.s)
	if len(oldLines) > len(fl.text) {
		return nil, false
	}
	// Candidate positions: equal lines once leading blanks are trimmed.
	ids := make([]int32, len(fl.text))
	dict := map[string]int32{}
	for i, l := range fl.text {
		ids[i] = internID(dict, trimIndent(l))
	}
	pat := make([]int32, len(oldLines))
	for i, l := range oldLines {
		pat[i] = internID(dict, trimIndent(l))
	}
	type cand struct {
		at     int
		tab    int
		delta  int
		region []string
	}
	var cands []cand
	budget := 20_000_000
	kmpScan(ids, pat, func(at int) bool {
		budget -= len(pat)
		if budget < 0 {
			return false
		}
		last := at + len(oldLines) - 1
		if trailingNL && !fl.nl[last] {
			return true
		}
		region := fl.text[at : last+1]
		tab, delta, ok := indentOffset(oldLines, region)
		if !ok {
			return true
		}
		cands = append(cands, cand{at, tab, delta, region})
		return all || len(cands) <= maxCounted
	})
	var spans []span
	next := 0
	for _, c := range cands {
		if all && c.at < next {
			continue
		}
		end := c.at + len(oldLines)
		var s, e int
		s = fl.start[c.at]
		if trailingNL {
			e = fl.start[end-1] + len(fl.text[end-1]) + 1
		} else {
			e = fl.start[end-1] + len(fl.text[end-1])
		}
		text := ""
		if all || len(cands) == 1 { // otherwise the edit is ambiguous
			text = reindent(newLF, oldLines, c.region, c.tab, c.delta)
			if style == eolCRLF {
				text = strings.ReplaceAll(text, "\n", "\r\n")
			}
		}
		spans = append(spans, span{v.orig(s), v.orig(e), text})
		next = end
	}
	return spans, true
}

type viewLines struct {
	text  []string
	start []int
	nl    []bool
}

func splitViewLines(s string) viewLines {
	var v viewLines
	pos := 0
	for pos <= len(s) {
		i := strings.IndexByte(s[pos:], '\n')
		if i < 0 {
			if pos < len(s) {
				v.text = append(v.text, s[pos:])
				v.start = append(v.start, pos)
				v.nl = append(v.nl, false)
			}
			break
		}
		v.text = append(v.text, s[pos:pos+i])
		v.start = append(v.start, pos)
		v.nl = append(v.nl, true)
		pos += i + 1
	}
	return v
}

func internID(d map[string]int32, s string) int32 {
	id, ok := d[s]
	if !ok {
		id = int32(len(d))
		d[s] = id
	}
	return id
}

func isBlank(s string) bool { return strings.Trim(s, " \t") == "" }

func trimIndent(s string) string { return strings.TrimLeft(s, " \t") }

func leading(s string) string { return s[:len(s)-len(trimIndent(s))] }

// width is the column at which indentation ws ends, tabs stopping every tab.
func width(ws string, tab int) int {
	col := 0
	for i := 0; i < len(ws); i++ {
		if ws[i] == '\t' {
			col += tab - col%tab
		} else {
			col++
		}
	}
	return col
}

// tabWidths are tried in order when tabs and spaces must be compared.
var tabWidths = []int{4, 8, 2}

// indentOffset finds the tab width and the column offset that turn the
// indentation of every non-blank old line into that of the region's line.
func indentOffset(old, region []string) (tab, delta int, ok bool) {
	hasTab := false
	for i, l := range old {
		if isBlank(l) {
			continue
		}
		if strings.ContainsRune(leading(l), '\t') || strings.ContainsRune(leading(region[i]), '\t') {
			hasTab = true
		}
	}
	widths := tabWidths
	if !hasTab {
		widths = tabWidths[:1]
	}
	for _, t := range widths {
		first, ok := true, true
		for i, l := range old {
			if isBlank(l) {
				continue
			}
			d := width(leading(region[i]), t) - width(leading(l), t)
			if first {
				delta, first = d, false
			} else if d != delta {
				ok = false
				break
			}
		}
		if ok {
			return t, delta, true
		}
	}
	return 0, 0, false
}

// reindent moves newText by the offset that took old to region.
func reindent(newText string, old, region []string, tab, delta int) string {
	useTabs, known := false, false
	for i, l := range old {
		if isBlank(l) {
			continue
		}
		ws := leading(region[i])
		if strings.ContainsRune(ws, '\t') {
			useTabs, known = true, true
			break
		}
		if ws != "" {
			known = true
		}
	}
	lines := strings.Split(newText, "\n")
	for i, l := range lines {
		if isBlank(l) {
			continue
		}
		ws, rest := leading(l), trimIndent(l)
		mapped := false
		for j, o := range old {
			if !isBlank(o) && leading(o) == ws {
				lines[i] = leading(region[j]) + rest
				mapped = true
				break
			}
		}
		if mapped {
			continue
		}
		w := max(width(ws, tab)+delta, 0)
		tabs := useTabs
		if !known {
			tabs = strings.ContainsRune(ws, '\t')
		}
		if tabs {
			lines[i] = strings.Repeat("\t", w/tab) + strings.Repeat(" ", w%tab) + rest
		} else {
			lines[i] = strings.Repeat(" ", w) + rest
		}
	}
	return strings.Join(lines, "\n")
}

// nearMiss describes the best partial match of old in the file, for a
// not-found error; "" when there is none worth naming.
func nearMiss(v lfView, oldLF string) string {
	old := strings.Split(strings.TrimSuffix(oldLF, "\n"), "\n")
	first := -1
	for i, l := range old {
		if strings.TrimSpace(l) != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return ""
	}
	fl := splitViewLines(v.s)
	want := strings.TrimSpace(old[first])
	bestAt, bestLen, tried := -1, 0, 0
	for i, l := range fl.text {
		if strings.TrimSpace(l) != want {
			continue
		}
		if tried++; tried > maxCounted {
			break
		}
		n := 1
		for first+n < len(old) && i+n < len(fl.text) && strings.TrimSpace(fl.text[i+n]) == strings.TrimSpace(old[first+n]) {
			n++
		}
		if n > bestLen {
			bestAt, bestLen = i, n
		}
	}
	if bestAt < 0 {
		return "; no line of the file matches its first non-blank line, even ignoring white space"
	}
	k := first + bestLen // first differing old line
	if k >= len(old) {
		return fmt.Sprintf("; the lines at file line %d match it except for white space or line breaks", bestAt+1)
	}
	if bestAt+bestLen >= len(fl.text) {
		return fmt.Sprintf("; closest: file line %d, but the file ends before old_text line %d", bestAt+1, k+1)
	}
	return fmt.Sprintf("; closest: file line %d, where old_text line %d %q differs from file line %d %q",
		bestAt+1, k+1, excerpt(old[k]), bestAt+bestLen+1, excerpt(fl.text[bestAt+bestLen]))
}
