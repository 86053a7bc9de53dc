package textedit

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// applyAll plays the tool layer: it applies every op of a parsed patch to an
// in-memory tree, all or nothing.
func applyAll(ops []FileOp, files map[string]string) (map[string]string, []Fuzz, error) {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	var fuzz []Fuzz
	for _, op := range ops {
		cur, exists := out[op.Path]
		switch op.Kind {
		case Add:
			if exists {
				return nil, nil, fmt.Errorf("%s exists", op.Path)
			}
			out[op.Path] = op.NewContent
			continue
		case Delete, Update:
			if !exists {
				return nil, nil, fmt.Errorf("%s does not exist", op.Path)
			}
		}
		got, res, err := ApplyOpDetailed(op, cur)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", op.Path, err)
		}
		for _, r := range res {
			fuzz = append(fuzz, r.Fuzz)
		}
		switch {
		case op.Kind == Delete:
			delete(out, op.Path)
		case op.MoveTo != "":
			delete(out, op.Path)
			out[op.MoveTo] = got
		default:
			out[op.Path] = got
		}
	}
	return out, fuzz, nil
}

type patchCase struct {
	name    string
	patch   string
	files   map[string]string
	want    map[string]string // the whole tree afterwards
	fuzz    []Fuzz            // per chunk, when given
	wantErr string            // substring of the parse or apply error
	errLine int               // for parse errors: the expected line
}

func runPatchCases(t *testing.T, cases []patchCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := ParsePatch(tc.patch)
			if err == nil {
				var got map[string]string
				var fz []Fuzz
				got, fz, err = applyAll(ops, tc.files)
				if err == nil {
					if tc.wantErr != "" {
						t.Fatalf("no error, want %q; got %q", tc.wantErr, got)
					}
					if !reflect.DeepEqual(got, tc.want) {
						t.Fatalf("tree:\n got %s\nwant %s", dump(got), dump(tc.want))
					}
					if tc.fuzz != nil && !reflect.DeepEqual(fz, tc.fuzz) {
						t.Fatalf("fuzz = %v, want %v", fz, tc.fuzz)
					}
					return
				}
			}
			if tc.wantErr == "" {
				t.Fatalf("unexpected error: %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			if tc.errLine != 0 {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Line != tc.errLine {
					t.Fatalf("error %v: want a ParseError at line %d", err, tc.errLine)
				}
			}
		})
	}
}

func dump(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %q", k, m[k])
	}
	return b.String()
}

const goFile = `package main

import "fmt"

func main() {
	fmt.Println("hello")
}

func other() {
	fmt.Println("hello")
}
`

