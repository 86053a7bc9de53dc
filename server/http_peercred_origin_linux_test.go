package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// originDialEnv makes the test binary a helper that connects to the
// address it holds, says "connected" and keeps the connection until its
// stdin closes.
const originDialEnv = "EVENER_TEST_ORIGIN_DIAL"

func TestPeerOriginDialHelper(t *testing.T) {
	addr := os.Getenv(originDialEnv)
	if addr == "" {
		t.Skip("helper process")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("connected\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
}

// dialHelper starts the helper through argv (prefix, then the test binary)
// and returns once it is connected to ln; the server end of the
// connection is returned.
func dialHelper(t *testing.T, ln net.Listener, prefix ...string) (*exec.Cmd, net.Conn) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string{}, prefix...), self, "-test.run=^TestPeerOriginDialHelper$", "-test.count=1")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), originDialEnv+"="+ln.Addr().String())
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	got := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(out).ReadString('\n'); got <- l }()
	select {
	case l := <-got:
		if l != "connected\n" {
			t.Fatalf("helper %v: %q", prefix, l)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("helper %v did not connect", prefix)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return cmd, srv
}

// startStranger starts a process this test is not descended from, to
// stand for "the server" when the test process must be a stranger to it.
func startStranger(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func loopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialSelf connects this process to ln and returns the server end.
func dialSelf(t testing.TB, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func newOrigin(self int) *peerOrigin {
	return &peerOrigin{self: self, euid: uint32(os.Geteuid()), proc: "/proc"}
}

// TestPeerOrigin: the process at the other end of a real loopback
// connection is refused when it is the server itself, a child of the
// server, or a process inside one of the server's sandboxes' namespaces
// that is not its descendant; a stranger is served, and its next
// connection is answered from the remembered holder.
func TestPeerOrigin(t *testing.T) {
	ln := loopback(t)

	t.Run("the server itself", func(t *testing.T) {
		s, err := peerSocketOf(dialSelf(t, ln))
		if err != nil {
			t.Fatal(err)
		}
		why, err := newOrigin(os.Getpid()).check(s)
		if err != nil || !strings.Contains(why, "this server itself") {
			t.Fatalf("check = %q, %v; want refused as the server itself", why, err)
		}
	})

	t.Run("a child", func(t *testing.T) {
		cmd, srv := dialHelper(t, ln)
		s, err := peerSocketOf(srv)
		if err != nil {
			t.Fatal(err)
		}
		why, err := newOrigin(os.Getpid()).check(s)
		if err != nil || !strings.Contains(why, "pid "+strconv.Itoa(cmd.Process.Pid)+" ") || !strings.Contains(why, "which this server started") {
			t.Fatalf("check = %q, %v; want refused as pid %d, started by the server", why, err, cmd.Process.Pid)
		}
		// A grandchild too (through sh).
		cmd2, srv2 := dialHelper(t, ln, "/bin/sh", "-c", `"$@"; :`, "sh")
		s2, _ := peerSocketOf(srv2)
		if why, err := newOrigin(os.Getpid()).check(s2); err != nil || !strings.Contains(why, "which this server started") {
			t.Fatalf("grandchild under pid %d: check = %q, %v", cmd2.Process.Pid, why, err)
		}
	})

	t.Run("a stranger", func(t *testing.T) {
		o := newOrigin(startStranger(t))
		for i := range 2 {
			s, err := peerSocketOf(dialSelf(t, ln))
			if err != nil {
				t.Fatal(err)
			}
			if why, err := o.check(s); why != "" || err != nil {
				t.Fatalf("connection %d: check = %q, %v; want served", i, why, err)
			}
			if c := o.recent(); len(c) != 1 || c[0].pid != os.Getpid() {
				t.Fatalf("remembered holders %v, want this process", c)
			}
		}
	})

	t.Run("another evener-mcp server", func(t *testing.T) {
		// This test binary plays another server: origin's own executable
		// is this binary's, its own pid a stranger's.
		o := newOrigin(startStranger(t))
		id, ok := o.exeOf(os.Getpid())
		if !ok {
			t.Fatal("cannot read this process's executable")
		}
		o.exe = id
		// Its proxy (the process itself) dialing.
		s, err := peerSocketOf(dialSelf(t, ln))
		if err != nil {
			t.Fatal(err)
		}
		if why, err := o.check(s); err != nil || !strings.Contains(why, "another evener-mcp server") {
			t.Fatalf("check = %q, %v; want refused as another server", why, err)
		}
		// A command it started (bash, not its executable) dialing.
		port := ln.Addr().(*net.TCPAddr).Port
		cmd := exec.Command("bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected && exec cat", port))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
		if l, _ := bufio.NewReader(out).ReadString('\n'); l != "connected\n" {
			t.Fatalf("bash: %q", l)
		}
		srv, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if s, err = peerSocketOf(srv); err != nil {
			t.Fatal(err)
		}
		why, err := o.check(s)
		if err != nil || !strings.Contains(why, fmt.Sprintf("which another evener-mcp server (pid %d) started", os.Getpid())) {
			t.Fatalf("check = %q, %v; want refused as started by another server", why, err)
		}
		// The control: a server whose executable is another file serves it.
		if sl, ok := o.exeOf(o.self); ok {
			o.exe = sl
			if why, err := o.check(s); why != "" || err != nil {
				t.Fatalf("with another executable: check = %q, %v; want served", why, err)
			}
		}
	})

	t.Run("another uid", func(t *testing.T) {
		// Root's socket on a user's server: no process of the server can
		// own it, and no table is read (inode 0 is held by nobody).
		if why, err := newOrigin(os.Getpid()).check(tcpSocket{UID: uint32(os.Geteuid()) + 1}); why != "" || err != nil {
			t.Fatalf("check = %q, %v; want served", why, err)
		}
	})

	t.Run("no holder", func(t *testing.T) {
		_, err := newOrigin(os.Getpid()).check(tcpSocket{UID: uint32(os.Geteuid()), Inode: 1})
		if !errors.Is(err, errHolderNotFound) {
			t.Fatalf("check of a socket nobody holds = %v, want errHolderNotFound", err)
		}
	})

	t.Run("inside a sandbox's namespaces", func(t *testing.T) {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			t.Skip("bubblewrap not installed")
		}
		if _, err := exec.LookPath("nsenter"); err != nil {
			t.Skip("nsenter not installed")
		}
		if os.Geteuid() != 0 {
			// bubblewrap's pid namespace belongs to a user namespace
			// above the sandbox's: joining it from outside takes
			// CAP_SYS_ADMIN in the initial one.
			t.Skip("joining a sandbox's pid namespace from outside needs root")
		}
		// The "server": bwrap, whose sandbox is a sleep. The holder
		// joins the sandbox's namespaces from outside: not a descendant.
		sb := exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
			"--dev", "/dev", "--proc", "/proc", "--", "sleep", "60")
		if err := sb.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Process.Kill(); _ = sb.Wait() })
		var inner int
		for deadline := time.Now().Add(10 * time.Second); inner == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			procs, _ := newOrigin(0).table()
			for pid, e := range procs {
				if e.comm == "sleep" && descendants(procs, sb.Process.Pid)[pid] {
					inner = pid
				}
			}
		}
		if inner == 0 {
			t.Fatal("the sandbox's sleep did not start")
		}
		cmd, srv := dialHelper(t, ln, "nsenter", "-t", strconv.Itoa(inner), "-U", "-p", "--preserve-credentials")
		s, err := peerSocketOf(srv)
		if err != nil {
			t.Fatal(err)
		}
		why, err := newOrigin(sb.Process.Pid).check(s)
		if err != nil || !strings.Contains(why, "in a sandbox of this server") {
			t.Fatalf("holder under nsenter pid %d: check = %q, %v; want refused as inside a sandbox", cmd.Process.Pid, why, err)
		}
	})
}

