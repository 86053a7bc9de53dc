package gateway

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var specName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// TestCheckToolName: the specification's names pass, a newline, an
// escape, a path and a name too long once prefixed are refused.
func TestCheckToolName(t *testing.T) {
	for _, ok := range []string{"read_file", "a", "A.b-c_9", strings.Repeat("x", MaxNameLen-len("srv__"))} {
		if err := CheckToolName("srv", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a\nb", "\x1b[2Kls", "../../shell", "a b", "naïve", "a/b", "a:b", "x\x00",
		strings.Repeat("x", MaxNameLen-len("srv__")+1), strings.Repeat("y", 129)} {
		if err := CheckToolName("srv", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestCleanText: escapes, controls and invisible characters go; text,
// newlines and tabs (in a description) stay.
func TestCleanText(t *testing.T) {
	for _, c := range []struct {
		in        string
		multiline bool
		want      string
	}{
		{"plain text", false, "plain text"},
		{"line\none\ttab", true, "line\none\ttab"},
		{"line\none\ttab", false, "line one tab"},
		{"a\r\nb", true, "a\nb"},
		{"\x1b[2K\x1b[1Aerase", true, "erase"},
		{"\x1b[38;5;196mred\x1b[0m", true, "red"},
		{"\x1b]0;title\x07after", true, "after"},
		{"\x1b]8;;http://127.0.0.1/\x1b\\link\x1b]8;;\x1b\\", true, "link"},
		{"\x1bPq#0;2;0;0;0\x1b\\dcs", true, "dcs"},
		{"\x1b_apc\x1b\\x", true, "x"},
		{"\x1bcreset", true, "reset"},
		{"\x1b(Bcharset", true, "charset"},
		{"\u009b2Kc1", true, "c1"},
		{"\u009d0;t\u009cosc8", true, "osc8"},
		{"bell\x07del\x7fnul\x00", true, "belldelnul"},
		{"rtl\u202eevil\u202c", true, "rtlevil"},
		{"zero\u200bwidth\ufeff", true, "zerowidth"},
		// Tag characters spell text no one sees ("ignore" in tags).
		{"ok\U000E0069\U000E0067\U000E006E\U000E006F\U000E0072\U000E0065", true, "ok"},
		{"sep\u2028arator", true, "separator"},
		{"bad\xffutf8", true, "bad\uFFFDutf8"},
		{"\x1b[", true, ""},
		{"\x1b", true, ""},
		{"\x1b[2\u00e9", true, "\u00e9"},
		{"naïve 日本 ✓", false, "naïve 日本 ✓"},
		// From the fuzzer's corpus (FuzzCleanText).
		{"\x1b 0", true, ""},
		{"\x1bX00000", true, ""},
		{"\x1b\x1b\x1b", true, ""},
		{"0000000000\x9b0", true, "0000000000\uFFFD0"},
		{"\u009b0m", true, ""},
		{"\x1b[00", true, ""},
		{"\x80\x9f", true, "\uFFFD\uFFFD"},
		{"\n\x01", false, " "},
	} {
		if got := CleanText(c.in, c.multiline); got != c.want {
			t.Errorf("CleanText(%q, %v) = %q, want %q", c.in, c.multiline, got, c.want)
		}
	}
}

// TestCleanSchema: the descriptions and titles nested in a schema are
// cleaned; control characters in what the tool's contract is made of
// (a property name, an enum value) refuse the schema; numbers survive.
func TestCleanSchema(t *testing.T) {
	in := `{"type":"object","description":"top\u001b[2K","properties":{"path":{"type":"string","title":"P\u001b]0;x\u0007ath","description":"a\nb\u202e"},"n":{"type":"integer","maximum":9007199254740993}},"$defs":{"d":{"anyOf":[{"description":"\u001b[31mnested"}]}}}`
	out, err := CleanSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"$defs":{"d":{"anyOf":[{"description":"nested"}]}},"description":"top","properties":{"n":{"maximum":9007199254740993,"type":"integer"},"path":{"description":"a\nb","title":"Path","type":"string"}},"type":"object"}`
	if string(out) != want {
		t.Errorf("CleanSchema:\n got %s\nwant %s", out, want)
	}
	for _, bad := range []string{
		`{"properties":{"pa\u001b[2Kth":{"type":"string"}}}`,
		`{"properties":{"m":{"enum":["a","\u001b[2Kb"]}}}`,
		`{"default":"x\u0000"}`,
		`{"a":1} {"b":2}`,
		`not json`,
		strings.Repeat(`{"a":`, 80) + `1` + strings.Repeat(`}`, 80),
	} {
		if _, err := CleanSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	// A newline in a default is text, not an escape.
	if _, err := CleanSchema(json.RawMessage(`{"default":"a\nb"}`)); err != nil {
		t.Errorf("a newline in a default: %v", err)
	}
}

// clean says whether s holds nothing CleanText removes.
func cleanOf(t *testing.T, s string, multiline bool) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("invalid UTF-8 out: %q", s)
	}
	for _, r := range s {
		if r == '\n' || r == '\t' {
			if !multiline {
				t.Fatalf("%q out of a single line", r)
			}
			continue
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029 {
			t.Fatalf("%U left in %q", r, s)
		}
	}
}

func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[2K", "\x1b]0;t\x07", "\u009b31m", "\x1bP\x1b\\", "a\xff", "\u202e", "\x1b[2\u00e9", "\t\n\r"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, multiline bool) {
		out := CleanText(s, multiline)
		cleanOf(t, out, multiline)
		if again := CleanText(out, multiline); again != out {
			t.Fatalf("not stable: %q -> %q -> %q", s, out, again)
		}
		if len(out) > len(s)*3 {
			t.Fatalf("grew: %d -> %d bytes", len(s), len(out))
		}
	})
}

func FuzzCheckToolName(f *testing.F) {
	for _, s := range []string{"read_file", "", "a\nb", "../x", strings.Repeat("a", 123)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckToolName("srv", name)
		if ok := specName.MatchString(name) && len("srv__"+name) <= MaxNameLen; ok != (err == nil) {
			t.Fatalf("%q: spec %v, CheckToolName %v", name, ok, err)
		}
	})
}

func FuzzCleanSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object"}`, `{"description":"\u001b[2K"}`, `{"properties":{"a":{"title":"\u009b"}}}`, `[1,"x",{"title":null}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := CleanSchema(json.RawMessage(s))
		if err != nil {
			return
		}
		if len(s) > 0 && !json.Valid(out) {
			t.Fatalf("%q -> invalid JSON %q", s, out)
		}
		again, err := CleanSchema(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not stable: %q -> %q -> %q (%v)", s, out, again, err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					cleanOf(t, k, true)
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case string:
				cleanOf(t, x, true)
			}
		}
		var v any
		_ = json.Unmarshal(out, &v)
		walk(v)
	})
}