func TestEnvelope(t *testing.T) {
	runPatchCases(t, []patchCase{
		{
			name: "update with context",
			patch: `*** Begin Patch
*** Update File: main.go
@@
 func main() {
-	fmt.Println("hello")
+	fmt.Println("hi")
 }
*** End Patch
`,
			files: map[string]string{"main.go": goFile},
			want:  map[string]string{"main.go": strings.Replace(goFile, `"hello"`, `"hi"`, 1)},
			fuzz:  []Fuzz{FuzzNone},
		},
		{
			name: "anchor selects the second of two equal blocks",
			patch: `*** Begin Patch
*** Update File: main.go
@@ func other() {
-	fmt.Println("hello")
+	fmt.Println("other")
*** End Patch`,
			files: map[string]string{"main.go": goFile},
			want: map[string]string{"main.go": strings.Replace(goFile, "func other() {\n\tfmt.Println(\"hello\")",
				"func other() {\n\tfmt.Println(\"other\")", 1)},
		},
		{
			name: "stacked anchors",
			patch: `*** Begin Patch
*** Update File: a.py
@@ class B:
@@     def f(self):
-        return 1
+        return 2
*** End Patch`,
			files: map[string]string{"a.py": "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def g(self):\n        return 1\n    def f(self):\n        return 1\n"},
			want:  map[string]string{"a.py": "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def g(self):\n        return 1\n    def f(self):\n        return 2\n"},
		},
		{
			name: "anchor line repeated as context",
			patch: `*** Begin Patch
*** Update File: a.txt
@@ b
 b
-c
+C
*** End Patch`,
			files: map[string]string{"a.txt": "a\nb\nc\n"},
			want:  map[string]string{"a.txt": "a\nb\nC\n"},
		},
		{
			name: "pure addition after the anchor",
			patch: `*** Begin Patch
*** Update File: a.txt
@@ two
+two and a half
*** End Patch`,
			files: map[string]string{"a.txt": "one\ntwo\nthree\n"},
			want:  map[string]string{"a.txt": "one\ntwo\ntwo and a half\nthree\n"},
		},
		{
			name: "pure addition without context goes to the end",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
+four
*** End Patch`,
			files: map[string]string{"a.txt": "one\ntwo\nthree\n"},
			want:  map[string]string{"a.txt": "one\ntwo\nthree\nfour\n"},
		},
		{
			name: "several chunks",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
 1
-2
+two
 3
@@
 7
-8
+eight
 9
*** End Patch`,
			files: map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n"},
			want:  map[string]string{"a.txt": "1\ntwo\n3\n4\n5\n6\n7\neight\n9\n"},
			fuzz:  []Fuzz{FuzzNone, FuzzNone},
		},
		{
			name: "first chunk without @@",
			patch: `*** Begin Patch
*** Update File: a.txt
-1
+one
*** End Patch`,
			files: map[string]string{"a.txt": "1\n2\n"},
			want:  map[string]string{"a.txt": "one\n2\n"},
		},
		{
			name: "add, delete, move",
			patch: `*** Begin Patch
*** Add File: dir/new.txt
+hello
+
+world
*** Delete File: old.txt
*** Update File: src.txt
*** Move to: dst/moved.txt
@@
-x
+y
*** End Patch`,
			files: map[string]string{"old.txt": "bye\n", "src.txt": "x\n"},
			want:  map[string]string{"dir/new.txt": "hello\n\nworld\n", "dst/moved.txt": "y\n"},
		},
		{
			name: "pure rename",
			patch: `*** Begin Patch
*** Update File: a.txt
*** Move to: b.txt
*** End Patch`,
			files: map[string]string{"a.txt": "same\n"},
			want:  map[string]string{"b.txt": "same\n"},
		},
		{
			name:  "add file: bare empty lines between content",
			patch: "*** Begin Patch\n*** Add File: n.txt\n+a\n\n+b\n\n*** End Patch\n",
			want:  map[string]string{"n.txt": "a\n\nb\n"},
		},
		{
			name:  "add empty file",
			patch: "*** Begin Patch\n*** Add File: empty.txt\n*** End Patch\n",
			want:  map[string]string{"empty.txt": ""},
		},
		{
			name: "End of File matches the last occurrence",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
 x
-end
+END
*** End of File
*** End Patch`,
			files: map[string]string{"a.txt": "x\nend\nx\nend\n"},
			want:  map[string]string{"a.txt": "x\nend\nx\nEND\n"},
		},
		{
			name: "End of File pure addition",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
+tail
*** End of File
*** End Patch`,
			files: map[string]string{"a.txt": "x\n"},
			want:  map[string]string{"a.txt": "x\ntail\n"},
		},
		{
			name: "End of File mismatch",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
-x
+y
*** End of File
*** End Patch`,
			files:   map[string]string{"a.txt": "x\nz\n"},
			wantErr: `chunk 1 (patch line 3): the chunk is marked "*** End of File" but its lines are at line 1`,
		},
		{
			name: "CRLF file, LF patch: CRLF kept",
			patch: `*** Begin Patch
*** Update File: w.txt
@@
 a
-b
+B1
+B2
 c
*** End Patch`,
			files: map[string]string{"w.txt": "a\r\nb\r\nc\r\n"},
			want:  map[string]string{"w.txt": "a\r\nB1\r\nB2\r\nc\r\n"},
			fuzz:  []Fuzz{FuzzNone},
		},
		{
			name:  "CRLF patch on an LF file: LF kept",
			patch: "*** Begin Patch\r\n*** Update File: u.txt\r\n@@\r\n a\r\n-b\r\n+B\r\n*** End Patch\r\n",
			files: map[string]string{"u.txt": "a\nb\n"},
			want:  map[string]string{"u.txt": "a\nB\n"},
			fuzz:  []Fuzz{FuzzNone},
		},
		{
			name:  "CRLF patch on a CRLF file: byte exact",
			patch: "*** Begin Patch\r\n*** Update File: w.txt\r\n@@\r\n a\r\n-b\r\n+B\r\n*** End Patch\r\n",
			files: map[string]string{"w.txt": "a\r\nb\r\n"},
			want:  map[string]string{"w.txt": "a\r\nB\r\n"},
		},
		{
			name: "CRLF file without final newline, appended at the end",
			patch: `*** Begin Patch
*** Update File: w.txt
@@
+c
*** End of File
*** End Patch`,
			files: map[string]string{"w.txt": "a\r\nb"},
			want:  map[string]string{"w.txt": "a\r\nb\r\nc"},
		},
		{
			name: "file without trailing newline keeps it that way",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
 a
-b
+B
*** End Patch`,
			files: map[string]string{"a.txt": "a\nb"},
			want:  map[string]string{"a.txt": "a\nB"},
		},
		{
			name: "empty file gets lines",
			patch: `*** Begin Patch
*** Update File: e.txt
@@
+first
*** End Patch`,
			files: map[string]string{"e.txt": ""},
			want:  map[string]string{"e.txt": "first\n"},
		},
		{
			name: "empty file with context: not found",
			patch: `*** Begin Patch
*** Update File: e.txt
@@
 ctx
+x
*** End Patch`,
			files:   map[string]string{"e.txt": ""},
			wantErr: `context line "ctx" not found after line 0`,
		},
		{
			name: "fuzz: trailing white space",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
 a
-b
+B
*** End Patch`,
			files: map[string]string{"a.txt": "a  \nb\t\n"},
			want:  map[string]string{"a.txt": "a  \nB\n"},
			fuzz:  []Fuzz{FuzzTrailingSpace},
		},
		{
			name: "fuzz: leading white space",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
 if x:
-    y()
+    z()
*** End Patch`,
			files: map[string]string{"a.txt": "\tif x:\n\t\ty()\n"},
			want:  map[string]string{"a.txt": "\tif x:\n    z()\n"},
			fuzz:  []Fuzz{FuzzSpace},
		},
		{
			name: "exact match preferred over an earlier fuzzy one",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
-x
+X
*** End Patch`,
			files: map[string]string{"a.txt": " x\nx\n"},
			want:  map[string]string{"a.txt": " x\nX\n"},
			fuzz:  []Fuzz{FuzzNone},
		},
		{
			name:  "lenient markers and no final newline",
			patch: "  *** Begin Patch  \n*** Update File: a.txt   \n@@   \n-a\n+b\n*** End Patch \t",
			files: map[string]string{"a.txt": "a\n"},
			want:  map[string]string{"a.txt": "b\n"},
		},
		{
			name:  "fenced",
			patch: "```diff\n*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** End Patch\n```\n",
			files: map[string]string{"a.txt": "a\n"},
			want:  map[string]string{"a.txt": "b\n"},
		},
		{
			name:  "here-document",
			patch: "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** End Patch\nEOF\n",
			files: map[string]string{"a.txt": "a\n"},
			want:  map[string]string{"a.txt": "b\n"},
		},
		{
			name: "unified hunk header inside the envelope is a bare @@",
			patch: `*** Begin Patch
*** Update File: a.txt
@@ -1,2 +1,2 @@
 a
-b
+c
*** End Patch`,
			files: map[string]string{"a.txt": "a\nb\n"},
			want:  map[string]string{"a.txt": "a\nc\n"},
		},
		{
			name:  "bare empty line is an empty context line",
			patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n a\n\n-b\n+B\n\n*** End Patch\n",
			files: map[string]string{"a.txt": "a\n\nb\n"},
			want:  map[string]string{"a.txt": "a\n\nB\n"},
		},
		{
			name: "missing context",
			patch: `*** Begin Patch
*** Update File: main.go
@@
 func main() {
-	fmt.Println("bye")
+	fmt.Println("hi")
 }
*** End Patch`,
			files:   map[string]string{"main.go": goFile},
			wantErr: `chunk 1 (patch line 3): removed line "\tfmt.Println(\"bye\")" not found: the chunk's first 1 lines match at line 5, but line 6 is "\tfmt.Println(\"hello\")"`,
		},
		{
			name: "chunks out of order",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
-3
+three
@@
-1
+one
*** End Patch`,
			files:   map[string]string{"a.txt": "1\n2\n3\n"},
			wantErr: "chunk 2 (patch line 6): the chunk's lines are at line 1, before line 4 where the previous chunk or anchor ended: chunks must follow file order",
		},
		{
			name: "anchor missing",
			patch: `*** Begin Patch
*** Update File: a.txt
@@ def nowhere():
-1
+one
*** End Patch`,
			files:   map[string]string{"a.txt": "1\n"},
			wantErr: `anchor @@ "def nowhere():" not found`,
		},
		{
			name:    "same file twice",
			patch:   "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Update File: ./a.txt\n-b\n+c\n*** End Patch\n",
			wantErr: "a.txt is touched twice", errLine: 5,
		},
		{
			name:    "move onto a file the patch adds",
			patch:   "*** Begin Patch\n*** Add File: b.txt\n+x\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch\n",
			wantErr: "b.txt is touched twice", errLine: 4,
		},
		{
			name:    "NUL byte",
			patch:   "*** Begin Patch\n*** Add File: bin\n+\x00\x01\n*** End Patch\n",
			wantErr: "NUL byte", errLine: 3,
		},
		{
			name:    "missing End Patch",
			patch:   "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n",
			wantErr: `missing "*** End Patch"`,
		},
		{
			name:    "text after End Patch",
			patch:   "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch\nthanks!\n",
			wantErr: "unexpected text after", errLine: 4,
		},
		{
			name:    "absolute path",
			patch:   "*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch\n",
			wantErr: "is absolute", errLine: 2,
		},
		{
			name:    "dot-dot path",
			patch:   "*** Begin Patch\n*** Add File: a/../../x\n+x\n*** End Patch\n",
			wantErr: `has a ".." component`, errLine: 2,
		},
		{
			name:    "home path in a move",
			patch:   "*** Begin Patch\n*** Update File: a\n*** Move to: ~/x\n*** End Patch\n",
			wantErr: "starts with ~", errLine: 3,
		},
		{
			name:    "bad chunk line",
			patch:   "*** Begin Patch\n*** Update File: a.txt\n@@\n a\nb\n*** End Patch\n",
			wantErr: `a chunk line must start with ' ', '-' or '+' (got "b")`, errLine: 5,
		},
		{
			name:    "add file line without plus",
			patch:   "*** Begin Patch\n*** Add File: a.txt\n+a\nb\n*** End Patch\n",
			wantErr: "every line of an added file must start with '+'", errLine: 4,
		},
		{
			name:    "update without chunks",
			patch:   "*** Begin Patch\n*** Update File: a.txt\n*** End Patch\n",
			wantErr: "has no chunks", errLine: 2,
		},
		{
			name:    "unknown marker",
			patch:   "*** Begin Patch\n*** Rename File: a.txt\n*** End Patch\n",
			wantErr: `expected "*** Add File:"`, errLine: 2,
		},
		{
			name:    "empty anchored chunk",
			patch:   "*** Begin Patch\n*** Update File: a.txt\n@@ foo\n*** End Patch\n",
			wantErr: "chunk @@ foo has no lines", errLine: 3,
		},
		{
			name:  "unclosed fence",
			patch: "```\n*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** End Patch\n",
			files: map[string]string{"a.txt": "a\n"},
			want:  map[string]string{"a.txt": "b\n"},
		},
		{
			name:    "text before Begin Patch",
			patch:   "Here is the patch:\n*** Begin Patch\n*** Update File: a\n@@\n-a\n+b\n*** End Patch\n",
			wantErr: `the patch must start with "*** Begin Patch" (found at line 2)`, errLine: 1,
		},
		{
			name: "a context-free addition goes to the end, so a later chunk is out of order",
			patch: `*** Begin Patch
*** Update File: a.txt
@@
+z
@@
-a
+A
*** End Patch`,
			files:   map[string]string{"a.txt": "a\n"},
			wantErr: "chunk 2 (patch line 5): the chunk's lines are at line 1, before line 2",
		},
		// Fuzz regressions (FuzzParsePatch, CRLF invariance): the "\r" of a
		// CRLF line that becomes the unterminated last line goes with its
		// "\n".
		{
			name:  "fuzz: last line removed from a file without final newline",
			patch: "*** Begin Patch\n*** Update File:0\n-\n*** End Patch",
			files: map[string]string{"0": "0\n "},
			want:  map[string]string{"0": "0"},
			fuzz:  []Fuzz{FuzzTrailingSpace},
		},
		{
			name:  "fuzz: same on the CRLF form",
			patch: "*** Begin Patch\n*** Update File:0\n-\n*** End Patch",
			files: map[string]string{"0": "0\r\n "},
			want:  map[string]string{"0": "0"},
			fuzz:  []Fuzz{FuzzTrailingSpace},
		},
		{
			name:  "LF patch replacing the unterminated last line of a CRLF file",
			patch: "*** Begin Patch\n*** Update File: w\n-b\n+c\n+d\n*** End Patch",
			files: map[string]string{"w": "a\r\nb"},
			want:  map[string]string{"w": "a\r\nc\r\nd"},
		},
		{
			name:    "empty patch",
			patch:   "\n\n",
			wantErr: "the patch is empty",
		},
	})
}

