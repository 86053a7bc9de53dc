package textedit

import (
	"math"
	"strconv"
	"strings"
)

// diffContext is the number of unchanged lines around each hunk.
const diffContext = 3

// UnifiedDiff renders a unified diff between old and new under the given
// file names: "--- oldName" and "+++ newName" headers, then "@@ -l,s +l,s @@"
// hunks with 3 lines of context, and "\ No newline at end of file" after a
// last line that has no newline. Lines are compared with their line endings,
// so a CRLF/LF change is a change (the "\r" stays in the diff's lines). It
// returns "" when old == new.
//
// The line diff is Myers' O(ND) algorithm in linear space (divide and
// conquer on the middle snake), run on the lines that occur in both texts
// (a line found on one side only is always a change). Once a middle-snake
// search has spent more than a cost bound of edit steps (2e8/(N+M), kept
// within 256..4096) it settles for the furthest-reaching split found so far,
// as GNU diff does: the diff stays correct but may stop being minimal, and
// the work stays near O((N+M)·bound), about two seconds at worst for two
// 100k-line files.
func UnifiedDiff(oldName, newName, old, new string) string {
	if old == new {
		return ""
	}
	a, b := splitKeep(old), splitKeep(new)
	ia, ib := internPair(a, b)
	del, ins := lineDiff(ia, ib)
	script := editScript(del, ins)

	var out strings.Builder
	out.WriteString("--- " + oldName + "\n")
	out.WriteString("+++ " + newName + "\n")
	for _, h := range hunks(script) {
		writeHunk(&out, script[h[0]:h[1]], a, b)
	}
	return out.String()
}

