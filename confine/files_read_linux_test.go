//go:build linux

package confine

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type fxReadCase struct {
	Name    string
	Path    func(f *fileFixture) string
	Content string    // expected content where the read succeeds
	Want    [4]string // per mode: off, read-only, workspace-write, restricted
}

func fxReadCases() []fxReadCase {
	pid := strconv.Itoa(os.Getpid())
	D, O, X := RuleDenylist, RuleOutside, wantOK
	return []fxReadCase{
		{"worktree file", fxPath("file.txt"), "hello", [4]string{X, X, X, X}},
		{"worktree file absolute", func(f *fileFixture) string { return filepath.Join(f.wt, "file.txt") }, "hello", [4]string{X, X, X, X}},
		{"dot-dot back inside", fxPath("../proj/file.txt"), "hello", [4]string{X, X, X, X}},
		{"symlink staying inside", fxPath("to-sub"), "a", [4]string{X, X, X, X}},
		{"sibling dir", fxPath("../sibling/f"), "sibling", [4]string{X, X, X, O}},
		{"sibling absolute", func(f *fileFixture) string { return filepath.Join(f.sib, "f") }, "sibling", [4]string{X, X, X, O}},
		{"prefix sibling proj-evil", fxPath("../proj-evil/f"), "evil", [4]string{X, X, X, O}},
		{"prefix sibling via sub", fxPath("sub/../../proj-evil/f"), "evil", [4]string{X, X, X, O}},
		{"symlink to sibling", fxPath("to-sib"), "sibling", [4]string{X, X, X, O}},
		{"add-dir file", func(f *fileFixture) string { return filepath.Join(f.add, "f") }, "add", [4]string{X, X, X, O}},
		{"scratch file", func(f *fileFixture) string { return filepath.Join(f.scratch, "s") }, "scratch", [4]string{X, X, X, X}},
		{"denylisted id_rsa", func(f *fileFixture) string { return filepath.Join(f.home, ".ssh", "id_rsa") }, "SECRET-KEY", [4]string{X, D, D, D}},
		{"denylisted id_rsa relative", fxPath("../../home/.ssh/id_rsa"), "SECRET-KEY", [4]string{X, D, D, D}},
		{"denylisted netrc", func(f *fileFixture) string { return filepath.Join(f.home, ".netrc") }, "machine h password SECRET-NETRC", [4]string{X, D, D, D}},
		{"home non-secret", func(f *fileFixture) string { return filepath.Join(f.home, "notes.txt") }, "public notes", [4]string{X, X, X, O}},
		{"symlink to id_rsa", fxPath("to-secret"), "SECRET-KEY", [4]string{X, D, D, O}},
		{"relative symlink to id_rsa", fxPath("to-secret-fxPath"), "SECRET-KEY", [4]string{X, D, D, O}},
		{"symlink to id_rsa after dot-dot", fxPath("sub/../to-secret"), "SECRET-KEY", [4]string{X, D, D, O}},
		{"hard link to id_rsa", fxPath("hl-secret"), "SECRET-KEY", [4]string{X, D, D, D}},
		{"git config via a/..", fxPath("a/../.git/config"), "[core]\n", [4]string{X, X, X, X}},
		{"git config double slash", fxPath(".git//config"), "[core]\n", [4]string{X, X, X, X}},
		{"fifo", fxPath("fifo"), "", [4]string{RuleNotRegular, RuleNotRegular, RuleNotRegular, RuleNotRegular}},
		{"char device", fxPath("/dev/null"), "", [4]string{RuleNotRegular, RuleNotRegular, RuleNotRegular, O}},
		{"proc self environ", fxPath("/proc/self/environ"), "", [4]string{X, D, D, D}},
		{"proc pid environ", fxPath("/proc/" + pid + "/environ"), "", [4]string{X, D, D, D}},
		{"symlink to proc environ", fxPath("to-proc"), "", [4]string{X, D, D, O}},
		{"dev fd 3", fxPath("/dev/fd/3"), "", [4]string{wantErr, D, D, D}},
		{"dev stdin magic link", fxPath("/dev/stdin"), "", [4]string{wantErr, wantErr, wantErr, O}},
		{"etc shadow", fxPath("/etc/shadow"), "", [4]string{wantAny, D, D, D}},
		{"sys", fxPath("/sys/kernel/mm/transparent_hugepage/enabled"), "", [4]string{wantAny, D, D, D}},
		{"directory", fxPath("sub"), "", [4]string{wantErr, wantErr, wantErr, wantErr}},
		{"missing", fxPath("missing"), "", [4]string{wantNotExist, wantNotExist, wantNotExist, wantNotExist}},
		{"symlink loop", fxPath("loopA"), "", [4]string{wantErr, wantErr, wantErr, wantErr}},
		{"empty", fxPath(""), "", [4]string{RuleInvalidPath, RuleInvalidPath, RuleInvalidPath, RuleInvalidPath}},
		{"tilde", fxPath("~/.ssh/id_rsa"), "", [4]string{RuleInvalidPath, RuleInvalidPath, RuleInvalidPath, RuleInvalidPath}},
		{"nul", fxPath("file.txt\x00x"), "", [4]string{RuleInvalidPath, RuleInvalidPath, RuleInvalidPath, RuleInvalidPath}},
		{"invalid utf8", fxPath("\xff\xfe"), "", [4]string{RuleInvalidPath, RuleInvalidPath, RuleInvalidPath, RuleInvalidPath}},
	}
}

