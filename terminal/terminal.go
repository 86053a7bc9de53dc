// Package terminal keeps a session's terminals (docs/terminals.md, "Terminals"): a
// program on a pseudo-terminal the server holds, started through the
// session's launcher under the session's policy (never a host shell while
// the session is sandboxed), with what it writes kept two ways: as a screen
// rendered by a terminal emulator (github.com/charmbracelet/x/vt) and as
// plain text with every escape sequence removed (the ANSI parser of
// github.com/charmbracelet/x/ansi). The pseudo-terminal comes from
// github.com/creack/pty.
//
// Nothing the program writes makes the server do unbounded work or wait
// on the program: the emulator's input is clamped to the screen's size
// (clamp), rendered under a budget of the server's time (screen), and its
// replies never block; the terminal's reader and emulator end with it.
//
// The package knows nothing of MCP; the terminal_* tools (package tools)
// call it. A Set belongs to one session and ends with it.
package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/evener-dev/evener-mcp/confine"
)

// Limits bound a session's terminals (docs/terminals.md, "Terminals").
type Limits struct {
	// Max is how many terminals a session may have open at once.
	Max int
	// Scrollback is how many bytes of unread plain-text output a terminal
	// keeps; older output is dropped and counted.
	Scrollback int
	// Idle closes a terminal nobody sent to or read from for this long.
	Idle time.Duration
	// ScreenBurst and ScreenRate budget the server's time a terminal's
	// screen view may take: at most ScreenBurst at once, ScreenRate per
	// second sustained. Beyond it the output is not rendered (the screen
	// view says so); the output view is not affected.
	ScreenBurst, ScreenRate time.Duration
}

// DefaultLimits are the embedded defaults.
var DefaultLimits = Limits{Max: 8, Scrollback: 256 << 10, Idle: 30 * time.Minute,
	ScreenBurst: 2 * time.Second, ScreenRate: 100 * time.Millisecond}

// Bounds on what one call may ask.
const (
	MaxWait      = 30 * time.Second
	MaxCols      = 500
	MaxRows      = 200
	DefaultCols  = 120
	DefaultRows  = 40
	MaxSendBytes = 64 << 10
	// quiet is how long output must pause before a waiting read returns.
	quiet = 300 * time.Millisecond
	// startWait bounds how long Start waits for the sandbox to exist.
	startWait = 30 * time.Second
)

// sendWait bounds how long Send waits for the program to take its input
// (a variable for the tests).
var sendWait = 10 * time.Second

// ErrUnknown is returned for an id the session does not have.
var ErrUnknown = errors.New("no such terminal")

// Set is one session's terminals.
type Set struct {
	l   *confine.Launcher
	lim Limits

	mu     sync.Mutex // guards terms, next, closed and onEnd
	terms  map[string]*Terminal
	next   int
	closed bool
	onEnd  func(id string, res confine.Result)

	stop chan struct{} // closed by Close: ends the idle reaper
}

// NewSet makes the session's terminal set. The first Start makes l share
// one loopback (confine.Launcher.ShareLoopback), so terminals and the
// session's later commands meet on it.
func NewSet(l *confine.Launcher, lim Limits) *Set {
	if lim.Max <= 0 {
		lim.Max = DefaultLimits.Max
	}
	if lim.Scrollback <= 0 {
		lim.Scrollback = DefaultLimits.Scrollback
	}
	if lim.Idle <= 0 {
		lim.Idle = DefaultLimits.Idle
	}
	if lim.ScreenBurst <= 0 {
		lim.ScreenBurst = DefaultLimits.ScreenBurst
	}
	if lim.ScreenRate <= 0 {
		lim.ScreenRate = DefaultLimits.ScreenRate
	}
	s := &Set{l: l, lim: lim, terms: map[string]*Terminal{}, stop: make(chan struct{})}
	go s.reap()
	return s
}

// OnEnd makes f receive how each later terminal's program ended (what the
// git sweep and the protected-in-git check did after it, say), on the
// goroutine that waited for it. f must not block.
func (s *Set) OnEnd(f func(id string, res confine.Result)) {
	s.mu.Lock()
	s.onEnd = f
	s.mu.Unlock()
}

