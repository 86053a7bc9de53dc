//go:build linux

package confine

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestHostSocketsSkipOwnBridges: a socket in a session's egress bridge
// directory (they come and go with sessions; a mask planned for one made
// the spawn fail when it vanished) is not masked; any other host socket is.
func TestHostSocketsSkipOwnBridges(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bridge := filepath.Join(dir, "evener-egress-123")
	other := filepath.Join(dir, "service")
	for _, d := range []string{bridge, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for _, d := range []string{bridge, other} {
		p := filepath.Join(d, "s.sock")
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		paths = append(paths, p)
	}
	var l Layout
	inspectHostSockets(&l, func(string) bool { return true })
	if slices.Contains(l.HostSockets, paths[0]) {
		t.Errorf("a session's bridge socket is masked: %v", l.HostSockets)
	}
	if !slices.Contains(l.HostSockets, paths[1]) {
		t.Errorf("another host socket is not masked: %v", l.HostSockets)
	}
}
