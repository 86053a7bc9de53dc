//go:build linux

package integration

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sockConnect tries to connect to each path argument and prints one line
// per path: "CONNECTED path" or "refused path: reason".
const sockConnect = `use Socket;
for my $p (@ARGV) {
  socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
  if (connect($s, pack_sockaddr_un($p))) { print "CONNECTED $p\n" } else { print "refused $p: $!\n" }
  close $s;
}`

// listenUnix starts a real listener at path (mode 0777, so any identity
// could connect were it not masked) that accepts and closes connections;
// it is closed and its socket removed when the test ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(path))
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen %s: %v", path, err)
	}
	t.Cleanup(func() { l.Close(); os.Remove(path) })
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// Control: the listener answers from the host.
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		t.Fatalf("control: host cannot connect to %s: %v", path, err)
	}
	c.Close()
}

// TestHostSocketsUnreachable (issue 13 item 5): host services listening on
// pathname Unix sockets (one under /run, one in a directory named like a
// service's, one under the fixture's home, one a host process made in the
// worktree) answer no sandbox, in any mode, with the network off, as root
// and as the user. The network namespace does not cover pathname sockets:
// only masks do.
func TestHostSocketsUnreachable(t *testing.T) {
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	id := hex.EncodeToString(tag[:])
	forEachIdentity(t, func(t *testing.T, who runAs) {
		e := newEnv(t, who)
		socks := map[string]string{
			"home":     filepath.Join(e.home, ".cache", "app", "app.sock"),
			"worktree": filepath.Join(e.work, "dev.sock"),
		}
		if os.Geteuid() == 0 {
			socks["run"] = "/run/evener-it-" + id + ".sock"
			// A service's usual directory: /run/postgresql (made for the
			// test, and removed after it, when the host has none).
			pg := "/run/postgresql"
			if _, err := os.Stat(pg); os.IsNotExist(err) {
				mustMkdir(t, pg)
				t.Cleanup(func() { os.Remove(pg) })
			}
			socks["service-dir"] = filepath.Join(pg, ".s.PGSQL.5"+id[:4])
		} else {
			t.Log("not root: the /run listeners are skipped")
		}
		var paths []string
		for _, p := range socks {
			paths = append(paths, p)
		}
		e.chown(t) // before the listeners: chown would follow nothing, but keep them root's
		for _, p := range paths {
			listenUnix(t, p)
		}
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				args := append([]string{"exec", "--sandbox", mode, "--sandbox-net", "off", "--", "/usr/bin/perl", "-e", sockConnect}, paths...)
				r := e.run(t, args...)
				if r.code != 0 || strings.Count(r.stdout, "\n") != len(paths) {
					t.Fatalf("probe failed:\n%s", r)
				}
				for name, p := range socks {
					if strings.Contains(r.stdout, "CONNECTED "+p+"\n") {
						t.Errorf("%s socket answers from the sandbox: %s", name, p)
					}
				}
			})
		}
	})
}