// Terminal is one program on a pseudo-terminal.
type Terminal struct {
	ID      string
	Command string
	Backend string
	Started time.Time

	master *os.File // non-blocking: a read ends when it is closed
	scr    *screen
	cancel context.CancelFunc
	done   chan struct{} // closed once the program ended and output drained
	parser *ansi.Parser  // used only by the output reader, with mu held
	limit  int           // the scrollback bound in bytes

	sendMu sync.Mutex // serializes Send's writes (each sets the write deadline)

	mu       sync.Mutex    // guards what follows
	out      []byte        // plain text not yet read
	dropped  int           // bytes of it dropped for the scrollback bound
	lastOut  time.Time     // when output last arrived
	lastUse  time.Time     // last send or read
	exited   bool          // the program ended
	exitCode int           // its status, once exited
	signal   chan struct{} // closed and replaced whenever output arrives or it exits
}

// StartOptions are terminal_start's arguments.
type StartOptions struct {
	// Command runs with bash -c; "" is an interactive bash.
	Command string
	// Workdir is inside the worktree (relative to it, or absolute).
	Workdir    string
	Cols, Rows int
}

// Info describes a terminal for terminal_list.
type Info struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	Backend  string `json:"backend"`
	Exited   bool   `json:"exited"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Started  string `json:"started"`
}

// Start starts a terminal. A sandboxed session's terminal starts in the
// session's sandbox or not at all.
func (s *Set) Start(o StartOptions) (*Terminal, error) {
	if o.Cols == 0 {
		o.Cols = DefaultCols
	}
	if o.Rows == 0 {
		o.Rows = DefaultRows
	}
	if o.Cols < 10 || o.Cols > MaxCols || o.Rows < 2 || o.Rows > MaxRows {
		return nil, fmt.Errorf("cols must be 10..%d and rows 2..%d", MaxCols, MaxRows)
	}
	if err := s.l.LoopbackAvailable(); err != nil {
		return nil, fmt.Errorf("terminals are not available: %w", err)
	}
	// From here on the session's commands share one loopback with its
	// terminals (made at this terminal's spawn).
	s.l.ShareLoopback()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the session is closing")
	}
	if len(s.terms) >= s.lim.Max {
		s.mu.Unlock()
		return nil, fmt.Errorf("this session already has %d terminals open (the limit, max_terminals); close one with terminal_close", s.lim.Max)
	}
	s.next++
	id := "t" + strconv.Itoa(s.next)
	s.mu.Unlock()

	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: uint16(o.Rows), Cols: uint16(o.Cols)}); err != nil {
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("size the pseudo-terminal: %w", err)
	}
	if master, err = pollable(master); err != nil {
		tty.Close()
		return nil, err
	}
	args := []string{"bash", "-i"}
	if o.Command != "" {
		args = []string{"bash", "-c", o.Command}
	}
	now := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t := &Terminal{ID: id, Command: o.Command, Backend: s.l.Policy().Backend(), Started: now,
		master: master, cancel: cancel,
		done: make(chan struct{}), lastUse: now, signal: make(chan struct{}), limit: s.lim.Scrollback}
	if t.Command == "" {
		t.Command = "bash"
	}
	t.parser = ansi.NewParser()
	t.parser.SetHandler(ansi.Handler{Print: t.print, Execute: t.execute})

	started := make(chan struct{})
	var once sync.Once
	type ended struct {
		res confine.Result
		err error
	}
	end := make(chan ended, 1)
	go func() {
		res, err := s.l.Run(ctx, confine.Command{Args: args, Dir: o.Workdir,
			Stdin: tty, Stdout: tty, Stderr: tty, Terminal: true,
			Env:     map[string]string{"TERM": "xterm-256color", "COLUMNS": strconv.Itoa(o.Cols), "LINES": strconv.Itoa(o.Rows)},
			OnStart: func() { once.Do(func() { close(started) }) }})
		tty.Close() // the program is gone: the reader sees EIO once drained
		end <- ended{res, err}
	}()
	select {
	case <-started:
	case e := <-end:
		cancel()
		master.Close()
		if e.err == nil {
			e.err = errors.New("the program ended before it started")
		}
		return nil, fmt.Errorf("start the terminal: %w", e.err)
	case <-time.After(startWait):
		cancel()
		<-end
		master.Close()
		return nil, errors.New("start the terminal: the sandbox did not start in time")
	}
	// The screen exists before anyone can find the terminal (Close,
	// the idle reaper).
	t.scr = newScreen(o.Cols, o.Rows, s.lim.ScreenBurst, s.lim.ScreenRate, master)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		<-end
		t.scr.close()
		master.Close()
		return nil, errors.New("the session is closing")
	}
	s.terms[id] = t
	s.mu.Unlock()

	readerDone := make(chan struct{})
	go t.readOutput(readerDone)
	go func() {
		e := <-end
		s.mu.Lock()
		onEnd := s.onEnd
		s.mu.Unlock()
		if onEnd != nil {
			onEnd(id, e.res)
		}
		// The reader ends once the program's side of the terminal is
		// closed everywhere; a process that outlived the program (only
		// possible without a sandbox, where no PID namespace ends with it)
		// may hold it: give the output a moment, then end the terminal
		// anyway.
		select {
		case <-readerDone:
		case <-time.After(2 * time.Second):
		}
		t.mu.Lock()
		t.exited = true
		t.exitCode = e.res.ExitCode
		if e.err != nil && e.res.ExitCode == 0 {
			t.exitCode = -1
		}
		t.wake()
		t.mu.Unlock()
		cancel()
		// Closing the terminal ends a read a stray process kept waiting;
		// closing the screen ends its rendering (within a slice) and its
		// replies.
		master.Close()
		t.scr.close()
		select {
		case <-readerDone:
		case <-time.After(2 * time.Second):
		}
		close(t.done)
	}()
	return t, nil
}

// readOutput copies the program's output into the screen and the
// plain-text buffer until the pseudo-terminal reports its end or is
// closed.
func (t *Terminal) readOutput(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.scr.write(buf[:n])
			t.mu.Lock()
			t.feed(buf[:n])
			t.lastOut = time.Now()
			t.wake()
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// feed adds a chunk of the program's output to the plain-text view
// (t.mu held), then drops the oldest bytes beyond the scrollback bound,
// once per chunk.
func (t *Terminal) feed(p []byte) {
	t.parser.Parse(p)
	if over := len(t.out) - t.limit; over > 0 {
		t.out = append(t.out[:0], t.out[over:]...)
		t.dropped += over
	}
}

// print and execute are the ANSI parser's callbacks (t.mu held, from
// feed): printable runes are kept, of the control characters only newline
// and tab; every escape sequence is dropped by the parser itself.
func (t *Terminal) print(r rune) { t.out = utf8.AppendRune(t.out, r) }

func (t *Terminal) execute(b byte) {
	if b == '\n' || b == '\t' {
		t.out = append(t.out, b)
	}
}

// wake tells waiting readers something changed (t.mu held).
func (t *Terminal) wake() {
	close(t.signal)
	t.signal = make(chan struct{})
}

// ReadResult is terminal_read's answer.
type ReadResult struct {
	Text     string `json:"text"`
	Exited   bool   `json:"exited"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// Dropped counts output bytes lost to the scrollback bound since the
	// last output read.
	Dropped int `json:"dropped_bytes,omitempty"`
	// CursorRow and CursorCol (screen view, from 0) place the cursor.
	CursorRow *int `json:"cursor_row,omitempty"`
	CursorCol *int `json:"cursor_col,omitempty"`
	// ScreenDegraded (screen view) says output was not rendered: the
	// terminal went over its budget of the server's time (Limits); the
	// screen may be incomplete, the output view is not. Unrendered counts
	// those bytes.
	ScreenDegraded bool  `json:"screen_degraded,omitempty"`
	Unrendered     int64 `json:"unrendered_bytes,omitempty"`
}

