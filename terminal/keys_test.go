package terminal

import (
	"strings"
	"testing"
)

// TestKeyBytes: the named keys, control and meta combinations, and what is
// refused.
func TestKeyBytes(t *testing.T) {
	for in, want := range map[string]string{
		"Enter": "\r", "Tab": "\t", "Esc": "\x1b", "Up": "\x1b[A", "C-c": "\x03", "C-d": "\x04",
		"C-C": "\x03", "C-[": "\x1b", "C-?": "\x7f", "C-@": "\x00", "M-x": "\x1bx", "M-Enter": "\x1b\r",
		"F5": "\x1b[15~", "PageDown": "\x1b[6~",
	} {
		got, err := KeyBytes(in)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "enter", "C-", "C-cc", "C-1", "M-", "M-\x01", "Ctrl-c", "F13"} {
		if got, err := KeyBytes(in); err == nil {
			t.Errorf("%q: %q, want an error", in, got)
		}
	}
}

// FuzzKeyBytes: any name either maps to a short non-empty sequence or is
// refused with an error that does not echo control characters.
func FuzzKeyBytes(f *testing.F) {
	for _, s := range []string{"Enter", "C-c", "M-x", "M-C-c", "C-\x00", "M-\x1b[A", "F1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		b, err := KeyBytes(name)
		if err != nil {
			if b != "" {
				t.Fatalf("%q: bytes with an error", name)
			}
			return
		}
		if b == "" || len(b) > 8 {
			t.Fatalf("%q: %q", name, b)
		}
		if strings.ContainsRune(name, 0x1b) {
			t.Fatalf("%q: a name holding ESC was accepted", name)
		}
	})
}
