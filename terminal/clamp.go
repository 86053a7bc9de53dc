package terminal

import (
	"strconv"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// clamp is the screen emulator's input filter (docs/terminals.md, "Terminals"): the
// emulator does work in proportion to the numbers in a control sequence
// (it repeats a character once per REP count, moves once per tab stop),
// so a few bytes of output could cost minutes of the server's CPU. clamp
// rewrites every CSI sequence so no number in it exceeds what the screen
// can show: a count or a position to the screen's columns or rows, REP to
// its cells, any other number to 65535 (the bound xterm puts on every
// parameter). Everything else passes through byte for byte.
//
// It parses with the same parser, state table and parameter limit the
// emulator uses (github.com/charmbracelet/x/ansi), so what it sees as a
// sequence is what the emulator will see, split across reads or not. The
// emulator only ever receives a sequence's introducer as written and then,
// once the sequence ends, its parameters in canonical form: the emulator's
// parser reaches the same state and dispatches the same command, with the
// clamped numbers.
//
// clamp also cuts its output into slices of bounded cost (next), so the
// emulator's lock is never held long and the CPU budget (screen) is
// checked often.
type clamp struct {
	p          *ansi.Parser
	cols, rows int
	out        []byte

	fired  bool         // the byte just parsed dispatched a CSI sequence
	cmd    ansi.Cmd     // that sequence's command
	params []ansi.Param // a copy of its parameters, as parsed
	heavy  int          // costly operations in the current slice
}

// Bounds on one slice (clamp.next): bytes, and operations that may touch
// every cell of the screen (a control, a sequence, a row's worth of REP).
const (
	sliceBytes = 4 << 10
	sliceHeavy = 64
	// genericBound is the most any parameter may say (xterm's bound).
	genericBound = 65535
)

// partial reproduces, after an introducer, the parser state a sequence
// was in when it was abandoned: what follows is then taken by the
// emulator exactly as the original bytes would have been.
var partial = map[parser.State]string{
	parser.CsiEntryState:        "",
	parser.CsiParamState:        "0",
	parser.CsiIntermediateState: " ",
}

func newClamp(cols, rows int) *clamp {
	c := &clamp{cols: cols, rows: rows}
	c.p = ansi.NewParser()
	// The emulator keeps as many parameters (parser.MaxParamsSize, the
	// default); clamp needs none of a string sequence's data.
	c.p.SetParamsSize(parser.MaxParamsSize)
	c.p.SetDataSize(1)
	count := func() { c.heavy++ }
	c.p.SetHandler(ansi.Handler{
		Execute:   func(byte) { count() },
		HandleEsc: func(ansi.Cmd) { count() },
		HandleCsi: func(cmd ansi.Cmd, params ansi.Params) {
			c.fired, c.cmd = true, cmd
			c.params = append(c.params[:0], params...)
			c.heavy++
		},
		HandleDcs: func(ansi.Cmd, ansi.Params, []byte) { count() },
		HandleOsc: func(int, []byte) { count() },
		HandlePm:  func([]byte) { count() },
		HandleApc: func([]byte) { count() },
		HandleSos: func([]byte) { count() },
	})
	return c
}

func inCSI(s parser.State) bool {
	return s == parser.CsiEntryState || s == parser.CsiParamState || s == parser.CsiIntermediateState
}

// next filters a prefix of p and returns the bytes to hand the emulator
// (valid until the next call) and how many bytes of p it took. It stops
// after sliceBytes bytes or sliceHeavy costly operations, before an ASCII
// byte where it can (a grapheme cluster is not split across the
// emulator's writes), and always takes at least one byte of a non-empty p.
func (c *clamp) next(p []byte) ([]byte, int) {
	c.out = c.out[:0]
	c.heavy = 0
	i := 0
	for i < len(p) {
		full := i >= sliceBytes || c.heavy >= sliceHeavy
		if full && (p[i] < 0x80 || i >= 2*sliceBytes) {
			break
		}
		c.step(p[i])
		i++
	}
	return c.out, i
}

// step parses one byte and appends what the emulator must see for it.
func (c *clamp) step(b byte) {
	prev := c.p.State()
	c.fired = false
	act := c.p.Advance(b)
	next := c.p.State()
	switch {
	case c.fired:
		// The sequence ended: the emulator, still in CsiEntry, gets its
		// parameters, clamped, and its final byte.
		c.emitCSI(b)
	case !inCSI(prev):
		// Outside a sequence, or its introducer (ESC [ or 0x9B).
		c.out = append(c.out, b)
	case inCSI(next) && (act == parser.ExecuteAction || act == parser.ClearAction):
		// A control executed inside a sequence (the state does not
		// change), or 0x9B starting it over.
		c.out = append(c.out, b)
	case inCSI(next):
		// A parameter, prefix or intermediate byte: kept by the parser.
	default:
		// Abandoned without dispatch: bring the emulator to the state the
		// sequence was in, then give it the byte that ended it.
		c.out = append(c.out, partial[prev]...)
		c.out = append(c.out, b)
	}
}

// emitCSI appends the dispatched sequence's parameters (clamped), its
// intermediate and its final byte. The final byte is b as written, not the
// command's: a control executed inside the sequence overwrites the
// parser's command (it was handed to the emulator as it came), and the
// emulator's parser then makes the same command of it.
func (c *clamp) emitCSI(b byte) {
	if pre := c.cmd.Prefix(); pre != 0 {
		c.out = append(c.out, pre)
	}
	for i, p := range c.params {
		if i > 0 {
			c.out = append(c.out, sep(c.params[i-1]))
		}
		v := int(p) & parser.ParamMask
		if v == parser.MissingParam {
			continue
		}
		c.out = strconv.AppendInt(c.out, int64(min(v, screenBound(c.cols, c.rows, c.cmd, i))), 10)
	}
	// The parser counts a full parameter list only after one more
	// separator.
	if n := len(c.params); n == parser.MaxParamsSize {
		c.out = append(c.out, sep(c.params[n-1]))
	}
	if in := c.cmd.Intermediate(); in != 0 {
		c.out = append(c.out, in)
	}
	c.out = append(c.out, b)
	if c.cmd == 'b' && len(c.params) > 0 {
		// REP: a row's worth of cells per costly operation.
		c.heavy += min(c.params[0].Param(1), c.cols*c.rows) / c.cols
	}
}

func sep(p ansi.Param) byte {
	if p.HasMore() {
		return ':'
	}
	return ';'
}

// screenBound is the most parameter i of a CSI sequence may say on a
// cols x rows screen: the screen's size for the counts and positions the
// emulator acts on (and loops on), genericBound for the rest (modes,
// colours, reports).
func screenBound(cols, rows int, cmd ansi.Cmd, i int) int {
	if cmd.Prefix() != 0 || cmd.Intermediate() != 0 {
		return genericBound
	}
	switch cmd.Final() {
	case '@', 'C', 'D', 'G', 'I', 'P', 'X', 'Z', '`', 'a', 's':
		// ICH CUF CUB CHA CHT DCH ECH CBT HPA HPR DECSLRM
		return cols
	case 'A', 'B', 'E', 'F', 'L', 'M', 'S', 'T', 'd', 'e', 'r':
		// CUU CUD CNL CPL IL DL SU SD VPA VPR DECSTBM
		return rows
	case 'H', 'f':
		// CUP HVP: row; column
		switch i {
		case 0:
			return rows
		case 1:
			return cols
		}
	case 'b':
		// REP: a screenful
		return cols * rows
	}
	return genericBound
}
