package textedit

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const fuzzMaxLen = 1 << 14

func FuzzParsePatch(f *testing.F) {
	seeds := [][2]string{
		{"*** Begin Patch\n*** Update File: a\n@@ x\n x\n-y\n+z\n*** End of File\n*** End Patch\n", "x\ny\n"},
		{"*** Begin Patch\n*** Add File: n\n+a\n\n+b\n*** Delete File: d\n*** Update File: u\n*** Move to: v\n@@\n@@ a\n+b\n*** End Patch", "a\r\nb\r\n"},
		{"diff --git a/x b/y\nrename from x\nrename to y\n--- a/x\n+++ b/y\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n", "a\nb"},
		{"--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+x\n@@ -3 +3,0 @@\n-y\n", ""},
		{"--- a/f\n+++ b/f\n@@ @@\n a\n\n-b\n", "a\n\nb\n"},
		{"```\n--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+1\n+2\n```", ""},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, patch, content string) {
		if len(patch) > fuzzMaxLen || len(content) > fuzzMaxLen {
			return
		}
		start := time.Now()
		ops, err := ParsePatch(patch)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, op := range ops {
			for _, p := range []string{op.Path, op.MoveTo} {
				if p == "" {
					continue
				}
				if c, err := ValidatePath(p); err != nil || c != p {
					t.Fatalf("op path %q not clean: %q, %v", p, c, err)
				}
				if seen[p] {
					t.Fatalf("path %q twice", p)
				}
				seen[p] = true
			}
			if op.Kind == Update || op.Kind == Delete {
				out, res, err := ApplyOpDetailed(op, content)
				if err == nil && op.Kind == Update && len(res) != len(op.Chunks) {
					t.Fatalf("%d results for %d chunks", len(res), len(op.Chunks))
				}
				if err == nil && op.Kind == Delete && out != "" {
					t.Fatalf("delete returned %q", out)
				}
				// Applying to the op's own result must not panic either.
				ApplyOp(op, out)
				checkCRLFInvariance(t, op, content, patch)
				checkSelfApply(t, op)
			}
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("took %v", el)
		}
	})
}

func FuzzApplyEdits(f *testing.F) {
	f.Add("a\nb\nc\n", "b", "B", false)
	f.Add("a\r\nb\r\nc\r\n", "a\nb", "x\ny\nz", false)
	f.Add("func f() {\n\tif x {\n\t\ty()\n\t}\n}\n", "    if x {\n        y()\n    }", "    if x {\n        z()\n    }", false)
	f.Add("aaaa", "aa", "b", true)
	f.Add("x", "x", "1\r\n2\n", false)
	f.Fuzz(func(t *testing.T, content, old, new string, all bool) {
		if len(content) > fuzzMaxLen || len(old) > fuzzMaxLen || len(new) > fuzzMaxLen {
			return
		}
		edits := []Edit{{OldText: old, NewText: new, ReplaceAll: all}}
		out, counts, err := ApplyEdits(content, edits)
		// CRLF invariance: LF edits on the CRLF form of an LF file act
		// as on the file, in CRLF.
		if !strings.Contains(content+old+new, "\r") && strings.Contains(content, "\n") {
			crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
			out2, counts2, err2 := ApplyEdits(crlf(content), edits)
			if (err == nil) != (err2 == nil) || (err == nil && (out2 != crlf(out) || !reflect.DeepEqual(counts, counts2))) {
				t.Fatalf("LF: %q %v %v; CRLF: %q %v %v", out, counts, err, out2, counts2, err2)
			}
		}
		if err != nil {
			if out != content || counts != nil {
				t.Fatalf("failed edit changed the content or returned counts")
			}
			if _, ok := err.(*EditError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		_, res, err := ApplyEditsDetailed(content, edits)
		if err != nil {
			t.Fatalf("ApplyEditsDetailed disagrees: %v", err)
		}
		if len(counts) != 1 || counts[0] < 1 || res[0].Count != counts[0] {
			t.Fatalf("counts %v results %+v", counts, res)
		}
		if all {
			return
		}
		if counts[0] != 1 {
			t.Fatalf("a unique edit replaced %d times", counts[0])
		}
		switch res[0].Level {
		case MatchExact, MatchLineEndings:
			want := translateEOL(new, detectEOL(content))
			if !strings.Contains(out, want) {
				t.Fatalf("result %q does not contain new_text %q (as %q)", out, new, want)
			}
		case MatchIndentation:
			for _, l := range strings.Split(strings.ReplaceAll(new, "\r\n", "\n"), "\n") {
				if !strings.Contains(out, trimIndent(l)) {
					t.Fatalf("result %q lacks new_text line %q", out, l)
				}
			}
		}
		// The diff of the edit reproduces it.
		if strings.IndexByte(content+new, 0) < 0 {
			roundTrip(t, content, out)
		}
	})
}

func FuzzUnifiedDiffRoundTrip(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("", "x")
	f.Add("x\r\ny", "x\ny\r\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\nten")
	f.Add("--- a\n+++ b\n@@ -1 +1 @@\n", "\\ No newline\n-- \n")
	f.Fuzz(func(t *testing.T, old, new string) {
		if len(old) > fuzzMaxLen || len(new) > fuzzMaxLen || strings.IndexByte(old+new, 0) >= 0 {
			return
		}
		roundTrip(t, old, new)
	})
}

// checkCRLFInvariance: an LF patch applies to the CRLF form of an LF file
// exactly as to the file itself, and the result is the CRLF form of the
// result.
func checkCRLFInvariance(t *testing.T, op FileOp, content, patch string) {
	t.Helper()
	if op.Kind != Update || strings.Contains(patch, "\r") || strings.Contains(content, "\r") || !strings.Contains(content, "\n") {
		return
	}
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	r1, err1 := ApplyOp(op, content)
	r2, err2 := ApplyOp(op, crlf(content))
	if (err1 == nil) != (err2 == nil) {
		t.Fatalf("LF content: %v; CRLF content: %v", err1, err2)
	}
	if err1 == nil && r2 != crlf(r1) {
		t.Fatalf("LF result %q, CRLF result %q", r1, r2)
	}
}

// checkSelfApply: an envelope update without anchors, End of File marks or
// pure additions applies to the text made of its chunks' old lines, giving
// the text made of their new lines.
func checkSelfApply(t *testing.T, op FileOp) {
	t.Helper()
	if op.Kind != Update || op.Format != FormatEnvelope {
		return
	}
	var old, new strings.Builder
	for _, ch := range op.Chunks {
		pure := true
		for _, l := range ch.Lines {
			if l.Kind != LineAdd {
				pure = false
				old.WriteString(l.Text + "\n")
			}
			if l.Kind != LineRemove {
				new.WriteString(l.Text + "\n")
			}
		}
		if len(ch.Anchors) > 0 || ch.EndOfFile || pure {
			return
		}
	}
	got, err := ApplyOp(op, old.String())
	if err != nil {
		t.Fatalf("self-apply: %v\n%q", err, old.String())
	}
	if got != new.String() {
		t.Fatalf("self-apply gave %q, want %q", got, new.String())
	}
}