func TestParseProcStat(t *testing.T) {
	rest := " S 41 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615"
	for _, comm := range []string{"sleep", "a b", "x) (y", ")"} {
		e, err := parseProcStat([]byte("123 (" + comm + ")" + rest + "\n"))
		if err != nil || e.ppid != 41 || e.start != 98765 || e.comm != comm {
			t.Errorf("comm %q: %+v, %v", comm, e, err)
		}
	}
	for _, bad := range []string{"", "123 sleep S 1", "123 (x) S", "123 (x) S y 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestDescendants(t *testing.T) {
	procs := map[int]procEntry{1: {ppid: 0}, 10: {ppid: 1}, 11: {ppid: 10}, 12: {ppid: 11}, 13: {ppid: 1}, 14: {ppid: 13}}
	got := descendants(procs, 10)
	for pid, want := range map[int]bool{10: true, 11: true, 12: true, 1: false, 13: false, 14: false} {
		if got[pid] != want {
			t.Errorf("pid %d: descendant %v, want %v", pid, got[pid], want)
		}
	}
}

// BenchmarkPeerOrigin: the per-connection cost of the origin check for an
// allowed client, the first connection of a process (the process table
// read) and a later one (the remembered holder).
func BenchmarkPeerOrigin(b *testing.B) {
	ln := loopback(b)
	stranger := startStranger(b)
	b.Run("first", func(b *testing.B) {
		s, err := peerSocketOf(dialSelf(b, ln))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if why, err := newOrigin(stranger).check(s); why != "" || err != nil {
				b.Fatal(why, err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		s, err := peerSocketOf(dialSelf(b, ln))
		if err != nil {
			b.Fatal(err)
		}
		o := newOrigin(stranger)
		if why, err := o.check(s); why != "" || err != nil {
			b.Fatal(why, err)
		}
		for b.Loop() {
			if why, err := o.check(s); why != "" || err != nil {
				b.Fatal(why, err)
			}
		}
	})
	b.Run("lookup", func(b *testing.B) {
		// For scale: the socket-table lookup every connection already paid.
		srv := dialSelf(b, ln)
		for b.Loop() {
			if _, err := peerSocketOf(srv); err != nil {
				b.Fatal(err)
			}
		}
	})
}
