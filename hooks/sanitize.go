package hooks

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sanitize turns a hook's text (a block reason, context) into what the
// model may read: invalid UTF-8 shown as \xNN (never a silent U+FFFD),
// terminal escape sequences and control characters (but newline and tab)
// removed, bidirectional overrides removed, the worktree's absolute path
// made relative, surrounding space trimmed, and at most max bytes (cut on a
// character boundary, with a marker).
func Sanitize(s, workdir string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x1b { // ESC: skip the whole sequence
			i = skipEscape(s, i)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			// control characters, CR included, are dropped
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f:
			// bidirectional overrides and marks
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	out := b.String()
	if workdir != "" && workdir != "/" {
		out = relativize(out, workdir)
	}
	return clip(strings.TrimSpace(out), max)
}

// relativize rewrites every mention of the worktree's absolute path:
// "WD/a/b" becomes "a/b" and "WD" alone becomes ".". A longer name that
// merely starts the same ("WD-old") is left alone.
func relativize(s, wd string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, wd)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		rest := s[i+len(wd):]
		switch {
		case strings.HasPrefix(rest, "/") && len(rest) > 1 && rest[1] != ' ' && rest[1] != '\n':
			rest = rest[1:]
		case rest == "" || strings.ContainsRune(" \t\n:;,)'\"/", rune(rest[0])):
			b.WriteString(".")
		default:
			b.WriteString(wd)
		}
		s = rest
	}
}

// skipEscape returns the index after the escape sequence starting at s[i].
func skipEscape(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[': // CSI: parameters, then one final byte 0x40-0x7e
		for i++; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return i
	case ']', 'P', '_', '^': // OSC, DCS, APC, PM: up to BEL or ESC \
		for i++; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return i
	}
	return i + 1 // a two-byte sequence
}

// clip cuts s to at most max bytes on a character boundary, marking the cut.
func clip(s string, max int) string {
	const marker = " [truncated]"
	if len(s) <= max {
		return s
	}
	cut := max - len(marker)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
