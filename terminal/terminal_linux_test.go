//go:build linux

package terminal

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/internal/sandboxtest"
)

// TestMain lets this test binary stand in for evener-mcp's hidden helpers
// (the loopback holder), which the launcher re-executes its binary as.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if code, ok := confine.RunHidden(os.Args[1], os.Args[2:]); ok {
			os.Exit(code)
		}
	}
	os.Exit(m.Run())
}

// newSet is a terminal set over a real sandbox of mode, on a fresh
// sandboxtest host.
func newSet(t *testing.T, mode confine.Mode, lim Limits) (*Set, string) {
	t.Helper()
	h := sandboxtest.NewHost(t)
	l := sandboxtest.Launcher(t, sandboxtest.Resolve(t, h.Spec(mode), sandboxtest.Live(t, mode)))
	s := NewSet(l, lim)
	t.Cleanup(s.CloseAll)
	return s, h.Work
}

// readUntil reads the output view until want appears (bounded).
func readUntil(t *testing.T, s *Set, id, want string) string {
	t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := s.Read(context.Background(), id, 2*time.Second, "output")
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(r.Text)
		if strings.Contains(all.String(), want) {
			return all.String()
		}
		if r.Exited {
			break
		}
	}
	t.Fatalf("terminal %s never showed %q; got:\n%s", id, want, all.String())
	return ""
}

// TestREPL: a python REPL answers print(6*7) with 42; the output view has
// no escape bytes.
func TestREPL(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	s, _ := newSet(t, confine.ModeWorkspaceWrite, Limits{})
	term, err := s.Start(StartOptions{Command: "/usr/bin/python3 -q"})
	if err != nil {
		t.Fatal(err)
	}
	if term.Backend != "bwrap" {
		t.Errorf("backend %q", term.Backend)
	}
	readUntil(t, s, term.ID, ">>>")
	if err := s.Send(term.ID, "print(6*7)", []string{"Enter"}); err != nil {
		t.Fatal(err)
	}
	out := readUntil(t, s, term.ID, "42")
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("escape bytes in the output view: %q", out)
	}
}

// TestInterrupt: C-c interrupts a running sleep in an interactive bash,
// which then answers again.
func TestInterrupt(t *testing.T) {
	s, _ := newSet(t, confine.ModeWorkspaceWrite, Limits{})
	term, err := s.Start(StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(term.ID, "sleep 1000; echo after-$((6*7))", []string{"Enter"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := s.Send(term.ID, "", []string{"C-c"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(term.ID, "echo alive-$((6*7))", []string{"Enter"}); err != nil {
		t.Fatal(err)
	}
	out := readUntil(t, s, term.ID, "alive-42")
	if strings.Contains(out, "after-42") {
		t.Errorf("the sleep was not interrupted (the rest of its line ran):\n%s", out)
	}
}

// TestScreen: a program that clears the screen and prints at row 5,
// column 10 shows the text there in the screen view, with no escape bytes.
func TestScreen(t *testing.T) {
	s, _ := newSet(t, confine.ModeReadOnly, Limits{})
	term, err := s.Start(StartOptions{Command: `printf '\033[2J\033[5;10Hhello-screen'; sleep 30`, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := s.Read(context.Background(), term.ID, time.Second, "screen")
		if err != nil {
			t.Fatal(err)
		}
		rows := strings.Split(r.Text, "\n")
		if len(rows) >= 5 && strings.Index(rows[4], "hello-screen") == 9 {
			if strings.ContainsRune(r.Text, 0x1b) {
				t.Fatalf("escape bytes in the screen view: %q", r.Text)
			}
			if *r.CursorRow != 4 || *r.CursorCol != 21 {
				t.Errorf("cursor at %d,%d, want 4,21", *r.CursorRow, *r.CursorCol)
			}
			return
		}
	}
	t.Fatal("the text never appeared at row 5, column 10")
}

// TestCloseLeavesNothing: terminal_close ends the whole tree, a
// background child included; the limit on open terminals holds.
func TestCloseLeavesNothing(t *testing.T) {
	s, _ := newSet(t, confine.ModeWorkspaceWrite, Limits{Max: 1})
	term, err := s.Start(StartOptions{Command: "sleep 1001 & sleep 1002"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(StartOptions{}); err == nil || !strings.Contains(err.Error(), "max_terminals") {
		t.Fatalf("a second terminal past the limit: %v", err)
	}
	waitProcs(t, "sleep 100", true)
	if _, err := s.Close(term.ID); err != nil {
		t.Fatal(err)
	}
	waitProcs(t, "sleep 100", false)
	if len(s.List()) != 0 {
		t.Errorf("still listed: %+v", s.List())
	}
}

// TestIdleClose: a terminal nobody uses is closed after the idle limit.
func TestIdleClose(t *testing.T) {
	s, _ := newSet(t, confine.ModeWorkspaceWrite, Limits{Idle: 300 * time.Millisecond})
	if _, err := s.Start(StartOptions{Command: "sleep 1003"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.List()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if len(s.List()) != 0 {
		t.Fatal("an idle terminal was not closed")
	}
	waitProcs(t, "sleep 1003", false)
}

// waitProcs waits (bounded) until a process whose command line contains
// marker exists (want) or none does.
func waitProcs(t *testing.T, marker string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
				found = true
				break
			}
		}
		if found == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %q present=%v, want %v", marker, found, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestModeOffTerminal: with the sandbox off a terminal is a host program
// (backend none); one whose background child still holds the terminal is
// reported ended all the same, and its process group is ended with it.
func TestModeOffTerminal(t *testing.T) {
	s, _ := newSet(t, confine.ModeOff, Limits{})
	term, err := s.Start(StartOptions{Command: `(trap "" HUP; exec sleep 1044) & echo started-$((40+2))`})
	if err != nil {
		t.Fatal(err)
	}
	if term.Backend != "none" {
		t.Errorf("backend %q, want none", term.Backend)
	}
	readUntil(t, s, term.ID, "started-42")
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := s.Read(context.Background(), term.ID, time.Second, "output")
		if err != nil {
			t.Fatal(err)
		}
		if r.Exited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminal never reported its program's end")
		}
	}
	waitProcs(t, "sleep 1044", false)
}