func TestUnified(t *testing.T) {
	runPatchCases(t, []patchCase{
		{
			name: "git diff",
			patch: `diff --git a/main.go b/main.go
index 3b18e51..a042389 100644
--- a/main.go
+++ b/main.go
@@ -4,7 +4,7 @@ import "fmt"
 
 func main() {
-	fmt.Println("hello")
+	fmt.Println("hi")
 }
 
 func other() {
`,
			files: map[string]string{"main.go": goFile},
			want:  map[string]string{"main.go": strings.Replace(goFile, `"hello"`, `"hi"`, 1)},
		},
		{
			name: "line numbers pick the second of two equal blocks",
			patch: `--- a/main.go
+++ b/main.go
@@ -9,3 +9,3 @@
 func other() {
-	fmt.Println("hello")
+	fmt.Println("other")
 }
`,
			files: map[string]string{"main.go": goFile},
			want: map[string]string{"main.go": strings.Replace(goFile, "func other() {\n\tfmt.Println(\"hello\")",
				"func other() {\n\tfmt.Println(\"other\")", 1)},
		},
		{
			name: "wrong line numbers: found by content",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 c
-d
+D
 e
@@ -2,3 +2,3 @@
 g
-h
+H
 i
`,
			files: map[string]string{"a.txt": "a\nb\nc\nd\ne\nf\ng\nh\ni\n"},
			want:  map[string]string{"a.txt": "a\nb\nc\nD\ne\nf\ng\nH\ni\n"},
		},
		{
			name: "diff -u with time stamps",
			patch: `--- a.txt	2024-01-02 10:00:00.000000000 +0100
+++ a.txt	2024-01-02 10:01:00.000000000 +0100
@@ -1,2 +1,2 @@
-a
+A
 b
`,
			files: map[string]string{"a.txt": "a\nb\n"},
			want:  map[string]string{"a.txt": "A\nb\n"},
		},
		{
			name: "several files, add and delete",
			patch: `diff --git a/x.txt b/x.txt
--- a/x.txt
+++ b/x.txt
@@ -1 +1 @@
-x
+X
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3b18e51
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 3b18e51..0000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`,
			files: map[string]string{"x.txt": "x\n", "gone.txt": "bye\n"},
			want:  map[string]string{"x.txt": "X\n", "new.txt": "hello\nworld\n"},
		},
		{
			name: "deletion that does not match",
			patch: `--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`,
			files:   map[string]string{"gone.txt": "bye\nmore\n"},
			wantErr: "do not remove the whole file: 1 lines would remain",
		},
		{
			name: "new file without final newline",
			patch: `--- /dev/null
+++ b/n.txt
@@ -0,0 +1 @@
+last
\ No newline at end of file
`,
			want: map[string]string{"n.txt": "last"},
		},
		{
			name: "git: new empty file and deleted empty file",
			patch: `diff --git a/empty b/empty
new file mode 100644
index 0000000..e69de29
diff --git a/old-empty b/old-empty
deleted file mode 100644
index e69de29..0000000
`,
			files: map[string]string{"old-empty": ""},
			want:  map[string]string{"empty": ""},
		},
		{
			name: "rename with changes",
			patch: `diff --git a/old.txt b/new.txt
similarity index 80%
rename from old.txt
rename to new.txt
index 1..2 100644
--- a/old.txt
+++ b/new.txt
@@ -1,2 +1,2 @@
 keep
-x
+y
`,
			files: map[string]string{"old.txt": "keep\nx\n"},
			want:  map[string]string{"new.txt": "keep\ny\n"},
		},
		{
			name: "pure rename",
			patch: `diff --git a/a b/dir/b
similarity index 100%
rename from a
rename to dir/b
`,
			files: map[string]string{"a": "same\n"},
			want:  map[string]string{"dir/b": "same\n"},
		},
		{
			name: "mode change only is dropped",
			patch: `diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
diff --git a/x b/x
--- a/x
+++ b/x
@@ -1 +1 @@
-1
+2
`,
			files: map[string]string{"run.sh": "#!/bin/sh\n", "x": "1\n"},
			want:  map[string]string{"run.sh": "#!/bin/sh\n", "x": "2\n"},
		},
		{
			name: "no newline at end: removed and added",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+c
\ No newline at end of file
`,
			files: map[string]string{"a.txt": "a\nb"},
			want:  map[string]string{"a.txt": "a\nc"},
		},
		{
			name: "newline added at end",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
\ No newline at end of file
+a
`,
			files: map[string]string{"a.txt": "a"},
			want:  map[string]string{"a.txt": "a\n"},
		},
		{
			name: "counts too small: the body goes on",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,1 +1,1 @@
 a
-b
+B
 c
`,
			files: map[string]string{"a.txt": "a\nb\nc\n"},
			want:  map[string]string{"a.txt": "a\nB\nc\n"},
		},
		{
			name: "counts too big: the hunk ends at the next header",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,9 +1,9 @@
 a
-b
+B
@@ -20,9 +20,9 @@
 y
-z
+Z
`,
			files: map[string]string{"a.txt": "a\nb\nc\ny\nz\n"},
			want:  map[string]string{"a.txt": "a\nB\nc\ny\nZ\n"},
		},
		{
			name: "removed line looking like a header is body while counts run",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
--- x
+++ y
 z
`,
			files: map[string]string{"a.txt": "-- x\nz\n"},
			want:  map[string]string{"a.txt": "++ y\nz\n"},
		},
		{
			name: "hunk without numbers",
			patch: `--- a/a.txt
+++ b/a.txt
@@ @@
 a
-b
+B
`,
			files: map[string]string{"a.txt": "a\nb\n"},
			want:  map[string]string{"a.txt": "a\nB\n"},
		},
		{
			name: "zero-context insertion at a line number",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -2,0 +3 @@
+inserted
`,
			files: map[string]string{"a.txt": "1\n2\n3\n"},
			want:  map[string]string{"a.txt": "1\n2\ninserted\n3\n"},
		},
		{
			name: "insertion past the end",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -9,0 +10 @@
+x
`,
			files:   map[string]string{"a.txt": "1\n"},
			wantErr: "past the end of the file (1 lines)",
		},
		{
			name: "CRLF file, LF diff",
			patch: `--- a/w.txt
+++ b/w.txt
@@ -1,3 +1,3 @@
 a
-b
+B
 c
`,
			files: map[string]string{"w.txt": "a\r\nb\r\nc\r\n"},
			want:  map[string]string{"w.txt": "a\r\nB\r\nc\r\n"},
		},
		{
			name: "quoted names",
			patch: `diff --git "a/sp ace\303\251.txt" "b/sp ace\303\251.txt"
--- "a/sp ace\303\251.txt"
+++ "b/sp ace\303\251.txt"
@@ -1 +1 @@
-a
+b
`,
			files: map[string]string{"sp aceé.txt": "a\n"},
			want:  map[string]string{"sp aceé.txt": "b\n"},
		},
		{
			name: "format-patch mail around the diff",
			patch: `From 1234 Mon Sep 17 00:00:00 2001
From: A <a@example.com>
Subject: [PATCH] change

---
 a.txt | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/a.txt b/a.txt
index 1..2 100644
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
+b
-- 
2.40.0

`,
			files: map[string]string{"a.txt": "a\n"},
			want:  map[string]string{"a.txt": "b\n"},
		},
		{
			name: "fuzz levels reported",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
 a
-b
+B
@@ -5,2 +5,2 @@
 e
-f
+F
`,
			files: map[string]string{"a.txt": "a \nb\nc\nd\n  e\nf\n"},
			want:  map[string]string{"a.txt": "a \nB\nc\nd\n  e\nF\n"},
			fuzz:  []Fuzz{FuzzTrailingSpace, FuzzSpace},
		},
		{
			name: "names differ without a rename",
			patch: `--- a/x.txt
+++ b/y.txt
@@ -1 +1 @@
-a
+b
`,
			wantErr: "--- and +++ name different files", errLine: 1,
		},
		{
			name:    "hunk without file header",
			patch:   "@@ -1 +1 @@\n-a\n+b\n",
			wantErr: "hunk without a ---/+++ file header", errLine: 1,
		},
		{
			name:    "binary",
			patch:   "diff --git a/x.png b/x.png\nindex 1..2 100644\nBinary files a/x.png and b/x.png differ\n",
			wantErr: "binary patches are not supported", errLine: 3,
		},
		{
			name:    "copy",
			patch:   "diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n",
			wantErr: "git copies are not supported", errLine: 3,
		},
		{
			name:    "same file twice",
			patch:   "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -3 +3 @@\n-c\n+d\n",
			wantErr: "x is touched twice", errLine: 6,
		},
		{
			name:    "absolute path",
			patch:   "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
			wantErr: "is absolute", errLine: 1,
		},
		{
			name:    "dot-dot in a rename",
			patch:   "diff --git a/x b/../y\nrename from x\nrename to ../y\n",
			wantErr: `".." component`, errLine: 1,
		},
		{
			name:    "bad hunk header",
			patch:   "--- a/x\n+++ b/x\n@@ -a +b @@\n-a\n+b\n",
			wantErr: "bad hunk header", errLine: 3,
		},
		{
			name:    "not a patch",
			patch:   "please change a to b\n",
			wantErr: "no file changes found",
		},
		{
			name: "missing context names the line",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 a
-b
+B
 q
`,
			files:   map[string]string{"a.txt": "a\nb\nc\n"},
			wantErr: `chunk 1 (patch line 3): context line "q" not found: the chunk's first 2 lines match at line 1, but line 3 is "c"`,
		},
		{
			name: "hunks out of order",
			patch: `--- a/a.txt
+++ b/a.txt
@@ -3 +3 @@
-c
+C
@@ -1 +1 @@
-a
+A
`,
			files:   map[string]string{"a.txt": "a\nb\nc\n"},
			wantErr: "chunk 2 (patch line 6): the chunk's lines are at line 1, before line 4",
		},
	})
}

