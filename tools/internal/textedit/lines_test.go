package textedit

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKMPAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for iter := 0; iter < 5000; iter++ {
		text := make([]int32, r.Intn(40))
		for i := range text {
			text[i] = int32(r.Intn(2))
		}
		pat := make([]int32, 1+r.Intn(5))
		for i := range pat {
			pat[i] = int32(r.Intn(2))
		}
		var got []int
		bestLen, bestAt := kmpScan(text, pat, func(s int) bool { got = append(got, s); return true })
		var want []int
		wantLen, wantAt := 0, -1
		for s := 0; s < len(text); s++ {
			n := 0
			for n < len(pat) && s+n < len(text) && text[s+n] == pat[n] {
				n++
			}
			if n == len(pat) {
				want = append(want, s)
			}
			if n > wantLen {
				wantLen, wantAt = n, s
			}
		}
		if !reflect.DeepEqual(got, want) || bestLen != wantLen || (wantLen > 0 && bestAt != wantAt) {
			t.Fatalf("text %v pat %v: got %v (%d at %d), want %v (%d at %d)", text, pat, got, bestLen, bestAt, want, wantLen, wantAt)
		}
	}
}

func TestDetectEOL(t *testing.T) {
	tests := []struct {
		in   string
		want eolStyle
	}{
		{"", eolNone},
		{"abc", eolNone},
		{"a\n", eolLF},
		{"a\r\n", eolCRLF},
		{"a\r\nb\nc\r\n", eolCRLF},
		{"a\nb\r\nc\n", eolLF},
		{"a\r\nb\n", eolCRLF}, // tie: the first ending
		{"a\nb\r\n", eolLF},
	}
	for _, tc := range tests {
		if got := detectEOL(tc.in); got != tc.want {
			t.Errorf("detectEOL(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := excerpt("one\r\ntwo"); got != "one …" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("é", 100)
	got := excerpt(long)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > 84 {
		t.Errorf("got %q", got)
	}
}

func TestStrings(t *testing.T) {
	for _, s := range []string{
		Add.String(), Delete.String(), Update.String(), OpKind(9).String(),
		FormatEnvelope.String(), FormatUnified.String(), Format(0).String(),
		FuzzNone.String(), FuzzTrailingSpace.String(), FuzzSpace.String(), Fuzz(7).String(),
		MatchExact.String(), MatchLineEndings.String(), MatchIndentation.String(), MatchLevel(5).String(),
	} {
		if s == "" {
			t.Error("empty String()")
		}
	}
	if Fuzz(7).String() != "Fuzz(7)" || Add.String() != "add" {
		t.Error("unexpected String()")
	}
}
