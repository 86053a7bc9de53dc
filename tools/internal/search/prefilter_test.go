package search

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestRequired(t *testing.T) {
	tests := []struct {
		pattern    string
		ignoreCase bool
		want       []string // nil: no prefilter
	}{
		{`\bNewReader\b`, false, []string{"NewReader"}},
		{`foo|bar`, false, []string{"foo", "bar"}},
		{`[A-Z]+_SUFFIX`, false, []string{"_SUFFIX"}},
		{`func \w+\(`, false, []string{"func "}},
		{`(abc)+x`, false, []string{"abc"}},
		{`(abc)*x`, false, nil},
		{`a?bc`, false, []string{"bc"}},
		{`x|yz`, false, nil}, // "x" is too short
		{`\w+\d`, false, nil},
		{`(a|b|c|d|e|f|g|h|i)xx`, false, []string{"xx"}},
		{`func main`, true, []string{"FUNC MAIN"}},
		{`kelvin`, true, nil}, // "k" folds to U+212A
		{`case`, true, nil},   // "s" folds to U+017F
		{`héllo`, false, []string{"héllo"}},
		{`héllo`, true, nil},
	}
	for _, tt := range tests {
		lm, err := compileLineMatcher(tt.pattern, false, tt.ignoreCase)
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		var got []string
		if lm.re == nil {
			got = []string{string(lm.lit)} // a plain literal: bytes.Index, no regexp at all
		} else if lm.pf != nil {
			for _, n := range lm.pf.needles {
				got = append(got, string(n))
			}
		}
		if tt.ignoreCase && got != nil {
			for i := range got {
				got[i] = strings.ToUpper(got[i])
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q (ignore case %v): needles %q, want %q", tt.pattern, tt.ignoreCase, got, tt.want)
		}
	}
}

func TestIndexFold(t *testing.T) {
	tests := []struct {
		s, needle string
		want      int
	}{
		{"xx FUNC main", "func main", 3},
		{"func", "func main", -1},
		{"fUnC MaIn", "func main", 0},
		{"ffff func_main func main", "func main", 15},
		{"(abc)", "(ABC)", 0},
		{"", "ab", -1},
		{"a", "ab", -1},
	}
	for _, tt := range tests {
		for _, anchor := range []int{0, anchorFor(tt.needle), len(tt.needle) - 1} {
			if got := indexFold([]byte(tt.s), []byte(tt.needle), anchor); got != tt.want {
				t.Errorf("indexFold(%q, %q, anchor %d) = %d, want %d", tt.s, tt.needle, anchor, got, tt.want)
			}
		}
	}
}

// hitsOf runs a matcher and returns its hits.
func hitsOf(lm *lineMatcher, text string) []lineHit {
	var hits []lineHit
	lm.scan(context.Background(), []byte(text), func(h lineHit) bool { hits = append(hits, h); return true })
	return hits
}

// TestPrefilterAgrees: the prefiltered scan finds exactly the lines (and
// first-match columns) the plain whole-buffer scan finds.
func TestPrefilterAgrees(t *testing.T) {
	texts := []string{
		"func main() {}\nfunc helper(x int)\n\tfoo := bar\nFUNC MAIN\n",
		"no match here\n\n\nfoobar\nbarfoo\r\nfoo\nxbar",
		"NewReader(r)\nbufio.NewReaderSize\n// NewReader\nNewReaders\n",
		"abc_SUFFIX\nABC_SUFFIX\n_SUFFIX\nZ_SUFFIX Y_SUFFIX\n",
		strings.Repeat("padding line\n", 100) + "needle at the end",
		"K\u212aelvin kelvin KELVIN\nſtraße STRASSE",
	}
	patterns := []struct {
		p  string
		ic bool
	}{
		{`\bNewReader\b`, false}, {`foo|bar`, false}, {`[A-Z]+_SUFFIX`, false}, {`func \w+\(`, false},
		{`^foo$`, false}, {`bar$`, false}, {`^\s*//\s*NewReader`, false}, {`func main`, true},
		{`(foo|bar)+x?`, false}, {`needle\b`, false}, {`foo|bar`, true}, {`main\(\)`, true},
		{`NEWREADER`, true}, {`newreader\b`, true},
	}
	for _, pt := range patterns {
		lm, err := compileLineMatcher(pt.p, false, pt.ic)
		if err != nil {
			t.Fatalf("%q: %v", pt.p, err)
		}
		if lm.pf == nil {
			t.Errorf("%q: expected a prefilter", pt.p)
			continue
		}
		plain := &lineMatcher{re: lm.re}
		for _, text := range texts {
			if got, want := hitsOf(lm, text), hitsOf(plain, text); !reflect.DeepEqual(got, want) {
				t.Errorf("%q (ic %v) on %q:\n prefiltered %+v\n plain       %+v", pt.p, pt.ic, text, got, want)
			}
		}
	}
}

// FuzzLineMatcher: for any pattern and text, the prefiltered scan agrees
// with the plain scan, and neither panics.
func FuzzLineMatcher(f *testing.F) {
	f.Add(`foo|bar`, "foo\nbar\nbaz", false)
	f.Add(`\bx+y\b`, "xxy y\nxy", true)
	f.Add(`(?i)fu[nN]c`, "FUNC\nfunc", false)
	f.Add(`^a|b$`, "a\r\nb\r\n", false)
	f.Fuzz(func(t *testing.T, pattern, text string, ignoreCase bool) {
		defer watchdog("pattern " + pattern)()
		lm, err := compileLineMatcher(pattern, false, ignoreCase)
		if err != nil || lm.re == nil {
			return
		}
		plain := &lineMatcher{re: lm.re}
		if got, want := hitsOf(lm, text), hitsOf(plain, text); !reflect.DeepEqual(got, want) {
			t.Errorf("%q (ic %v) on %q:\n got  %+v\n want %+v", pattern, ignoreCase, text, got, want)
		}
	})
}
