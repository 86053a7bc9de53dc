package terminal

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
	"github.com/charmbracelet/x/vt"
)

// events parses b with the parser the emulator uses and lists what it
// dispatches. With cols and rows set, every CSI parameter is clamped as
// clamp promises (screenBound); missing trailing parameters are dropped
// (the emulator reads a missing parameter and an absent one alike), and
// so is the sub-parameter flag of the last one (nothing follows it).
func events(b []byte, cols, rows int) []string {
	var ev []string
	p := ansi.NewParser()
	params := func(cmd ansi.Cmd, ps ansi.Params, clamp bool) string {
		var f []string
		for i, q := range ps {
			v := int(q) & parser.ParamMask
			s := "-"
			if v != parser.MissingParam {
				if clamp {
					v = min(v, screenBound(cols, rows, cmd, i))
				}
				s = fmt.Sprint(v)
			}
			if q.HasMore() && i < len(ps)-1 {
				s += ":"
			}
			f = append(f, s)
		}
		for len(f) > 0 && f[len(f)-1] == "-" {
			f = f[:len(f)-1]
		}
		return strings.Join(f, ",")
	}
	p.SetHandler(ansi.Handler{
		Print:   func(r rune) { ev = append(ev, fmt.Sprintf("print %q", r)) },
		Execute: func(c byte) { ev = append(ev, fmt.Sprintf("exec %#x", c)) },
		HandleCsi: func(cmd ansi.Cmd, ps ansi.Params) {
			ev = append(ev, fmt.Sprintf("csi %#x [%s]", int(cmd), params(cmd, ps, cols > 0)))
		},
		HandleEsc: func(cmd ansi.Cmd) { ev = append(ev, fmt.Sprintf("esc %#x", int(cmd))) },
		HandleDcs: func(cmd ansi.Cmd, ps ansi.Params, d []byte) {
			ev = append(ev, fmt.Sprintf("dcs %#x [%s] %q", int(cmd), params(cmd, ps, false), d))
		},
		HandleOsc: func(cmd int, d []byte) { ev = append(ev, fmt.Sprintf("osc %d %q", cmd, d)) },
		HandlePm:  func(d []byte) { ev = append(ev, fmt.Sprintf("pm %q", d)) },
		HandleApc: func(d []byte) { ev = append(ev, fmt.Sprintf("apc %q", d)) },
		HandleSos: func(d []byte) { ev = append(ev, fmt.Sprintf("sos %q", d)) },
	})
	for _, c := range b {
		p.Advance(c)
	}
	return ev
}

// filterAll runs b through a clamp in pieces of the given sizes (cycled;
// nil: one piece), as the reader would across reads.
func filterAll(b []byte, cols, rows int, pieces []int) []byte {
	c := newClamp(cols, rows)
	var out []byte
	k := 0
	for len(b) > 0 {
		n := len(b)
		if len(pieces) > 0 {
			n = min(len(b), max(1, pieces[k%len(pieces)]))
			k++
		}
		chunk := b[:n]
		b = b[n:]
		for len(chunk) > 0 {
			o, used := c.next(chunk)
			if used == 0 {
				panic("clamp.next took nothing")
			}
			out = append(out, o...)
			chunk = chunk[used:]
		}
	}
	return out
}

