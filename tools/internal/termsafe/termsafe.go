// Package termsafe neutralises terminal control sequences in command output
// before it reaches an MCP client, whose human may be watching it in a
// terminal (docs/tools.md, "The tools"): an OSC 52 sequence would write their
// clipboard, OSC 8 would hide a link behind text, a CSI sequence could
// clear the screen, move the cursor over earlier lines or retitle the
// window.
//
// Clean keeps the text readable: tab and newline stay; escape sequences
// (CSI, OSC, DCS, SOS, PM, APC, and two-byte escapes, in their 7-bit and
// 8-bit C1 forms) are removed whole, colours included; a carriage return
// becomes a newline (CRLF one newline), so a line cannot be overwritten;
// every other control character is shown in caret notation (^G, ^?) or, for
// a C1 control, as <U+0085>.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Clean returns s with terminal control sequences neutralised.
func Clean(s string) string {
	if !needs(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\t' || c == '\n':
			b.WriteByte(c)
			i++
		case c == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++ // CRLF: the newline is written next
				continue
			}
			b.WriteByte('\n')
			i++
		case c == 0x1b:
			i = skipEscape(s, i+1)
		case c < 0x20 || c == 0x7f:
			b.WriteByte('^')
			b.WriteByte(c ^ 0x40)
			i++
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				b.WriteRune(utf8.RuneError) // JSON would make it this anyway
			case r >= 0x80 && r <= 0x9f:
				i = skipC1(s, i, r, n, &b)
				continue
			default:
				b.WriteString(s[i : i+n])
			}
			i += n
		}
	}
	return b.String()
}

// needs reports whether s holds anything Clean would change (0xc2 leads
// the C1 controls in UTF-8).
func needs(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f || c == 0xc2 {
			return true
		}
	}
	return !utf8.ValidString(s)
}

// skipEscape skips the sequence after an ESC at s[i-1] and returns the
// index after it.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_':
		return skipString(s, i+1)
	}
	// A two-byte escape (ESC 7, ESC c, ESC ( B: intermediates first).
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI skips parameter and intermediate bytes and the final byte.
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
		i++
	}
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipString skips a control string up to its terminator: BEL, ESC \, or
// the 8-bit ST (U+009C); an unterminated one runs to the end.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i + 1
		case s[i] == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c:
			return i + 2
		}
		i++
	}
	return i
}

// skipC1 handles a C1 control rune r (n bytes at s[i]): CSI and the string
// introducers skip their sequence, others are shown as <U+00XX>.
func skipC1(s string, i int, r rune, n int, b *strings.Builder) int {
	switch r {
	case 0x9b:
		return skipCSI(s, i+n)
	case 0x9d, 0x90, 0x98, 0x9e, 0x9f:
		return skipString(s, i+n)
	}
	const hex = "0123456789ABCDEF"
	b.WriteString("<U+00")
	b.WriteByte(hex[r>>4])
	b.WriteByte(hex[r&0xf])
	b.WriteByte('>')
	return i + n
}
