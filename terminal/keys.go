package terminal

import (
	"fmt"
	"strings"
)

// namedKeys are the keys terminal_send takes by name, as the bytes an
// xterm-compatible terminal sends for them (normal cursor mode).
var namedKeys = map[string]string{
	"Enter": "\r", "Tab": "\t", "Esc": "\x1b", "Escape": "\x1b", "Space": " ",
	"Backspace": "\x7f", "BSpace": "\x7f", "Delete": "\x1b[3~", "Insert": "\x1b[2~",
	"Up": "\x1b[A", "Down": "\x1b[B", "Right": "\x1b[C", "Left": "\x1b[D",
	"Home": "\x1b[H", "End": "\x1b[F", "PageUp": "\x1b[5~", "PageDown": "\x1b[6~",
	"BTab": "\x1b[Z",
	"F1":   "\x1bOP", "F2": "\x1bOQ", "F3": "\x1bOR", "F4": "\x1bOS",
	"F5": "\x1b[15~", "F6": "\x1b[17~", "F7": "\x1b[18~", "F8": "\x1b[19~",
	"F9": "\x1b[20~", "F10": "\x1b[21~", "F11": "\x1b[23~", "F12": "\x1b[24~",
}

// KeyBytes turns a key name into what the terminal sends: a named key
// (Enter, Tab, Esc, Up, ...), C-x for control-x (a letter, or one of
// @ [ \ ] ^ _ ?), or M-x for Esc followed by x.
func KeyBytes(name string) (string, error) {
	if b, ok := namedKeys[name]; ok {
		return b, nil
	}
	switch {
	case strings.HasPrefix(name, "C-") && len(name) == 3:
		c := name[2]
		switch {
		case c >= 'a' && c <= 'z':
			return string(rune(c - 'a' + 1)), nil
		case c >= 'A' && c <= 'Z':
			return string(rune(c - 'A' + 1)), nil
		case c == '?':
			return "\x7f", nil
		case c >= '@' && c <= '_':
			return string(rune(c - '@')), nil
		}
	case strings.HasPrefix(name, "M-") && len(name) > 2:
		rest := name[2:]
		if b, err := KeyBytes(rest); err == nil {
			return "\x1b" + b, nil
		}
		if len(rest) == 1 && rest[0] >= 0x20 && rest[0] < 0x7f {
			return "\x1b" + rest, nil
		}
	}
	return "", fmt.Errorf("unknown key %q (named keys such as Enter, Tab, Esc, Up, Down, Left, Right, Backspace, PageUp, F1; C-c for control-c; M-x for alt-x)", name)
}
