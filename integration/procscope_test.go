//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcsWithSeesOnlyOwn: the tests' process counters (procsWith,
// thrCountArgv) leave out what runs under an evener-mcp server this test
// binary did not start, and still see a process of ours that left its
// parent (reparented away: what a leak test must catch).
func TestProcsWithSeesOnlyOwn(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "evener-mcp-server") // comm "evener-mcp-serv"
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := "sleep 30." + strconv.Itoa(os.Getpid())
	// Someone else's server: detached (double fork), so the test binary is
	// not its ancestor; a child of it runs the marker.
	script := filepath.Join(dir, "run")
	if err := os.WriteFile(script, []byte(marker+" & wait\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	foreignCmd := exec.Command("/bin/sh", "-c", fake+" "+script+" >/dev/null 2>&1 &")
	// Ours, detached the same way but under no server.
	orphanCmd := exec.Command("/bin/sh", "-c", marker+" >/dev/null 2>&1 &")
	for _, c := range []*exec.Cmd{foreignCmd, orphanCmd} {
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range allWith(marker) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	var all []int
	if !waitFor(5*time.Second, func() bool { all = allWith(marker); return len(all) >= 2 }) {
		t.Fatalf("the two sleepers did not start: %v", all)
	}
	got := procsWith(marker)
	if len(got) != 1 {
		t.Fatalf("procsWith saw %v of %v: want only the orphan (not the one under another server)", got, all)
	}
	table := procTable()
	for _, p := range all {
		if p != got[0] && !foreign(table, p) {
			t.Errorf("the sleeper under the other server (%d) is not foreign", p)
		}
	}
	if slices.Contains(got, os.Getpid()) {
		t.Errorf("procsWith counted the test itself")
	}
	if n := thrCountArgv("sleep", strings.TrimPrefix(marker, "sleep ")); n != 1 {
		t.Errorf("thrCountArgv counted %d, want 1", n)
	}
}

// allWith is every process whose command line holds marker, unscoped.
func allWith(marker string) []int {
	var out []int
	for p := range procTable() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err == nil && p != os.Getpid() && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) &&
			!strings.Contains(string(b), "-c") {
			out = append(out, p)
		}
	}
	return out
}
