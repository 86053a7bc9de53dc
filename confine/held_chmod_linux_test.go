//go:build linux

package confine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHeldChmodNoFollow: Chmod changes a file in the held directory and
// never what a symbolic link there points at (fchmodat by name follows
// one swapped in between a create and its chmod).
func TestHeldChmodNoFollow(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "victim")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	hd, err := OpenHeld(dir, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	if err := hd.Chmod("file", 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "file")); st.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", st.Mode().Perm())
	}
	if err := hd.Chmod("link", 0o666); err == nil {
		t.Error("Chmod through a symbolic link succeeded")
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o600 {
		t.Errorf("the link's target became %v", st.Mode().Perm())
	}
}
