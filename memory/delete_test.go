//go:build linux

package memory

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"golang.org/x/sys/unix"
)

// deepPath is a file at the deepest path CleanPath accepts.
func deepPath(n int) string { return fmt.Sprintf("x%d/a/b/c/d/e/f/g.md", n) }

// entriesOnDisk lists everything below dir, directories included.
func entriesOnDisk(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// usable: view, write, search and delete all work in the scope.
func usable(t *testing.T, r *Root) {
	t.Helper()
	if _, err := r.List("", true); err != nil {
		t.Fatalf("view: %v", err)
	}
	if _, err := r.Write("probe.md", []byte("probe\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if ms, _, err := r.Search("probe", true); err != nil || len(ms) != 1 {
		t.Fatalf("search: %v %v", ms, err)
	}
	if err := r.Delete("probe.md"); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// TestDeepDeletesLeaveNothing: 120 write/delete pairs of the deepest path
// in the personal scope (about 70 wedged it: the directories stayed and
// counted against the walk's bound) leave the root empty, and the scope,
// seen from another project too, keeps working.
func TestDeepDeletesLeaveNothing(t *testing.T) {
	f := newFixture(t, confine.ModeWorkspaceWrite)
	r := root(t, f.open(t, f.wt, Limits{}), Personal)
	for i := range 120 {
		if _, err := r.Write(deepPath(i), []byte("note\n")); err != nil {
			t.Fatalf("pair %d: write: %v", i, err)
		}
		if err := r.Delete(deepPath(i)); err != nil {
			t.Fatalf("pair %d: delete: %v", i, err)
		}
	}
	if left := entriesOnDisk(t, r.Dir()); len(left) != 0 {
		t.Fatalf("%d entries left behind, first %q", len(left), left[0])
	}
	usable(t, r)
	usable(t, root(t, f.open(t, f.wt2, Limits{}), Personal))
}

// TestDirectoriesDoNotCount: a scope as an older build left it, 100
// chains of empty directories (700 of them, over the old 464-entry
// bound), still lists, writes and searches, and its file cap counts files
// only; each chain goes with one delete of its deepest directory.
func TestDirectoriesDoNotCount(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r := root(t, f.open(t, f.wt, Limits{}), Project)
	for i := range 100 {
		if err := os.MkdirAll(filepath.Join(r.Dir(), filepath.Dir(deepPath(i))), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	usable(t, r)
	if n, _, err := r.Usage(); err != nil || n != 0 {
		t.Fatalf("usage: %d files, %v", n, err)
	}
	for i := range 100 {
		if err := r.Delete(filepath.Dir(deepPath(i))); err != nil {
			t.Fatalf("delete the empty directory %s: %v", filepath.Dir(deepPath(i)), err)
		}
	}
	if left := entriesOnDisk(t, r.Dir()); len(left) != 0 {
		t.Fatalf("%d entries left behind, first %q", len(left), left[0])
	}

	// The file cap is still exact with directories about.
	r = root(t, f.open(t, f.wt2, Limits{FileBytes: 10, ScopeBytes: 1000, Files: 3}), Project)
	for i := range 3 {
		if _, err := r.Write(deepPath(i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Write(deepPath(3), []byte("x")); err == nil || !strings.Contains(err.Error(), "3 files, its cap") {
		t.Fatalf("a fourth file: %v", err)
	}
	if left := entriesOnDisk(t, r.Dir()); len(left) != 3*8 {
		t.Fatalf("a refused write left %d entries (want 24): %v", len(left), left)
	}

	// The walk is still bounded: directories planted by hand past
	// maxDepth*Files+64 (88 here) are refused, not walked, and a delete
	// (which walks nothing) repairs the scope.
	for i := range 70 {
		if err := os.Mkdir(filepath.Join(r.Dir(), fmt.Sprintf("empty%d", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.List("", false); err == nil || !strings.Contains(err.Error(), "more than 88 directories") {
		t.Fatalf("a walk past the directory bound: %v", err)
	}
	for i := range 70 {
		if err := r.Delete(fmt.Sprintf("empty%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if es, err := r.List("", false); err != nil || len(es) != 3 {
		t.Fatalf("after the repair: %v %v", es, err)
	}
}

// TestClosedRootTouchesNothing: a mutation after Close fails and uses no
// descriptor (its number may belong to another open by then).
func TestClosedRootTouchesNothing(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r := root(t, f.open(t, f.wt, Limits{}), Project)
	if _, err := r.Write("a/b.md", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete("a/b.md"); err == nil {
		t.Fatal("a delete after Close")
	}
	if _, err := r.Write("c.md", []byte("c")); err == nil {
		t.Fatal("a write after Close")
	}
	if got := entriesOnDisk(t, r.Dir()); strings.Join(got, " ") != "a a/b.md" {
		t.Fatalf("after Close: %v", got)
	}
}

// TestDeleteDirectory: memory_delete removes an empty directory (and the
// parents it empties), refuses one that holds a file, and never follows a
// symlink to a directory.
func TestDeleteDirectory(t *testing.T) {
	f := newFixture(t, confine.ModeWorkspaceWrite)
	r := root(t, f.open(t, f.wt, Limits{}), Project)
	if _, err := r.Write("keep/a/b.md", []byte("b\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.Dir(), "keep", "a", "empty", "deeper"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"keep", "keep/a"} {
		if err := r.Delete(p); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Errorf("delete %s (it holds a file): %v", p, err)
		}
	}
	if err := r.Delete("keep/a/empty/deeper"); err != nil {
		t.Fatal(err)
	}
	if got := entriesOnDisk(t, r.Dir()); strings.Join(got, " ") != "keep keep/a keep/a/b.md" {
		t.Fatalf("after deleting the empty directory: %v", got)
	}
	if err := r.Delete("keep/a/b.md"); err != nil {
		t.Fatal(err)
	}
	if got := entriesOnDisk(t, r.Dir()); len(got) != 0 {
		t.Fatalf("after deleting the last file: %v", got)
	}

	// A symlink to a directory outside: refused, the outside untouched.
	outside := filepath.Join(filepath.Dir(f.home), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(r.Dir(), "out")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"out", "out/empty"} {
		if err := r.Delete(p); err == nil {
			t.Errorf("delete %s through a symlink accepted", p)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "empty")); err != nil {
		t.Fatalf("the outside directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(r.Dir(), "out")); err != nil {
		t.Fatalf("the symlink: %v", err)
	}
	if err := r.Delete("missing/dir"); err == nil || !strings.Contains(err.Error(), "no such memory file") {
		t.Fatalf("delete a missing path: %v", err)
	}
}

// TestDeleteSwapRace: while deletes empty the parents of d/e/f.md, a
// racer swaps d for a symlink to an outside directory holding an empty e
// (and back), as fast as it can: the outside directory is never
// removed. A delete that named the parents by path would follow the
// symlink and remove it.
func TestDeleteSwapRace(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r := root(t, f.open(t, f.wt, Limits{}), Project)
	outside := filepath.Join(filepath.Dir(f.home), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "e"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, link := filepath.Join(r.Dir(), "d"), filepath.Join(r.Dir(), "link")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50_000_000 && !stop.Load(); i++ {
			// d and link trade places: d is the real directory or a
			// symlink to outside, never missing.
			if unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	deletes := 0
	for i := 0; i < 100_000 && deletes < 300 && time.Now().Before(deadline); i++ {
		if _, err := r.Write("d/e/f.md", []byte("x")); err != nil {
			continue
		}
		if r.Delete("d/e/f.md") == nil {
			deletes++
		}
		if _, err := os.Stat(filepath.Join(outside, "e")); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("after %d deletes and %d swaps the outside directory is gone: %v", deletes, swaps.Load(), err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d deletes against %d swaps", deletes, swaps.Load())
	if deletes < 10 || swaps.Load() < 50 { // a loaded machine gets few deletes in while d is real
		t.Fatalf("only %d deletes and %d swaps: the race was not exercised", deletes, swaps.Load())
	}
	if es, err := os.ReadDir(outside); err != nil || len(es) != 1 {
		t.Fatalf("the outside directory changed: %v %v", es, err)
	}
}

// TestLayoutNeverFollows: the layout under the state directory is made
// and read through held handles: a projects directory that is a symlink
// to another place, and a project record that is a symlink or a FIFO, are
// refused (without hanging), and nothing is made or written where they
// point.
func TestLayoutNeverFollows(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	outside := filepath.Join(filepath.Dir(f.home), "outside")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(f.state, "memory")
	if err := os.MkdirAll(mem, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(mem, "projects")); err != nil {
		t.Fatal(err)
	}
	s := f.open(t, f.wt, Limits{})
	if _, err := s.Root(Project); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("a symlinked projects directory: %v", err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("made through the symlink: %v", es)
	}
	root(t, s, Personal)
	if err := os.Remove(filepath.Join(mem, "projects")); err != nil {
		t.Fatal(err)
	}

	key := ProjectKey(f.wt)
	record := filepath.Join(mem, "projects", key+".path")
	target := filepath.Join(outside, "record")
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, record); err != nil {
		t.Fatal(err)
	}
	if _, err := f.open(t, f.wt, Limits{}).Root(Project); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a symlinked record: %v", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Fatal("the record was written through its symlink")
	}
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(record, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.open(t, f.wt, Limits{}).Root(Project); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO record: %v", err)
	}
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	root(t, f.open(t, f.wt, Limits{}), Project)
	if b, err := os.ReadFile(record); err != nil || strings.TrimSpace(string(b)) != f.wt {
		t.Fatalf("the record: %q %v", b, err)
	}
}