func TestFileOpenReadByMode(t *testing.T) {
	f := newFileFixture(t)
	for i, mode := range modeCols {
		fa := f.access(t, mode)
		for _, c := range fxReadCases() {
			what := fmt.Sprintf("%s/%s", mode, c.Name)
			want := c.Want[i]
			type res struct {
				data []byte
				err  error
			}
			done := make(chan res, 1)
			go func() {
				file, _, err := fa.OpenRead(c.Path(f))
				if err != nil {
					done <- res{err: err}
					return
				}
				defer file.Close()
				b, err := io.ReadAll(io.LimitReader(file, 1<<20))
				done <- res{b, err}
			}()
			var r res
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: OpenRead hung", what)
			}
			fxCheck(t, what, r.err, want)
			if want == wantOK && r.err == nil && c.Content != "" && string(r.data) != c.Content {
				t.Errorf("%s: read %q, want %q", what, r.data, c.Content)
			}
			if want != wantOK && r.err == nil && len(r.data) > 0 && strings.Contains(string(r.data), "SECRET") {
				t.Errorf("%s: a refused read returned the secret", what)
			}
		}
	}
}

func TestFileReadFileLimit(t *testing.T) {
	f := newFileFixture(t)
	fxWrite(t, filepath.Join(f.wt, "big"), strings.Repeat("x", 2048))
	fa, err := NewFileAccessWith(f.policy(t, ModeWorkspaceWrite), f.scratch, FileAccessOptions{MaxReadBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	if fa.MaxReadBytes() != 1024 {
		t.Fatalf("MaxReadBytes = %d", fa.MaxReadBytes())
	}
	_, _, err = fa.ReadFile("big")
	fxCheck(t, "big", err, RuleTooLarge)
	if b, _, err := fa.ReadFile("file.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	// A huge sparse file is refused by its size, without reading it.
	sp, err := os.Create(filepath.Join(f.wt, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	start := time.Now()
	_, _, err = fa.ReadFile("sparse")
	fxCheck(t, "sparse", err, RuleTooLarge)
	if time.Since(start) > time.Second {
		t.Fatal("sparse refusal was slow")
	}
	fa2 := f.access(t, ModeOff)
	if fa2.MaxReadBytes() != defaultMaxReadBytes {
		t.Fatalf("default MaxReadBytes = %d", fa2.MaxReadBytes())
	}
}

func TestFileStatLstat(t *testing.T) {
	f := newFileFixture(t)
	secret := filepath.Join(f.home, ".ssh", "id_rsa")
	for i, mode := range modeCols {
		fa := f.access(t, mode)
		// Lstat of a worktree symlink describes the link itself.
		info, err := fa.Lstat("to-secret")
		if err != nil || !info.IsSymlink || info.Target != secret || info.Display != "to-secret" {
			t.Errorf("%s: Lstat(to-secret) = %+v, %v", mode, info, err)
		}
		_, err = fa.Stat("to-secret")
		fxCheck(t, string(mode)+" Stat(to-secret)", err, [4]string{wantOK, RuleDenylist, RuleDenylist, RuleOutside}[i])
		_, err = fa.Stat(filepath.Join(f.home, ".ssh"))
		fxCheck(t, string(mode)+" Stat(~/.ssh)", err, [4]string{wantOK, RuleDenylist, RuleDenylist, RuleDenylist}[i])
		_, err = fa.Stat("../sibling")
		fxCheck(t, string(mode)+" Stat(../sibling)", err, [4]string{wantOK, wantOK, wantOK, RuleOutside}[i])
		// A FIFO can be described; only opening it is refused.
		if info, err := fa.Stat("fifo"); err != nil || info.Mode&fs.ModeNamedPipe == 0 {
			t.Errorf("%s: Stat(fifo) = %+v, %v", mode, info, err)
		}
		if info, err := fa.Stat("sub"); err != nil || !info.IsDir || info.Display != "sub" {
			t.Errorf("%s: Stat(sub) = %+v, %v", mode, info, err)
		}
		if info, err := fa.Stat("hl"); err != nil || info.Nlink != 2 || info.Size != int64(len("hardlinked-original")) {
			t.Errorf("%s: Stat(hl) = %+v, %v", mode, info, err)
		}
	}
}
