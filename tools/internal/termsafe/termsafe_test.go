package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "hello\tworld\n", "hello\tworld\n"},
		{"utf8", "héllo ✓\n", "héllo ✓\n"},
		{"colour", "\x1b[1;31mFAIL\x1b[0m ok", "FAIL ok"},
		{"osc52 clipboard BEL", "a\x1b]52;c;ZXZpbA==\x07b", "ab"},
		{"osc52 clipboard ST", "a\x1b]52;c;ZXZpbA==\x1b\\b", "ab"},
		{"osc8 link", "\x1b]8;;https://evil.test/\x1b\\click here\x1b]8;;\x1b\\", "click here"},
		{"title", "\x1b]0;pwned\x07x", "x"},
		{"clear screen", "\x1b[2J\x1b[Hfake prompt", "fake prompt"},
		{"cursor up overwrite", "line1\n\x1b[1Aover", "line1\nover"},
		{"carriage return", "real\rfake\n", "real\nfake\n"},
		{"crlf", "a\r\nb\r\n", "a\nb\n"},
		{"bell and backspace", "a\x07b\x08c", "a^Gb^Hc"},
		{"del", "a\x7fb", "a^?b"},
		{"c1 csi", "a\u009b2Jb", "ab"},
		{"c1 osc", "a\u009d52;c;eA==\u009cb", "ab"},
		{"c1 nel", "a\u0085b", "a<U+0085>b"},
		{"dcs", "a\x1bPq#0;2;0;0;0\x1b\\b", "ab"},
		{"two-byte escape", "a\x1b7b\x1b8c\x1b(Bd", "abcd"},
		{"lone esc at end", "a\x1b", "a"},
		{"unterminated osc", "a\x1b]52;c;AAAA", "a"},
		{"nul", "a\x00b", "a^@b"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
	} {
		if got := Clean(c.in); got != c.want {
			t.Errorf("%s: Clean(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// FuzzClean: whatever goes in, what comes out holds no control character
// but tab and newline, no C1 control, and is valid UTF-8; clean text is
// kept as it is.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"ok\n", "\x1b]52;c;x\x07", "\x1b[31mx", "\u009b1m", "a\rb", "\xc2", "\x1b]8;;u\x1b\\t\x1b]8;;\x1b\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Clean(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("control %U left in %q (from %q)", r, out, s)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
			return (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f)
		}) && out != s {
			t.Fatalf("clean text changed: %q -> %q", s, out)
		}
	})
}