// splitKeep splits s into lines that keep their "\n"; the last one may lack it.
func splitKeep(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func internPair(a, b []string) ([]int, []int) {
	d := make(map[string]int, len(a))
	f := func(ls []string) []int {
		ids := make([]int, len(ls))
		for i, l := range ls {
			id, ok := d[l]
			if !ok {
				id = len(d)
				d[l] = id
			}
			ids[i] = id
		}
		return ids
	}
	return f(a), f(b)
}

type differ struct {
	a, b         []int
	del, ins     []bool
	fd, bd       []int
	off          int
	tooExpensive int
}

// lineDiff marks the lines of a deleted and the lines of b inserted. Lines
// that occur in only one of the two can never be kept, so they are marked
// first and the diff runs on the rest (exact, and much faster on texts that
// share few lines).
func lineDiff(a, b []int) (del, ins []bool) {
	inA, inB := map[int]bool{}, map[int]bool{}
	for _, x := range a {
		inA[x] = true
	}
	for _, y := range b {
		inB[y] = true
	}
	var ka, kb []int // indices of the lines that occur on both sides
	for i, x := range a {
		if inB[x] {
			ka = append(ka, i)
		}
	}
	for j, y := range b {
		if inA[y] {
			kb = append(kb, j)
		}
	}
	del, ins = make([]bool, len(a)), make([]bool, len(b))
	for i := range del {
		del[i] = true
	}
	for j := range ins {
		ins[j] = true
	}
	sa, sb := make([]int, len(ka)), make([]int, len(kb))
	for i, k := range ka {
		sa[i] = a[k]
	}
	for j, k := range kb {
		sb[j] = b[k]
	}
	sdel, sins := myers(sa, sb)
	for i, k := range ka {
		del[k] = sdel[i]
	}
	for j, k := range kb {
		ins[k] = sins[j]
	}
	return del, ins
}

// myers marks the lines of a deleted and the lines of b inserted.
func myers(a, b []int) (del, ins []bool) {
	n, m := len(a), len(b)
	d := &differ{a: a, b: b, del: make([]bool, n), ins: make([]bool, m)}
	d.fd = make([]int, n+m+3)
	d.bd = make([]int, n+m+3)
	d.off = m + 1
	// The cost bound: about 2e8 steps in all, within [256, 4096].
	d.tooExpensive = max(256, min(4096, 200_000_000/(n+m+1)))
	d.compare(0, n, 0, m)
	return d.del, d.ins
}

func (d *differ) compare(xoff, xlim, yoff, ylim int) {
	for {
		a, b := d.a, d.b
		for xoff < xlim && yoff < ylim && a[xoff] == b[yoff] {
			xoff++
			yoff++
		}
		for xlim > xoff && ylim > yoff && a[xlim-1] == b[ylim-1] {
			xlim--
			ylim--
		}
		switch {
		case xoff == xlim:
			for y := yoff; y < ylim; y++ {
				d.ins[y] = true
			}
			return
		case yoff == ylim:
			for x := xoff; x < xlim; x++ {
				d.del[x] = true
			}
			return
		}
		xmid, ymid := d.diag(xoff, xlim, yoff, ylim)
		// Recurse on the smaller half, loop on the other.
		if (xmid-xoff)+(ymid-yoff) < (xlim-xmid)+(ylim-ymid) {
			d.compare(xoff, xmid, yoff, ymid)
			xoff, yoff = xmid, ymid
		} else {
			d.compare(xmid, xlim, ymid, ylim)
			xlim, ylim = xmid, ymid
		}
	}
}

// diag finds the midpoint of a shortest edit script of a[xoff:xlim] and
// b[yoff:ylim] (both non-empty, first and last lines differing), or, past
// the cost bound, a good-enough split point. It follows GNU diff's diag().
func (d *differ) diag(xoff, xlim, yoff, ylim int) (int, int) {
	fd, bd, off := d.fd, d.bd, d.off
	a, b := d.a, d.b
	dmin, dmax := xoff-ylim, xlim-yoff
	fmid, bmid := xoff-yoff, xlim-ylim
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	odd := (fmid-bmid)&1 != 0
	fd[fmid+off] = xoff
	bd[bmid+off] = xlim
	for c := 1; ; c++ {
		if fmin > dmin {
			fmin--
			fd[fmin-1+off] = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			fd[fmax+1+off] = -1
		} else {
			fmax--
		}
		for k := fmax; k >= fmin; k -= 2 {
			tlo, thi := fd[k-1+off], fd[k+1+off]
			x := thi
			if tlo >= thi {
				x = tlo + 1
			}
			y := x - k
			for x < xlim && y < ylim && a[x] == b[y] {
				x++
				y++
			}
			fd[k+off] = x
			if odd && bmin <= k && k <= bmax && bd[k+off] <= x {
				return x, y
			}
		}
		if bmin > dmin {
			bmin--
			bd[bmin-1+off] = math.MaxInt
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			bd[bmax+1+off] = math.MaxInt
		} else {
			bmax--
		}
		for k := bmax; k >= bmin; k -= 2 {
			tlo, thi := bd[k-1+off], bd[k+1+off]
			x := thi - 1
			if tlo < thi {
				x = tlo
			}
			y := x - k
			for x > xoff && y > yoff && a[x-1] == b[y-1] {
				x--
				y--
			}
			bd[k+off] = x
			if !odd && fmin <= k && k <= fmax && x <= fd[k+off] {
				return x, y
			}
		}
		if c < d.tooExpensive {
			continue
		}
		// Too expensive: split at the furthest point either search reached.
		fxybest, fxbest := -1, 0
		for k := fmax; k >= fmin; k -= 2 {
			x := min(fd[k+off], xlim)
			y := x - k
			if ylim < y {
				x, y = ylim+k, ylim
			}
			if fxybest < x+y {
				fxybest, fxbest = x+y, x
			}
		}
		bxybest, bxbest := math.MaxInt, 0
		for k := bmax; k >= bmin; k -= 2 {
			x := max(xoff, bd[k+off])
			y := x - k
			if y < yoff {
				x, y = yoff+k, yoff
			}
			if x+y < bxybest {
				bxybest, bxbest = x+y, x
			}
		}
		if (xlim+ylim)-bxybest < fxybest-(xoff+yoff) {
			return fxbest, fxybest - fxbest
		}
		return bxbest, bxybest - bxbest
	}
}

// step is one line of an edit script.
type step struct {
	op   byte // '=', '-', '+'
	a, b int  // line index in old and new before this step
}

func editScript(del, ins []bool) []step {
	var s []step
	i, j := 0, 0
	for i < len(del) || j < len(ins) {
		switch {
		case i < len(del) && del[i]:
			s = append(s, step{'-', i, j})
			i++
		case j < len(ins) && ins[j]:
			s = append(s, step{'+', i, j})
			j++
		default:
			s = append(s, step{'=', i, j})
			i++
			j++
		}
	}
	return s
}

// hunks groups the changes of script into [start, end) ranges with context,
// merging changes separated by at most 2*diffContext unchanged lines.
func hunks(script []step) [][2]int {
	var out [][2]int
	for k := 0; k < len(script); {
		if script[k].op == '=' {
			k++
			continue
		}
		start := max(0, k-diffContext)
		last := k
		for j := k; j < len(script); {
			if script[j].op != '=' {
				last = j
				j++
				continue
			}
			r := j
			for r < len(script) && script[r].op == '=' {
				r++
			}
			if r == len(script) || r-j > 2*diffContext {
				break
			}
			j = r
		}
		end := min(len(script), last+1+diffContext)
		out = append(out, [2]int{start, end})
		k = end
	}
	return out
}

func writeHunk(out *strings.Builder, h []step, a, b []string) {
	oldN, newN := 0, 0
	for _, s := range h {
		if s.op != '+' {
			oldN++
		}
		if s.op != '-' {
			newN++
		}
	}
	out.WriteString("@@ -" + hunkRange(h[0].a, oldN) + " +" + hunkRange(h[0].b, newN) + " @@\n")
	for _, s := range h {
		var line string
		switch s.op {
		case '=':
			line = a[s.a]
			out.WriteByte(' ')
		case '-':
			line = a[s.a]
			out.WriteByte('-')
		case '+':
			line = b[s.b]
			out.WriteByte('+')
		}
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats "l,s" the way diff -u does: an empty range names the
// line before it, and a count of 1 is left out.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(start) + ",0"
	case 1:
		return strconv.Itoa(start + 1)
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(n)
}
