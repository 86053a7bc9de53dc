package hooks

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSanitize: whatever a hook prints, what reaches the model is valid
// UTF-8 with no escape sequence, no control character but newline and tab,
// no bidirectional override, and at most max bytes.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[31mred\x1b[0m", "a\x1b]0;title\x07b", "\xff\xfe", "\u202eevil", "/wd/sub/file", "/wd-old/x", "\r\n\t", "\x1b", "\x1b[", strings.Repeat("é", 300)} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		out := Sanitize(s, "/wd", max)
		if !utf8.ValidString(out) {
			t.Fatalf("%q -> invalid UTF-8 %q", s, out)
		}
		for _, r := range out {
			switch {
			case r == '\n' || r == '\t':
			case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
				t.Fatalf("%q -> control character %U in %q", s, r, out)
			case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f:
				t.Fatalf("%q -> bidi mark %U in %q", s, r, out)
			}
		}
		if max >= len(" [truncated]") && len(out) > max {
			t.Fatalf("%q (max %d) -> %d bytes", s, max, len(out))
		}
	})
}

// FuzzParseOutput: any stdout is either no verdict, a verdict, or an
// error; never a panic.
func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{"", "plain", `{"decision":"block","reason":"x"}`, `{"additionalContext":"c"}`, `{"hookSpecificOutput":{"permissionDecision":"deny"}}`, `{`, `{"decision":1}`, `  {"decision":"approve"} trailing`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseOutput(b)
	})
}