func TestApplyOpChunkResult(t *testing.T) {
	ops, err := ParsePatch("--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n@@ -6 +6 @@\n-f\n+F\n")
	if err != nil {
		t.Fatal(err)
	}
	got, res, err := ApplyOpDetailed(ops[0], "x\nx\nb\nc\nd\ne\nf\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != "x\nx\nb\nC\nd\ne\nF\n" {
		t.Fatalf("got %q", got)
	}
	want := []ChunkResult{{Line: 3, Fuzz: FuzzNone, Offset: 1}, {Line: 7, Fuzz: FuzzNone, Offset: 1}}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("results = %+v, want %+v", res, want)
	}
}

func TestParsePatchStructure(t *testing.T) {
	ops, err := ParsePatch("*** Begin Patch\n*** Update File: a//b/./c.go\n*** Move to: d.go\n@@ func f() {\n@@ \tif x {\n ctx\n-old\n+new\n*** End of File\n*** End Patch\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []FileOp{{
		Kind: Update, Path: "a/b/c.go", MoveTo: "d.go", Format: FormatEnvelope, PatchLine: 2,
		Chunks: []Chunk{{
			Anchors:   []string{"func f() {", "\tif x {"},
			Lines:     []Line{{Kind: LineContext, Text: "ctx"}, {Kind: LineRemove, Text: "old"}, {Kind: LineAdd, Text: "new"}},
			EndOfFile: true,
			PatchLine: 4,
		}},
	}}
	if !reflect.DeepEqual(ops, want) {
		t.Fatalf("got  %+v\nwant %+v", ops, want)
	}

	ops, err = ParsePatch("--- a/x\n+++ b/x\n@@ -3,2 +3 @@ func heading()\n a\n-b\n\\ No newline at end of file\n")
	if err != nil {
		t.Fatal(err)
	}
	want = []FileOp{{
		Kind: Update, Path: "x", Format: FormatUnified, PatchLine: 1,
		Chunks: []Chunk{{
			Lines:    []Line{{Kind: LineContext, Text: "a"}, {Kind: LineRemove, Text: "b", NoEOL: true}},
			HasRange: true, OldStart: 3, OldCount: 2, NewStart: 3, NewCount: 1, PatchLine: 3,
		}},
	}}
	if !reflect.DeepEqual(ops, want) {
		t.Fatalf("got  %+v\nwant %+v", ops, want)
	}
}

func TestValidatePath(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"a.txt", "a.txt", ""},
		{"./dir//x/", "dir/x", ""},
		{"a/./b", "a/b", ""},
		{"..foo/bar..", "..foo/bar..", ""},
		{"", "", "empty path"},
		{".", "", "working directory itself"},
		{"./", "", "working directory itself"},
		{"/abs", "", "absolute"},
		{"a/../b", "", `".." component`},
		{"..", "", `".." component`},
		{"~/x", "", "starts with ~"},
		{"~user", "", "starts with ~"},
		{"a\x00b", "", "NUL"},
	}
	for _, tc := range tests {
		got, err := ValidatePath(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ValidatePath(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ValidatePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