// checkClamp: what the emulator's parser makes of the filtered bytes is
// exactly what it makes of the original ones, numbers clamped.
func checkClamp(t *testing.T, in []byte, cols, rows int, pieces []int) {
	t.Helper()
	out := filterAll(in, cols, rows, pieces)
	want, got := events(in, cols, rows), events(out, 0, 0)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("input %q (pieces %v)\nfiltered %q\nwant events:\n%s\ngot:\n%s", in, pieces, out, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// clampCases are the inputs that matter (many found by FuzzClamp): the
// bombs, 8-bit introducers, sequences split or abandoned in every state,
// parameter-list limits, and sequences inside strings.
var clampCases = []string{
	"A\x1b[2147483646b",
	"A\x9b2147483646b",
	"A\x1b[99999999999999999999b",
	"A\x1b[0b\x1b[b\x1b[;b\x1b[1;2b",
	"\x1b[1000000S\x1b[1000000T\x1b[1000000L\x1b[1000000M\x1b[1000000@\x1b[1000000P\x1b[1000000X",
	"\x1b[1000000I\x1b[1000000Z\x1b[1000000C\x1b[1000000D\x1b[1000000A\x1b[1000000B\x1b[1000000E\x1b[1000000F",
	"\x1b[1000000;1000000H\x1b[1000000;1000000f\x1b[1000000G\x1b[1000000`\x1b[1000000a\x1b[1000000d\x1b[1000000e",
	"\x1b[1000000;1000000r\x1b[1000000;1000000s",
	"\x1b[38;2;255;128;0;48;5;196m\x1b[4:3m\x1b[58:2::1:2:3m",
	"\x1b[?2048h\x1b[?1049h\x1b[?2004l\x1b[?1000000h\x1b[?9001$p",
	"\x1b[c\x1b[>c\x1b[0c\x1b[6n\x1b[?6n\x1b[5n\x1b[1000000 q",
	"\x1b[12\n3b\x1b[1\r;2\x08H",
	"\x1b[1;2\x18b\x1b[5\x1a3b",
	"\x1b[1;2\x1b[3b\x9b4\x9b5b",
	"\x1b[ 5b\x1b[1 5b\x1b[1 \x18",
	"\x1b[1\xe2\x82\xacb\x9b\xe2\x82\xac",
	"\x1b[1\xffb\x9b\xc0b",
	"\x1b[?1?2h\x1b[1?2b\x1b[1<2>3b",
	"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23;24;25;26;27;28;29;30;31;32;33;34b",
	"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23;24;25;26;27;28;29;30;31;32b",
	"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23;24;25;26;27;28;29;30;31;b",
	"\x1b[;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;m",
	"\x1b[::::::::::::::::::::::::::::::::::::m\x1b[1:m",
	"\x1b]0;title\x9b99999b\x07\x1b]0;t\x1b[99999b",
	"\x1bP1;99999q\x9b99999b\x1b\\\x1bX\x9b99999b\x1b\\",
	"\x1b\x1b[99999b\x1b\x1b\x1b[5b",
	"\x1b(0\x1b#8\x1b[99999b",
	"\x9b\x9b\x9b99999\x9bb",
	"\x1b[99999\x7fb\x1b[\x7f5b",
	"e\xcc\x81\x1b[99999b\xe2\x9b\x84",
	"00000000000000000\x1b[\x1cc00000",
	"\x1b[?\x1c1h\x1b[\x1c?1h\x1b[1 \x1cq\x1b[99999\x02`",
	"\x1b[99999",
	"\x1b[",
	"\x1b",
}

// TestClampEquivalent: for every case, whole and split into pieces of 1,
// 2, 3 and 7 bytes, the emulator's parser sees the same dispatches from
// the filtered bytes as from the original, with every number within the
// screen's bounds.
func TestClampEquivalent(t *testing.T) {
	for _, tc := range clampCases {
		for _, pieces := range [][]int{nil, {1}, {2}, {3, 1}, {7, 2, 5}} {
			checkClamp(t, []byte(tc), 80, 24, pieces)
			checkClamp(t, []byte(tc), 10, 2, pieces)
		}
	}
}

// FuzzClamp: the same property for arbitrary bytes, split at points the
// fuzzer chooses. Interesting inputs it finds belong in clampCases.
func FuzzClamp(f *testing.F) {
	for _, tc := range clampCases {
		f.Add([]byte(tc), uint8(0), uint8(0))
		f.Add([]byte(tc), uint8(1), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		var pieces []int
		if a > 0 {
			pieces = []int{int(a), int(b) + 1}
		}
		checkClamp(t, in, 80, 24, pieces)
		checkClamp(t, in, 10, 2, pieces)
	})
}

// TestClampSlices: next never hands the emulator more than a slice's
// worth: at most twice sliceBytes of input, and at most sliceHeavy costly
// operations plus one (the byte that reached the bound).
func TestClampSlices(t *testing.T) {
	for _, in := range [][]byte{
		bytes.Repeat([]byte("x"), 100<<10),
		bytes.Repeat([]byte("\n"), 10<<10),
		bytes.Repeat([]byte("\xc3\xa9"), 10<<10),
		bytes.Repeat([]byte("A\x1b[99999b"), 1000),
	} {
		c := newClamp(80, 24)
		for len(in) > 0 {
			_, n := c.next(in)
			if n == 0 || n > 2*sliceBytes {
				t.Fatalf("a slice of %d bytes", n)
			}
			if c.heavy > sliceHeavy+24 {
				t.Fatalf("a slice with %d costly operations", c.heavy)
			}
			in = in[n:]
		}
	}
}

// TestClampRenders: through the filter, the fourteen-byte REP bomb fills
// the screen with A (a screenful of repeats) in milliseconds (unfiltered it costs the emulator
// minutes), and ordinary output renders as it would unfiltered.
func TestClampRenders(t *testing.T) {
	render := func(in string, filtered bool) (string, time.Duration) {
		e := vt.NewEmulator(20, 5)
		b := []byte(in)
		if filtered {
			b = filterAll(b, 20, 5, []int{3})
		}
		start := time.Now()
		_, _ = e.Write(b)
		return e.String(), time.Since(start)
	}
	// A, then a screenful (100 cells) of repeats.
	got, took := render("A\x1b[2147483646b", true)
	if want, _ := render(strings.Repeat("A", 101), false); got != want {
		t.Errorf("the REP bomb rendered %q, want %q", got, want)
	}
	if took > 2*time.Second {
		t.Errorf("the filtered REP bomb took %s", took)
	}
	for _, in := range []string{
		"\x1b[2J\x1b[3;5Hhello\x1b[1;31mred\x1b[0m\x1b[2;1Hx\x1b[3@y\x1b[10Xz\x1b[2P",
		"ab\x1b[3bc\x1b[1;1H\x1b[2Lq\x1b[1M\x1b[S",
	} {
		plain, _ := render(in, false)
		clamped, _ := render(in, true)
		if plain != clamped {
			t.Errorf("%q rendered %q through the filter, %q without", in, clamped, plain)
		}
	}
}
