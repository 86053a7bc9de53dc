//go:build linux

package confine

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain lets this test binary stand in for evener-mcp's hidden helpers:
// the launcher re-executes its own binary as the loopback holder
// (relayBinary finds no evener-mcp beside a test binary).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if code, ok := RunHidden(os.Args[1], os.Args[2:]); ok {
			os.Exit(code)
		}
	}
	os.Exit(m.Run())
}

// TestSessionLoopback (docs/terminals.md, "Terminals"): with ShareLoopback two
// sandboxed commands of one session share a loopback, so what one listens
// on the other reaches, and the host does not; without it each command
// has its own and the second finds nothing. The listener runs in the
// background of the first command, which stays alive until it is served.
func TestSessionLoopback(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	port := freeHostPort(t)
	server := `import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1",` + strconv.Itoa(port) + `)); s.listen(1)
print("listening", flush=True)
s.settimeout(20)
try:
    c,_=s.accept(); c.sendall(b"hello from the terminal"); c.close()
except Exception as e:
    print("no client", e, flush=True)
`
	client := `import socket
s=socket.create_connection(("127.0.0.1",` + strconv.Itoa(port) + `), timeout=5)
print(s.recv(100).decode())
`
	for _, shared := range []bool{true, false} {
		t.Run("shared="+strconv.FormatBool(shared), func(t *testing.T) {
			p, _ := livePolicy(t, ModeWorkspaceWrite)
			s, err := NewLauncher(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if shared {
				if err := s.LoopbackAvailable(); err != nil {
					t.Fatal(err)
				}
				s.ShareLoopback()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ready := make(chan struct{})
			lw := &lineWatch{want: "listening", hit: ready}
			done := make(chan error, 1)
			go func() {
				_, err := s.Run(ctx, Command{Args: []string{"/usr/bin/python3", "-c", server}, Stdout: lw, Stderr: lw, Timeout: 30 * time.Second})
				done <- err
			}()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("server ended early: %v\n%s", err, lw.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("server not listening:\n%s", lw.String())
			}
			// Never the host's loopback.
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
				c.Close()
				t.Fatal("the host reached a sandboxed command's listener")
			}
			var out bytes.Buffer
			res, err := s.Run(ctx, Command{Args: []string{"/usr/bin/python3", "-c", client}, Stdout: &out, Stderr: &out, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Contains(out.String(), "hello from the terminal")
			if shared && (!got || res.ExitCode != 0) {
				t.Fatalf("shared loopback: the second command did not reach the first (exit %d):\n%s", res.ExitCode, out.String())
			}
			if !shared && (got || res.ExitCode == 0) {
				t.Fatalf("separate namespaces: the second command reached the first:\n%s", out.String())
			}
			cancel()
			<-done
		})
	}
}

// freeHostPort is a port nothing listens on at the host's loopback.
func freeHostPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// lineWatch collects output and closes hit once want appears.
type lineWatch struct {
	mu   sync.Mutex   // guards buf and done
	buf  bytes.Buffer // not embedded: io.Copy would use its ReadFrom
	want string
	hit  chan struct{}
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.hit)
	}
	return n, err
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// livePolicy is a policy of mode (network off) over a fresh fixture under
// /var/tmp, resolved against this host; the test is skipped where no
// sandbox can run.
func livePolicy(t *testing.T, mode Mode) (*Policy, fixture) {
	t.Helper()
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	f := newFixtureUnder(t, "/var/tmp")
	p, err := Resolve(f.spec(mode, NetworkOff), h)
	if err != nil {
		t.Fatal(err)
	}
	return p, f
}

// TestLoopbackOutlivesItsThread: the session loopback's holder is started
// from whichever OS thread the spawn ran on; when Go ends that thread (a
// root server's session cgroup thread ends at every session's end), the
// holder must live on (no parent-death signal, which follows the thread):
// a holder gone fails every later spawn of the session.
func TestLoopbackOutlivesItsThread(t *testing.T) {
	p, _ := livePolicy(t, ModeWorkspaceWrite)
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.LoopbackAvailable(); err != nil {
		t.Skip(err)
	}
	s.ShareLoopback()
	run := func() error {
		_, err := s.Run(context.Background(), Command{Args: []string{"/bin/true"}, Timeout: 30 * time.Second})
		return err
	}
	done := make(chan error, 1)
	tid := 0
	onOwnThread(func() { // never unlocked: the thread ends with f
		tid = unix.Gettid()
		done <- run()
	})
	if err := <-done; err != nil {
		t.Fatalf("first spawn: %v", err)
	}
	if !waitGone(fmt.Sprintf("/proc/self/task/%d", tid), 5*time.Second) {
		t.Fatal("the thread that made the loopback did not end")
	}
	time.Sleep(200 * time.Millisecond)
	s.lbMu.Lock()
	lb := s.lb
	s.lbMu.Unlock()
	if lb == nil || lb.exited == nil {
		t.Fatal("no loopback holder runs")
	}
	select {
	case <-lb.exited:
		t.Fatal("the loopback holder ended with the thread that started it")
	default:
	}
	if err := run(); err != nil {
		t.Errorf("a spawn after the thread ended: %v", err)
	}
}
