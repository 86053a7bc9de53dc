//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stageFixture writes the files a staged change works on.
func fxStageFiles(t *testing.T, f *fileFixture) {
	fxWrite(t, filepath.Join(f.wt, "s", "a"), "A0")
	fxWrite(t, filepath.Join(f.wt, "s", "b"), "B0")
	fxWrite(t, filepath.Join(f.wt, "s", "c"), "C0")
	fxWrite(t, filepath.Join(f.wt, "s", "d"), "D0")
	if err := os.Chmod(filepath.Join(f.wt, "s", "d"), 0o751); err != nil {
		t.Fatal(err)
	}
}

func fxStageState(t *testing.T, f *fileFixture) string {
	t.Helper()
	var b strings.Builder
	for _, n := range []string{"a", "b", "c", "d", "new/n"} {
		p := filepath.Join(f.wt, "s", n)
		fi, err := os.Lstat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s:absent ", n)
			continue
		}
		fmt.Fprintf(&b, "%s:%s:%o ", n, fxRead(t, p), fi.Mode().Perm())
	}
	if _, err := os.Lstat(filepath.Join(f.wt, "s", "new")); err == nil {
		b.WriteString("newdir")
	}
	return b.String()
}

func fxStageAll(t *testing.T, fa *FileAccess) *Stage {
	t.Helper()
	st := fa.NewStage()
	for _, step := range []func() error{
		func() error { return st.Write("s/a", []byte("A1"), WriteOptions{}) },
		func() error { return st.Write("s/new/n", []byte("N1"), WriteOptions{CreateParents: true}) },
		func() error { return st.Delete("s/d") },
		func() error { return st.Write("s/b", []byte("B1"), WriteOptions{}) },
		func() error { return st.Write("s/c", []byte("C1"), WriteOptions{}) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestStageCommit(t *testing.T) {
	f := newFileFixture(t)
	fxStageFiles(t, f)
	fa := f.access(t, ModeWorkspaceWrite)
	before := fxStageState(t, f)
	st := fxStageAll(t, fa)
	if got := fxStageState(t, f); got != before {
		t.Fatalf("staging made changes visible:\n%s\n%s", before, got)
	}
	if err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	want := "a:A1:644 b:B1:644 c:C1:644 d:absent new/n:N1:644 newdir"
	if got := fxStageState(t, f); got != want {
		t.Fatalf("after commit:\n got %s\nwant %s", got, want)
	}
	if l := fxLeftovers(t, f.root); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}
	if err := st.Commit(); err == nil {
		t.Fatal("second commit succeeded")
	}
}

func TestStageAbort(t *testing.T) {
	f := newFileFixture(t)
	fxStageFiles(t, f)
	fa := f.access(t, ModeWorkspaceWrite)
	before := fxStageState(t, f)
	st := fxStageAll(t, fa)
	st.Abort()
	if got := fxStageState(t, f); got != before {
		t.Fatalf("abort:\n got %s\nwant %s", got, before)
	}
	if l := fxLeftovers(t, f.root); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}
}

// TestStageCommitRollback injects a failure into the last rename of a
// commit (the staged temp file is removed from under it, which fails as
// root too): every change already made is undone.
func TestStageCommitRollback(t *testing.T) {
	f := newFileFixture(t)
	fxStageFiles(t, f)
	fa := f.access(t, ModeWorkspaceWrite)
	before := fxStageState(t, f)
	st := fxStageAll(t, fa)
	st.beforeOp = func(i int) {
		if i != 4 {
			return
		}
		for _, l := range fxLeftovers(t, filepath.Join(f.wt, "s")) {
			if strings.HasPrefix(filepath.Base(l), ".c.evener-") {
				if err := os.Remove(l); err != nil {
					t.Error(err)
				}
			}
		}
	}
	err := st.Commit()
	if err == nil {
		t.Fatal("commit succeeded despite the injected failure")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unexpected error %v", err)
	}
	if got := fxStageState(t, f); got != before {
		t.Fatalf("after failed commit:\n got %s\nwant %s", got, before)
	}
	if l := fxLeftovers(t, f.root); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}
}

// TestStageCommitPreflight: a fault visible before any rename (a target
// replaced by a directory, a parent moved) refuses the whole commit.
func TestStageCommitPreflight(t *testing.T) {
	f := newFileFixture(t)
	fxStageFiles(t, f)
	fa := f.access(t, ModeWorkspaceWrite)
	st := fxStageAll(t, fa)
	before := fxStageState(t, f)
	c := filepath.Join(f.wt, "s", "c")
	if err := os.Remove(c); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(c, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(); err == nil {
		t.Fatal("commit over a directory succeeded")
	}
	for _, n := range []string{"a", "b"} {
		if got := fxRead(t, filepath.Join(f.wt, "s", n)); !strings.HasSuffix(got, "0") {
			t.Fatalf("%s changed: %q (state was %s)", n, got, before)
		}
	}
	if l := fxLeftovers(t, f.root); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}

	// The staged parent directory moved away and was replaced.
	g := newFileFixture(t)
	fxStageFiles(t, g)
	fa = g.access(t, ModeWorkspaceWrite)
	st = fa.NewStage()
	if err := st.Write("s/a", []byte("A1"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(g.wt, "s"), filepath.Join(g.wt, "s-moved")); err != nil {
		t.Fatal(err)
	}
	fxWrite(t, filepath.Join(g.wt, "s", "a"), "fresh")
	if err := st.Commit(); err == nil {
		t.Fatal("commit into a moved directory succeeded")
	}
	if fxRead(t, filepath.Join(g.wt, "s-moved", "a")) != "A0" || fxRead(t, filepath.Join(g.wt, "s", "a")) != "fresh" {
		t.Fatal("files changed")
	}
	if l := fxLeftovers(t, g.root); len(l) > 0 {
		t.Fatalf("fxLeftovers %v", l)
	}
}

func TestStageRules(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeWorkspaceWrite)
	st := fa.NewStage()
	defer st.Abort()
	fxCheck(t, "stage git", st.Write(".git/hooks/pre-commit", []byte("x"), WriteOptions{CreateParents: true}), RuleGitMetadata)
	fxCheck(t, "stage symlink", st.Write("to-outside", []byte("x"), WriteOptions{}), RuleSymlink)
	fxCheck(t, "stage delete symlink", st.Delete("to-outside"), RuleSymlink)
	fxCheck(t, "stage outside", st.Write("../sibling/x", []byte("x"), WriteOptions{}), RuleOutside)
	fxCheck(t, "stage delete missing", st.Delete("nope"), wantNotExist)
	if err := st.Write("file.txt", []byte("x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fxCheck(t, "stage twice", st.Delete("file.txt"), wantErr)
}