// Read waits up to wait for output to arrive and then pause (or for the
// program to end), then returns the view: "output" (the plain text written
// since the last output read) or "screen" (the rendered rows).
func (s *Set) Read(ctx context.Context, id string, wait time.Duration, view string) (*ReadResult, error) {
	t, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if view == "" {
		view = "output"
	}
	if view != "output" && view != "screen" {
		return nil, fmt.Errorf("view must be output or screen, not %q", view)
	}
	if wait < 0 || wait > MaxWait {
		return nil, fmt.Errorf("wait_ms must be 0..%d", MaxWait.Milliseconds())
	}
	begin := time.Now()
	deadline := begin.Add(wait)
	t.mu.Lock()
	pending := len(t.out) > 0
	t.mu.Unlock()
	for {
		t.mu.Lock()
		t.lastUse = time.Now()
		exited, sig := t.exited, t.signal
		arrived := pending || t.lastOut.After(begin)
		calm := time.Since(t.lastOut)
		t.mu.Unlock()
		now := time.Now()
		if exited || !now.Before(deadline) || (arrived && calm >= quiet) {
			break
		}
		next := deadline
		if arrived && now.Add(quiet-calm).Before(next) {
			next = now.Add(quiet - calm)
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-sig:
		case <-timer.C:
		}
		timer.Stop()
	}
	r := &ReadResult{}
	t.mu.Lock()
	r.Exited = t.exited
	if t.exited {
		c := t.exitCode
		r.ExitCode = &c
	}
	if view == "output" {
		r.Text, r.Dropped = string(t.out), t.dropped
		t.out, t.dropped = nil, 0
	}
	t.mu.Unlock()
	if view == "screen" {
		var row, col int
		r.Text, row, col, r.Unrendered = t.scr.snapshot()
		r.CursorRow, r.CursorCol = &row, &col
		r.ScreenDegraded = r.Unrendered > 0
	}
	return r, nil
}

