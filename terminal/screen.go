package terminal

import (
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/vt"
	"golang.org/x/sys/unix"
)

// screen is a terminal's screen view (docs/terminals.md, "Terminals"): the emulator
// fed the program's output through clamp, under a budget of the server's
// time. Beyond the budget the output is not rendered (the screen view
// says it is degraded; the output view has everything); rendering resumes
// once the budget has half refilled.
//
// The emulator answers the program's queries (device attributes, cursor
// position) into an in-process pipe; answer copies them to the terminal
// without ever blocking: what the terminal will not take at once (a
// program that does not read) is dropped. So the emulator's lock is never
// held waiting for the program.
type screen struct {
	burst, rate time.Duration // the budget: at most burst at once, rate per second sustained

	mu         sync.Mutex // guards everything below
	emu        *vt.Emulator
	f          *clamp
	closed     bool          // the terminal ended: no more output is rendered
	tokens     time.Duration // budget left
	refilled   time.Time     // when tokens were last refilled
	skipping   bool          // over budget: output is not rendered
	unrendered int64         // output bytes never rendered
}

// Reply pacing: once the terminal refuses a reply, the following ones are
// dropped without a write for this long.
const replyBackoff = 100 * time.Millisecond

func newScreen(cols, rows int, burst, rate time.Duration, master *os.File) *screen {
	s := &screen{burst: burst, rate: rate, emu: vt.NewEmulator(cols, rows), f: newClamp(cols, rows),
		tokens: burst, refilled: time.Now()}
	// The screen view is the visible rows; the output view keeps the
	// history. The emulator's own scrollback (10,000 rows of cells by
	// default, megabytes a terminal) is not read, so it keeps one row.
	s.emu.SetScrollbackSize(1)
	go s.answer(master)
	return s
}

// write renders a chunk of the program's output, a slice at a time (the
// lock is taken per slice), charging each slice's time to the budget.
func (s *screen) write(p []byte) {
	for len(p) > 0 {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		s.tokens = min(s.burst, s.tokens+time.Duration(float64(now.Sub(s.refilled))*float64(s.rate)/float64(time.Second)))
		s.refilled = now
		if s.skipping && s.tokens >= s.burst/2 {
			s.skipping = false
		} else if !s.skipping && s.tokens <= 0 {
			s.skipping = true
		}
		if s.skipping {
			// Neither the filter nor the emulator sees the chunk: they stay
			// in step.
			s.unrendered += int64(len(p))
			s.mu.Unlock()
			return
		}
		out, n := s.f.next(p)
		_, _ = s.emu.Write(out)
		s.tokens -= time.Since(now)
		s.mu.Unlock()
		p = p[n:]
	}
}

// answer copies the emulator's replies to the terminal until the screen
// is closed, never blocking on the terminal.
func (s *screen) answer(master *os.File) {
	rc, err := master.SyscallConn()
	buf := make([]byte, 4096)
	var quiet time.Time
	for {
		n, rerr := s.emu.Read(buf)
		if n > 0 && err == nil && time.Now().After(quiet) {
			var wn int
			var werr error
			// One attempt on the non-blocking descriptor, never a wait.
			cerr := rc.Write(func(fd uintptr) bool {
				wn, werr = unix.Write(int(fd), buf[:n])
				return true
			})
			if cerr != nil || werr != nil || wn < n {
				quiet = time.Now().Add(replyBackoff)
			}
		}
		if rerr != nil {
			return
		}
	}
}

// close stops rendering and ends answer. It waits for the slice being
// rendered, if any.
func (s *screen) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	// Closing the replies' pipe ends answer; the emulator's later replies
	// (none: it is fed no more) would fail at once.
	if pw, ok := s.emu.InputPipe().(*io.PipeWriter); ok {
		_ = pw.Close()
	} else {
		_ = s.emu.Close()
	}
}

// snapshot is the screen view: the rendered rows, the cursor, and how
// many output bytes were never rendered (over the budget).
func (s *screen) snapshot() (text string, row, col int, unrendered int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := s.emu.CursorPosition()
	return screenText(s.emu.String()), pos.Y, pos.X, s.unrendered
}

// screenText trims each rendered row's trailing blanks and the blank rows
// at the bottom, keeping row numbers (a row's index is its line).
func screenText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
