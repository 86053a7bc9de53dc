package integration

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// landlockABI is this kernel's Landlock ABI, 0 without Landlock.
func landlockABI() int {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(r)
}

// loopbackPy listens on the sandbox's loopback and connects to itself, as
// an in-command test server (go test with httptest) does.
const loopbackPy = `import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept()
c.sendall(b"ok"); print(a.recv(2).decode())`

// TestLandlockLayer (docs/security.md, "Landlock, the second layer"): the
// startup line and probe say which Landlock ABI holds under bubblewrap,
// and every spawn runs under it: a write the mount plan alone lets
// through (a file in the sandbox's /dev) is refused, a rules variable in
// the server's environment neither reaches the command nor widens it,
// and what worked before still does: a loopback server inside the
// command (network on and off), restricted mode listing the worktree's
// ancestors, a missing command's exit code (1 with the network off, as
// bubblewrap's execvp gave; 127 from the relay with it on).
func TestLandlockLayer(t *testing.T) {
	abi := landlockABI()
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		// A caller's rules that would grant writes everywhere.
		e.extra = append(e.extra, "EVENER_LANDLOCK=v1;w="+hex.EncodeToString([]byte("/")))
		wantLine := fmt.Sprintf("; second layer: landlock ABI %d", abi)
		for _, mode := range []string{"workspace-write", "restricted", "read-only"} {
			r := e.run(t, "exec", "--sandbox", mode, "--sandbox-net", "off", "--", "/bin/sh", "-c",
				`touch /dev/evener-ll 2>/dev/null && echo created; env | grep -c EVENER_LANDLOCK; ls "$(dirname "$PWD")"`)
			if abi < 2 {
				// The startup line names only a layer that holds.
				if strings.Contains(startupLine(r), "second layer") {
					t.Errorf("%s: startup line %q claims a second layer", mode, startupLine(r))
				}
				continue
			}
			if !strings.Contains(startupLine(r), wantLine) {
				t.Errorf("%s: startup line %q lacks %q", mode, startupLine(r), wantLine)
			}
			if strings.Contains(r.stdout, "created") {
				t.Errorf("%s: a file in the sandbox's /dev was created under the Landlock layer:\n%s", mode, r)
			}
			if !strings.Contains(r.stdout, "0\n") {
				t.Errorf("%s: the rules variable reached the command:\n%s", mode, r)
			}
			if !strings.Contains(r.stdout, "work\n") {
				t.Errorf("%s: the worktree's parent could not be listed:\n%s", mode, r)
			}
		}
		for _, net := range []string{"on", "off"} {
			r := e.run(t, "exec", "--sandbox", "workspace-write", "--sandbox-net", net, "--", "/usr/bin/python3", "-c", loopbackPy)
			if r.code != 0 || r.stdout != "ok\n" {
				t.Errorf("network %s: a loopback server inside the command:\n%s", net, r)
			}
			want := map[string]int{"on": 127, "off": 1}[net]
			if r := e.run(t, "exec", "--sandbox", "workspace-write", "--sandbox-net", net, "--", "evener-no-such-command"); r.code != want {
				t.Errorf("network %s: a missing command exited %d, want %d:\n%s", net, r.code, want, r)
			}
		}
		r := e.run(t, "probe")
		want := fmt.Sprintf("second layer: landlock ABI %d\n", abi)
		if abi < 2 {
			want = "second layer: none ("
		}
		if !strings.Contains(r.stdout, want) {
			t.Errorf("probe lacks %q:\n%s", want, r.stdout)
		}
		if abi >= 6 && !strings.Contains(r.stdout, "scopes: abstract Unix sockets and signals") {
			t.Errorf("probe does not name the scopes:\n%s", r.stdout)
		}
	})
}
