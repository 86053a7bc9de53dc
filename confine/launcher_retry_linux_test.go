package confine

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestSocketVanishedRetried: a host Unix socket the inspection found and
// whose owner removes it before bubblewrap mounts its mask (here: while the
// sandbox is held, from OnStart) used to fail the spawn with bubblewrap's
// "Can't create file at ..."; the launcher builds the sandbox again, once,
// and the command runs once, with none of bubblewrap's words in its output.
func TestSocketVanishedRetried(t *testing.T) {
	p, f := livePolicy(t, ModeWorkspaceWrite)
	sock := filepath.Join(f.root, "sockets", "host.sock")
	mustMkdir(t, filepath.Dir(sock))
	l, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ran := filepath.Join(f.work, "ran")

	listen := func() *net.UnixListener {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(true)
		return ln
	}
	ln := listen()
	var starts atomic.Int32
	var out bytes.Buffer
	res, err := l.Run(context.Background(), Command{
		Args:   []string{"/bin/sh", "-c", "echo once >> ran; echo ok"},
		Stdout: &out, Stderr: &out,
		OnStart: func() {
			if starts.Add(1) == 1 {
				ln.Close() // removes the socket: its mask has no mount point now
			}
		},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, output %q", err, res.ExitCode, out.String())
	}
	if n := starts.Load(); n != 2 {
		t.Fatalf("the sandbox was built %d times, want 2 (the first one failing on the vanished socket); output %q", n, out.String())
	}
	if out.String() != "ok\n" {
		t.Errorf("output %q, want only the command's", out.String())
	}
	if b, _ := os.ReadFile(ran); string(b) != "once\n" {
		t.Errorf("the command ran %q, want once", b)
	}

	// Control: the socket stays; a command that prints bubblewrap's words
	// for it and exits 1 is not run again, and its output is kept whole.
	ln = listen()
	defer ln.Close()
	os.Remove(ran)
	out.Reset()
	line := "bwrap: Can't create file at " + sock + ": Read-only file system"
	res, err = l.Run(context.Background(), Command{
		Args:   []string{"/bin/sh", "-c", "echo once >> ran; echo \"$0\" >&2; exit 1", line},
		Stdout: &out, Stderr: &out,
	})
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("control run: %v, exit %d", err, res.ExitCode)
	}
	if !strings.Contains(out.String(), line) {
		t.Errorf("control: output %q lost the command's own line", out.String())
	}
	if b, _ := os.ReadFile(ran); string(b) != "once\n" {
		t.Errorf("control: the command ran %q, want once", b)
	}
}
