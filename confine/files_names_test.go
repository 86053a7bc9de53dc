//go:build linux

package confine

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestDirNamesMatchesEntries: the d_type listing agrees with the stat
// listing on names and kinds, and omits denylisted children the same way.
func TestDirNamesMatchesEntries(t *testing.T) {
	f := newFileFixture(t)
	if err := syscall.Mkfifo(filepath.Join(f.wt, "a-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ModeWorkspaceWrite, ModeRestricted, ModeOff} {
		fa := f.access(t, mode)
		for _, p := range []string{f.wt, f.home} {
			if mode == ModeRestricted && p == f.home {
				continue
			}
			d, err := fa.OpenDir(p)
			if err != nil {
				t.Fatalf("%s %s: %v", mode, p, err)
			}
			full, _, err := d.Entries(0)
			if err != nil {
				t.Fatal(err)
			}
			fast, _, err := d.Names(0)
			if err != nil {
				t.Fatal(err)
			}
			d.Close()
			key := func(es []DirEntry) []string {
				var out []string
				for _, e := range es {
					out = append(out, e.Name+"/"+kindName(e.Kind))
				}
				return out
			}
			// Entries also drops hard links to secrets by identity; Names
			// leaves that to the open. Compare the rest.
			a := slices.DeleteFunc(key(full), func(s string) bool { return s == "hl-secret/file" })
			b := slices.DeleteFunc(key(fast), func(s string) bool { return s == "hl-secret/file" })
			if !slices.Equal(a, b) {
				t.Errorf("%s %s:\nEntries %v\nNames   %v", mode, p, a, b)
			}
			if mode != ModeOff && p == f.home && (slices.Contains(b, ".ssh/dir") || slices.Contains(b, ".netrc/file")) {
				t.Errorf("%s: Names lists a denylisted child: %v", mode, b)
			}
		}
	}
}

func kindName(k PathKind) string {
	return map[PathKind]string{PathFile: "file", PathDir: "dir", PathSymlink: "symlink", PathOther: "other"}[k]
}