// Send writes text, then each key, to the terminal.
func (s *Set) Send(id, text string, keys []string) error {
	t, err := s.get(id)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(text)
	for _, k := range keys {
		kb, err := KeyBytes(k)
		if err != nil {
			return err
		}
		b.WriteString(kb)
	}
	if b.Len() > MaxSendBytes {
		return fmt.Errorf("at most %d bytes per send", MaxSendBytes)
	}
	t.mu.Lock()
	t.lastUse = time.Now()
	exited := t.exited
	t.mu.Unlock()
	if exited {
		return errors.New("the terminal's program has ended")
	}
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	_ = t.master.SetWriteDeadline(time.Now().Add(sendWait))
	n, err := io.WriteString(t.master, b.String())
	_ = t.master.SetWriteDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the program did not take its input within %s (it is not reading): %d of %d bytes sent", sendWait, n, b.Len())
	}
	if err != nil {
		return fmt.Errorf("write to the terminal: %w", err)
	}
	return nil
}

// Close ends a terminal's whole process tree and forgets it.
func (s *Set) Close(id string) (*ReadResult, error) {
	t, err := s.get(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.terms, id)
	s.mu.Unlock()
	t.end()
	r := &ReadResult{Exited: true}
	t.mu.Lock()
	c := t.exitCode
	t.mu.Unlock()
	r.ExitCode = &c
	return r, nil
}

// end kills the terminal's tree (the launcher kills its sandbox's PID
// namespace), stops its rendering at once and waits, bounded, for it to
// be gone.
func (t *Terminal) end() {
	t.cancel()
	t.scr.close()
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
	}
}

// List describes the session's terminals, oldest first.
func (s *Set) List() []Info {
	s.mu.Lock()
	ts := make([]*Terminal, 0, len(s.terms))
	for _, t := range s.terms {
		ts = append(ts, t)
	}
	s.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].Started.Before(ts[j].Started) })
	out := make([]Info, 0, len(ts))
	for _, t := range ts {
		i := Info{ID: t.ID, Command: t.Command, Backend: t.Backend, Started: t.Started.UTC().Format(time.RFC3339)}
		t.mu.Lock()
		if t.exited {
			c := t.exitCode
			i.Exited, i.ExitCode = true, &c
		}
		t.mu.Unlock()
		out = append(out, i)
	}
	return out
}

// CloseAll ends every terminal; later starts are refused. The session
// calls it when it ends.
func (s *Set) CloseAll() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	ts := s.terms
	s.terms = map[string]*Terminal{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Add(1)
		go func() { defer wg.Done(); t.end() }()
	}
	wg.Wait()
}

func (s *Set) get(id string) (*Terminal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.terms[id]
	if !ok {
		return nil, fmt.Errorf("%w %q (terminal_list shows this session's)", ErrUnknown, id)
	}
	return t, nil
}

// reap closes terminals idle past the limit.
func (s *Set) reap() {
	every := s.lim.Idle / 4
	if every > time.Minute {
		every = time.Minute
	}
	if every < 50*time.Millisecond {
		every = 50 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		var idle []string
		s.mu.Lock()
		for id, t := range s.terms {
			t.mu.Lock()
			if time.Since(t.lastUse) > s.lim.Idle {
				idle = append(idle, id)
			}
			t.mu.Unlock()
		}
		s.mu.Unlock()
		for _, id := range idle {
			_, _ = s.Close(id)
		}
	}
}

// pollable turns the pseudo-terminal's side the server holds into a
// non-blocking descriptor in the runtime's poller (pty.Open leaves it
// blocking): a read then ends when the descriptor is closed, writes can
// have a deadline, and the emulator's replies can be tried without
// waiting (screen.answer). It takes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the pseudo-terminal: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make the pseudo-terminal non-blocking: %w", err)
	}
	nf := os.NewFile(uintptr(fd), "ptmx")
	if err := nf.SetDeadline(time.Time{}); err != nil {
		nf.Close()
		return nil, fmt.Errorf("poll the pseudo-terminal: %w", err)
	}
	return nf, nil
}
