//go:build linux

package confine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSweepStale: empty cgroups named after dead servers go; a live
// server's, a non-empty one's and foreign names stay. Run on a plain
// directory (rmdir of an empty directory behaves the same).
func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	dead := "999999999-1" // beyond pid_max
	mk := func(name string, file bool) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if file {
			os.WriteFile(filepath.Join(dir, name, "x"), nil, 0o644)
		}
	}
	mk(dead, false)
	mk("999999998-2", true) // dead but not empty
	mk("1-4", false)        // pid 1 is alive
	mk("other", false)
	sweepStale(dir)
	for name, want := range map[string]bool{dead: false, "999999998-2": true, "1-4": true, "other": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: present=%v, want %v", name, err == nil, want)
		}
	}
}
