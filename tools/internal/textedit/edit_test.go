package textedit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestApplyEdits(t *testing.T) {
	tests := []struct {
		name    string
		content string
		edits   []Edit
		want    string
		counts  []int
		levels  []MatchLevel
		wantErr string
		errKind EditErrorKind
		errIdx  int
	}{
		{
			name:    "unique",
			content: "alpha\nbeta\ngamma\n",
			edits:   []Edit{{OldText: "beta", NewText: "BETA"}},
			want:    "alpha\nBETA\ngamma\n", counts: []int{1}, levels: []MatchLevel{MatchExact},
		},
		{
			name:    "ambiguous",
			content: "x = 1\ny = 2\nx = 1\nz\nx = 1\n",
			edits:   []Edit{{OldText: "x = 1", NewText: "x = 3"}},
			wantErr: "edits[0]: old_text is ambiguous: 3 matches (lines 1, 3, 5); add surrounding lines to make it unique, or set replace_all",
			errKind: EditAmbiguous,
		},
		{
			name:    "overlapping occurrences are ambiguous",
			content: "aaa\n",
			edits:   []Edit{{OldText: "aa", NewText: "b"}},
			wantErr: "2 matches (lines 1, 1)", errKind: EditAmbiguous,
		},
		{
			name:    "replace_all",
			content: "x = 1\ny = 2\nx = 1\n",
			edits:   []Edit{{OldText: "x = 1", NewText: "x = 3", ReplaceAll: true}},
			want:    "x = 3\ny = 2\nx = 3\n", counts: []int{2},
		},
		{
			name:    "replace_all is non-overlapping from the left",
			content: "aaaaa",
			edits:   []Edit{{OldText: "aa", NewText: "b", ReplaceAll: true}},
			want:    "bba", counts: []int{2},
		},
		{
			name:    "replace_all with a single match",
			content: "one two",
			edits:   []Edit{{OldText: "two", NewText: "2", ReplaceAll: true}},
			want:    "one 2", counts: []int{1},
		},
		{
			name:    "not found",
			content: "func a() {\n\treturn 1\n}\n",
			edits:   []Edit{{OldText: "b", NewText: "c"}, {OldText: "func a() {\n\treturn 2\n}", NewText: "x"}},
			wantErr: `edits[0]: old_text not found (it starts "b"); no line of the file matches its first non-blank line`,
			errKind: EditNotFound,
		},
		{
			name:    "not found names the closest lines",
			content: "func a() {\n\treturn 1\n}\n",
			edits:   []Edit{{OldText: "func a() {\n\treturn 2\n}", NewText: "x"}},
			wantErr: `edits[0]: old_text not found (it starts "func a() { …"); closest: file line 1, where old_text line 2 "\treturn 2" differs from file line 2 "\treturn 1"`,
			errKind: EditNotFound,
		},
		{
			name:    "empty old_text",
			content: "a",
			edits:   []Edit{{OldText: "a", NewText: "b"}, {OldText: "", NewText: "x"}},
			wantErr: "edits[1]: old_text is empty", errKind: EditEmptyOldText, errIdx: 1,
		},
		{
			name:    "all or nothing: a failing third edit changes nothing",
			content: "one\ntwo\nthree\n",
			edits: []Edit{
				{OldText: "one", NewText: "1"},
				{OldText: "two", NewText: "2"},
				{OldText: "four", NewText: "4"},
			},
			wantErr: "edits[2]: old_text not found", errKind: EditNotFound, errIdx: 2,
		},
		{
			name:    "edits see the previous edits' results",
			content: "a\n",
			edits:   []Edit{{OldText: "a", NewText: "b"}, {OldText: "b", NewText: "c"}},
			want:    "c\n", counts: []int{1, 1},
		},
		{
			name:    "CRLF file, LF edit: CRLF preserved",
			content: "one\r\ntwo\r\nthree\r\n",
			edits:   []Edit{{OldText: "one\ntwo\n", NewText: "uno\ndos\nmas\n"}},
			want:    "uno\r\ndos\r\nmas\r\nthree\r\n", counts: []int{1}, levels: []MatchLevel{MatchLineEndings},
		},
		{
			name:    "CRLF file, one-line old_text, multi-line new_text",
			content: "a\r\nb\r\n",
			edits:   []Edit{{OldText: "b", NewText: "b\nc"}},
			want:    "a\r\nb\r\nc\r\n", levels: []MatchLevel{MatchExact}, counts: []int{1},
		},
		{
			name:    "CRLF match never splits a CRLF",
			content: "a\r\nb\r\n",
			edits:   []Edit{{OldText: "a\n", NewText: ""}},
			want:    "b\r\n", counts: []int{1},
		},
		{
			name:    "LF file, CRLF edit: LF kept",
			content: "a\nb\nc\n",
			edits:   []Edit{{OldText: "a\r\nb\r\n", NewText: "x\r\ny\r\n"}},
			want:    "x\ny\nc\n", counts: []int{1}, levels: []MatchLevel{MatchLineEndings},
		},
		{
			name:    "mostly CRLF file: the majority wins, the odd LF line stays",
			content: "a\r\nb\nc\r\nd\r\n",
			edits:   []Edit{{OldText: "c\nd", NewText: "C\nD"}},
			want:    "a\r\nb\nC\r\nD\r\n", counts: []int{1},
		},
		{
			name:    "no line ending in the file: new_text made consistent",
			content: "x",
			edits:   []Edit{{OldText: "x", NewText: "1\r\n2\r\n3\n"}},
			want:    "1\r\n2\r\n3\r\n", counts: []int{1},
		},
		{
			name:    "indentation: spaces against tabs",
			content: "func f() {\n\tif x {\n\t\ty()\n\t}\n}\n",
			edits:   []Edit{{OldText: "    if x {\n        y()\n    }\n", NewText: "    if x {\n        y()\n        z()\n    }\n"}},
			want:    "func f() {\n\tif x {\n\t\ty()\n\t\tz()\n\t}\n}\n", counts: []int{1}, levels: []MatchLevel{MatchIndentation},
		},
		{
			name:    "indentation: uniform offset re-based",
			content: "class A:\n    def f(self):\n        return 1\n",
			edits:   []Edit{{OldText: "def f(self):\n    return 1", NewText: "def f(self):\n    if self:\n        return 2\n    return 1"}},
			want:    "class A:\n    def f(self):\n        if self:\n            return 2\n        return 1\n", counts: []int{1}, levels: []MatchLevel{MatchIndentation},
		},
		{
			name:    "indentation: old_text more indented than the file",
			content: "a:\n  b\n",
			edits:   []Edit{{OldText: "    a:\n      b", NewText: "    a:\n      b\n      c\n    d"}},
			want:    "a:\n  b\n  c\nd\n", counts: []int{1},
		},
		{
			name:    "indentation: blank lines match blank lines",
			content: "\tx()\n\n\ty()\n",
			edits:   []Edit{{OldText: "x()\n   \ny()", NewText: "x()\ny()"}},
			want:    "\tx()\n\ty()\n", counts: []int{1}, levels: []MatchLevel{MatchIndentation},
		},
		{
			name:    "indentation: CRLF file",
			content: "{\r\n\tx;\r\n}\r\n",
			edits:   []Edit{{OldText: "  x;\n", NewText: "  x;\n  y;\n"}},
			want:    "{\r\n\tx;\r\n\ty;\r\n}\r\n", counts: []int{1},
		},
		{
			name:    "indentation: ambiguous",
			content: "\tx\n\t\tx\n",
			edits:   []Edit{{OldText: "  x", NewText: "y"}},
			wantErr: "2 matches (lines 1, 2)", errKind: EditAmbiguous,
		},
		{
			name:    "indentation: replace_all re-indents each match",
			content: "\tx\n\t\tx\n",
			edits:   []Edit{{OldText: "x", NewText: "y", ReplaceAll: true}},
			want:    "\ty\n\t\ty\n", counts: []int{2},
		},
		{
			name:    "indentation: inconsistent offsets do not match",
			content: "a\n    b\n",
			edits:   []Edit{{OldText: "  a\n  b", NewText: "x"}},
			wantErr: "not found", errKind: EditNotFound,
		},
		{
			name:    "indentation: only whole lines",
			content: "\tfoo(bar)\n",
			edits:   []Edit{{OldText: "  foo(", NewText: "baz("}},
			wantErr: "not found", errKind: EditNotFound,
		},
		{
			name:    "indentation: trailing white space is not ignored",
			content: "\tfoo \n",
			edits:   []Edit{{OldText: "  foo", NewText: "bar"}},
			wantErr: "not found", errKind: EditNotFound,
		},
		{
			name:    "exact wins over indentation",
			content: "\tx\nx\n",
			edits:   []Edit{{OldText: "\tx", NewText: "\ty"}},
			want:    "\ty\nx\n", counts: []int{1}, levels: []MatchLevel{MatchExact},
		},
		{
			name:    "deletion",
			content: "a\nb\nc\n",
			edits:   []Edit{{OldText: "b\n", NewText: ""}},
			want:    "a\nc\n", counts: []int{1},
		},
		{
			name:    "old equals new",
			content: "a\n",
			edits:   []Edit{{OldText: "a", NewText: "a"}},
			want:    "a\n", counts: []int{1},
		},
		// Fuzz regressions (FuzzApplyEdits).
		{
			name:    "fuzz: an exact match may not split a CRLF",
			content: "\r\n",
			edits:   []Edit{{OldText: "\n", NewText: "0"}},
			want:    "0", counts: []int{1}, levels: []MatchLevel{MatchLineEndings},
		},
		{
			name:    "fuzz: re-indented new_text is not line-ending-normalised twice",
			content: "1",
			edits:   []Edit{{OldText: " 1", NewText: "\n\r\r\n"}},
			want:    "\n\r\n", counts: []int{1}, levels: []MatchLevel{MatchIndentation},
		},
		{
			name:    "empty file",
			content: "",
			edits:   []Edit{{OldText: "a", NewText: "b"}},
			wantErr: "not found", errKind: EditNotFound,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, counts, err := ApplyEdits(tc.content, tc.edits)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("got %q, want error %q", got, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tc.wantErr)
				}
				var ee *EditError
				if !errors.As(err, &ee) || ee.Kind != tc.errKind || ee.Index != tc.errIdx {
					t.Fatalf("error %#v: want kind %q index %d", err, tc.errKind, tc.errIdx)
				}
				if got != tc.content || counts != nil {
					t.Fatalf("on error got %q, %v; want the content unchanged and no counts", got, counts)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			if tc.counts != nil && !reflect.DeepEqual(counts, tc.counts) {
				t.Fatalf("counts = %v, want %v", counts, tc.counts)
			}
			if tc.levels != nil {
				_, res, _ := ApplyEditsDetailed(tc.content, tc.edits)
				for i, l := range tc.levels {
					if res[i].Level != l {
						t.Fatalf("edit %d level = %v, want %v", i, res[i].Level, l)
					}
				}
			}
		})
	}
}

func TestAmbiguousErrorFields(t *testing.T) {
	content := strings.Repeat("x\n", 20)
	_, _, err := ApplyEdits(content, []Edit{{OldText: "x", NewText: "y"}})
	var ee *EditError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v", err)
	}
	if ee.Matches != 20 || !reflect.DeepEqual(ee.Lines, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("matches %d lines %v", ee.Matches, ee.Lines)
	}
	if !strings.Contains(err.Error(), "20 matches (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …)") {
		t.Fatalf("message %q", err)
	}
	_, res, err := ApplyEditsDetailed(content, []Edit{{OldText: "x", NewText: "y", ReplaceAll: true}})
	if err != nil || res[0].Count != 20 || len(res[0].Lines) != 20 || res[0].Lines[19] != 20 {
		t.Fatalf("replace_all: %v %+v", err, res)
	}
}
