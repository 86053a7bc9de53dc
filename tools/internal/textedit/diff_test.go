package textedit

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// roundTrip diffs old against new, parses the diff and applies it to old.
func roundTrip(t *testing.T, old, new string) {
	t.Helper()
	d := UnifiedDiff("a/f.txt", "b/f.txt", old, new)
	if old == new {
		if d != "" {
			t.Fatalf("diff of equal texts = %q", d)
		}
		return
	}
	ops, err := ParsePatch(d)
	if err != nil {
		t.Fatalf("ParsePatch(diff of %q -> %q): %v\n%s", old, new, err, d)
	}
	if len(ops) != 1 || ops[0].Kind != Update || ops[0].Path != "f.txt" || ops[0].MoveTo != "" {
		t.Fatalf("ops = %+v\n%s", ops, d)
	}
	got, err := ApplyOp(ops[0], old)
	if err != nil {
		t.Fatalf("ApplyOp(diff of %q -> %q): %v\n%s", old, new, err, d)
	}
	if got != new {
		t.Fatalf("round trip of %q -> %q gave %q\n%s", old, new, got, d)
	}
}

func TestUnifiedDiffGolden(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"equal", "a\n", "a\n", ""},
		{"change middle", "a\nb\nc\n", "a\nB\nc\n", `--- a/f
+++ b/f
@@ -1,3 +1,3 @@
 a
-b
+B
 c
`},
		{"add to empty", "", "x\ny\n", `--- a/f
+++ b/f
@@ -0,0 +1,2 @@
+x
+y
`},
		{"delete all", "x\n", "", `--- a/f
+++ b/f
@@ -1 +0,0 @@
-x
`},
		{"no newline at end", "a\nb", "a\nc", `--- a/f
+++ b/f
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+c
\ No newline at end of file
`},
		{"newline added", "a", "a\n", `--- a/f
+++ b/f
@@ -1 +1 @@
-a
\ No newline at end of file
+a
`},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n", `--- a/f
+++ b/f
@@ -1,5 +1,5 @@
 1
-2
+X
 3
 4
 5
@@ -8,5 +8,5 @@
 8
 9
 10
-11
+Y
 12
`},
		{"hunks merge within 6 lines", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "X\n2\n3\n4\n5\n6\n7\nY\n9\n", `--- a/f
+++ b/f
@@ -1,9 +1,9 @@
-1
+X
 2
 3
 4
 5
 6
 7
-8
+Y
 9
`},
		{"crlf change", "a\r\nb\r\n", "a\r\nb\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+b\n"},
		{"insert at start", "b\nc\n", "a\nb\nc\n", `--- a/f
+++ b/f
@@ -1,2 +1,3 @@
+a
 b
 c
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := UnifiedDiff("a/f", "b/f", tc.old, tc.new)
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			roundTrip(t, tc.old, tc.new)
		})
	}
}

// TestLineDiffMinimal checks the diff is an LCS on small inputs, against a
// quadratic dynamic program.
func TestLineDiffMinimal(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for iter := 0; iter < 2000; iter++ {
		a := randInts(r, r.Intn(30), 4)
		b := randInts(r, r.Intn(30), 4)
		del, ins := lineDiff(a, b)
		kept := 0
		for _, d := range del {
			if !d {
				kept++
			}
		}
		if want := lcsLen(a, b); kept != want {
			t.Fatalf("a=%v b=%v: kept %d lines, LCS is %d", a, b, kept, want)
		}
		// The kept lines must be equal pairwise.
		i, j := 0, 0
		for i < len(a) || j < len(b) {
			switch {
			case i < len(a) && del[i]:
				i++
			case j < len(b) && ins[j]:
				j++
			default:
				if i >= len(a) || j >= len(b) || a[i] != b[j] {
					t.Fatalf("a=%v b=%v: inconsistent script at %d,%d", a, b, i, j)
				}
				i++
				j++
			}
		}
	}
}

func randInts(r *rand.Rand, n, k int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = r.Intn(k)
	}
	return s
}

func lcsLen(a, b []int) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

// TestUnifiedDiffRoundTripRandom is the property test: random line edits of
// random texts, with a fixed seed.
func TestUnifiedDiffRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	vocab := []string{"a", "b", "c", "", "  a", "a ", "\tb", "x\r", "--- x", "+++ y", "@@ -1 +1 @@", "\\ no", "-", "+", " "}
	randText := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(vocab[r.Intn(len(vocab))])
			b.WriteString([]string{"\n", "\r\n", "\n", "\n"}[r.Intn(4)])
		}
		s := b.String()
		if r.Intn(4) == 0 && len(s) > 0 {
			s = strings.TrimRight(s, "\r\n")
		}
		return s
	}
	for iter := 0; iter < 3000; iter++ {
		old := randText(r.Intn(40))
		lines := splitKeep(old)
		for e := r.Intn(6); e > 0; e-- {
			switch op := r.Intn(3); {
			case op == 0 && len(lines) > 0:
				k := r.Intn(len(lines))
				lines = append(lines[:k], lines[k+1:]...)
			case op == 1:
				k := r.Intn(len(lines) + 1)
				lines = append(lines[:k], append([]string{vocab[r.Intn(len(vocab))] + "\n"}, lines[k:]...)...)
			case len(lines) > 0:
				lines[r.Intn(len(lines))] = vocab[r.Intn(len(vocab))] + "\n"
			}
		}
		new := strings.Join(lines, "")
		if r.Intn(5) == 0 {
			new = strings.TrimSuffix(new, "\n")
		}
		roundTrip(t, old, new)
	}
}

func TestUnifiedDiffBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	var a, b strings.Builder
	for i := 0; i < 100_000; i++ {
		fmt.Fprintf(&a, "old line %d\n", i)
		fmt.Fprintf(&b, "new line %d\n", i)
	}
	start := time.Now()
	d := UnifiedDiff("a/f", "b/f", a.String(), b.String())
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("diff of two unrelated 100k-line files took %v", el)
	} else {
		t.Logf("unrelated 100k-line files: %v, %d bytes of diff", el, len(d))
	}
	roundTrip(t, a.String(), b.String())

	// Interleaved similar files: many small differences.
	var c strings.Builder
	for i := 0; i < 100_000; i++ {
		if i%7 == 0 {
			fmt.Fprintf(&c, "changed %d\n", i)
		} else {
			fmt.Fprintf(&c, "old line %d\n", i)
		}
	}
	start = time.Now()
	UnifiedDiff("a/f", "b/f", a.String(), c.String())
	t.Logf("100k lines, every 7th changed: %v", time.Since(start))
	roundTrip(t, a.String(), c.String())

	// The same lines in reverse order: every line is shared, no LCS
	// shortcut applies, and the cost bound must.
	lines := strings.SplitAfter(a.String(), "\n")
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	rev := strings.Join(lines, "")
	start = time.Now()
	UnifiedDiff("a/f", "b/f", a.String(), rev)
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("diff of a 100k-line file against its reverse took %v", el)
	} else {
		t.Logf("100k lines against their reverse: %v", el)
	}
	roundTrip(t, a.String(), rev)
}
