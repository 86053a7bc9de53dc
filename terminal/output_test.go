package terminal

import (
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestOutputView: the plain-text view keeps printable text (multi-byte
// characters split across reads included), newlines and tabs, and drops
// every escape sequence and other control, even split across reads; the
// scrollback bound drops the oldest bytes and counts them.
func TestOutputView(t *testing.T) {
	newT := func(limit int) *Terminal {
		tm := &Terminal{limit: limit}
		tm.parser = ansi.NewParser()
		tm.parser.SetHandler(ansi.Handler{Print: tm.print, Execute: tm.execute})
		return tm
	}
	tm := newT(1 << 20)
	for _, chunk := range []string{"h\xc3", "\xa9llo \x1b[3", "1mred\x1b[0m\r\n", "\x1b]0;title\x07tab\there\x1b", "[2J\x07\x08end\n"} {
		tm.feed([]byte(chunk))
	}
	if got, want := string(tm.out), "héllo red\ntab\thereend\n"; got != want {
		t.Errorf("output view %q, want %q", got, want)
	}
	small := newT(8)
	small.feed([]byte("0123456789abcdef"))
	if string(small.out) != "89abcdef" || small.dropped != 8 {
		t.Errorf("bounded: %q dropped %d", small.out, small.dropped)
	}
}
