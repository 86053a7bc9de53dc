//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var fileTestHost = HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", UserNS: true, Seccomp: true}

// fileFixture is a small host: a fake HOME with secrets, a worktree with
// every awkward kind of entry, its siblings, an add-dir, a scratch and an
// outside directory the worktree links into.
type fileFixture struct {
	root, home, wt, sib, evil, add, scratch, outside string
}

func fxWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fxSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func fxRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newFileFixture(t *testing.T) *fileFixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fileFixture{
		root:    root,
		home:    filepath.Join(root, "home"),
		wt:      filepath.Join(root, "x", "proj"),
		sib:     filepath.Join(root, "x", "sibling"),
		evil:    filepath.Join(root, "x", "proj-evil"),
		add:     filepath.Join(root, "add"),
		scratch: filepath.Join(root, "scratch"),
		outside: filepath.Join(root, "outside"),
	}
	fxWrite(t, filepath.Join(f.home, ".ssh", "id_rsa"), "SECRET-KEY")
	fxWrite(t, filepath.Join(f.home, ".netrc"), "machine h password SECRET-NETRC")
	fxWrite(t, filepath.Join(f.home, "notes.txt"), "public notes")
	fxWrite(t, filepath.Join(f.wt, "file.txt"), "hello")
	fxWrite(t, filepath.Join(f.wt, "sub", "a.txt"), "a")
	fxWrite(t, filepath.Join(f.wt, ".git", "config"), "[core]\n")
	fxWrite(t, filepath.Join(f.sib, "f"), "sibling")
	fxWrite(t, filepath.Join(f.evil, "f"), "evil")
	fxWrite(t, filepath.Join(f.add, "f"), "add")
	fxWrite(t, filepath.Join(f.scratch, "s"), "scratch")
	fxWrite(t, filepath.Join(f.outside, "target"), "outside-original")
	fxWrite(t, filepath.Join(f.outside, "hl-target"), "hardlinked-original")
	fxSymlink(t, filepath.Join(f.home, ".ssh", "id_rsa"), filepath.Join(f.wt, "to-secret"))
	fxSymlink(t, "../../home/.ssh/id_rsa", filepath.Join(f.wt, "to-secret-fxPath"))
	fxSymlink(t, filepath.Join(f.outside, "target"), filepath.Join(f.wt, "to-outside"))
	fxSymlink(t, filepath.Join(f.outside, "nonexistent"), filepath.Join(f.wt, "dangling"))
	fxSymlink(t, f.outside, filepath.Join(f.wt, "linkdir"))
	fxSymlink(t, filepath.Join(f.sib, "f"), filepath.Join(f.wt, "to-sib"))
	fxSymlink(t, "sub/a.txt", filepath.Join(f.wt, "to-sub"))
	fxSymlink(t, "/proc/self/environ", filepath.Join(f.wt, "to-proc"))
	fxSymlink(t, "loopB", filepath.Join(f.wt, "loopA"))
	fxSymlink(t, "loopA", filepath.Join(f.wt, "loopB"))
	if err := syscall.Mkfifo(filepath.Join(f.wt, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(f.outside, "hl-target"), filepath.Join(f.wt, "hl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(f.home, ".ssh", "id_rsa"), filepath.Join(f.wt, "hl-secret")); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fileFixture) policy(t *testing.T, mode Mode) *Policy {
	t.Helper()
	p, err := Resolve(Spec{
		Mode: mode, ModeExplicit: true, Workdir: f.wt, AddDirs: []string{f.add},
		Env: []string{"HOME=" + f.home, "PATH=/usr/bin:/bin"},
	}, fileTestHost)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", mode, err)
	}
	return p
}

func (f *fileFixture) access(t *testing.T, mode Mode) *FileAccess {
	t.Helper()
	fa, err := NewFileAccess(f.policy(t, mode), f.scratch)
	if err != nil {
		t.Fatalf("NewFileAccess(%s): %v", mode, err)
	}
	t.Cleanup(func() { fa.Close() })
	return fa
}

// fxLeftovers lists temp files of the write layer anywhere under root.
func fxLeftovers(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".evener-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// Outcome sentinels for the WantRule columns; any other value is a rule.
const (
	wantOK       = "ok"
	wantErr      = "err"      // a plain error, not a Denial
	wantNotExist = "notexist" // fs.ErrNotExist
	wantAny      = "any"      // host-dependent, not checked
)

func fxCheck(t *testing.T, what string, err error, want string) {
	t.Helper()
	var d *Denial
	isDenial := errors.As(err, &d)
	switch want {
	case wantAny:
	case wantOK:
		if err != nil {
			t.Errorf("%s: want success, got %v", what, err)
		}
	case wantErr:
		if err == nil || isDenial {
			t.Errorf("%s: want a plain error, got %v", what, err)
		}
	case wantNotExist:
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: want not-exist, got %v", what, err)
		}
	default:
		if !isDenial || d.Rule != want {
			t.Errorf("%s: want denial %q, got %v", what, want, err)
		}
	}
}

var modeCols = [4]Mode{ModeOff, ModeReadOnly, ModeWorkspaceWrite, ModeRestricted}

type fxReadCase struct {
	Name    string
	Path    func(f *fileFixture) string
	Content string    // expected content where the read succeeds
	Want    [4]string // per mode: off, read-only, workspace-write, restricted
}

func fxPath(p string) func(*fileFixture) string { return func(*fileFixture) string { return p } }

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
	if fa2.MaxReadBytes() != DefaultMaxReadBytes {
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

func TestFileResolve(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeWorkspaceWrite)
	for _, c := range []struct {
		in, abs, display string
		wantRule         string
	}{
		{"a.txt", filepath.Join(f.wt, "a.txt"), "a.txt", ""},
		{"./sub/../a.txt", filepath.Join(f.wt, "a.txt"), "a.txt", ""},
		{".", f.wt, ".", ""},
		{f.wt + "/x//y/", filepath.Join(f.wt, "x/y"), "x/y", ""},
		{"../sibling/f", filepath.Join(f.sib, "f"), "../sibling/f", ""},
		{"../proj-evil", f.evil, "../proj-evil", ""},
		{"/etc/../etc/passwd", "/etc/passwd", "/etc/passwd", ""},
		{"a/~b", filepath.Join(f.wt, "a/~b"), "a/~b", ""},
		{"", "", "", RuleInvalidPath},
		{"~", "", "", RuleInvalidPath},
		{"~root/x", "", "", RuleInvalidPath},
		{"a\x00", "", "", RuleInvalidPath},
		{"\xc3\x28", "", "", RuleInvalidPath},
	} {
		abs, display, err := fa.Resolve(c.in)
		if c.wantRule != "" {
			fxCheck(t, fmt.Sprintf("Resolve(%q)", c.in), err, c.wantRule)
			continue
		}
		if err != nil || abs != c.abs || display != c.display {
			t.Errorf("Resolve(%q) = %q, %q, %v; want %q, %q", c.in, abs, display, err, c.abs, c.display)
		}
	}
}

func TestFileDenialMessage(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeReadOnly)
	secret := filepath.Join(f.home, ".ssh", "id_rsa")
	_, err := fa.WriteFile(secret, []byte("x"), WriteOptions{})
	var d *Denial
	if !errors.As(err, &d) {
		t.Fatalf("want a denial, got %v", err)
	}
	if got, want := d.Error(), `write refused in read-only mode: "id_rsa" (rule: denylist)`; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	_, _, err = fa.OpenRead("to-secret")
	if !errors.As(err, &d) || strings.Contains(err.Error(), f.home) || d.Path != "to-secret" || d.Op != "read" {
		t.Fatalf("denial %+v: %v", d, err)
	}
	_, err = fa.WriteFile("file.txt", []byte("x"), WriteOptions{})
	if !errors.As(err, &d) || d.Rule != RuleReadOnly || d.Path != "file.txt" || d.Mode != ModeReadOnly {
		t.Fatalf("denial %+v", d)
	}
}

func TestFileGitComponent(t *testing.T) {
	for c, want := range map[string]bool{
		".git": true, ".GIT": true, ".Git": true, ".git.": true, ".git ": true, ".g\u200bit": true,
		"GIT~1": true, "git~12": true, ".gitignore": false, "git": false, ".github": false, "x.git": false,
		"git~": false, "git~a": false, "": false,
	} {
		if got := isGitComponent(c); got != want {
			t.Errorf("isGitComponent(%q) = %v", c, got)
		}
	}
}

func TestFileAccessClosed(t *testing.T) {
	f := newFileFixture(t)
	fa := f.access(t, ModeWorkspaceWrite)
	fa.Close()
	if _, _, err := fa.OpenRead("file.txt"); err == nil {
		t.Fatal("read after close")
	}
	if _, err := fa.WriteFile("x", nil, WriteOptions{}); err == nil {
		t.Fatal("write after close")
	}
}

// fxSwapper exchanges a real directory and a symlink to the secret directory
// under the same name, as fast as it can, until stop or 5 s.
func fxSwapper(t *testing.T, a, b string, stop <-chan struct{}) (done <-chan int) {
	t.Helper()
	ch := make(chan int, 1)
	go func() {
		n := 0
		deadline := time.Now().Add(5 * time.Second)
		for ; time.Now().Before(deadline); n++ {
			select {
			case <-stop:
				ch <- n
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				break
			}
		}
		ch <- n
	}()
	return ch
}

func TestFileRaceSwappedDirectory(t *testing.T) {
	f := newFileFixture(t)
	secretDir := filepath.Join(f.home, ".ssh")
	fxWrite(t, filepath.Join(secretDir, "secret-named-file"), "TOPSECRET")
	d := filepath.Join(f.wt, "d")
	alt := filepath.Join(f.wt, "d.alt")
	fxWrite(t, filepath.Join(d, "secret-named-file"), "benign")
	fxSymlink(t, secretDir, alt)

	// Control: without the file layer the race is won, so this test can
	// fail. Plain reads and writes through the same path reach the secret
	// directory while the swapper runs.
	stop := make(chan struct{})
	swaps := fxSwapper(t, d, alt, stop)
	var leaked, wroteThrough bool
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline) && !(leaked && wroteThrough); i++ {
		if b, err := os.ReadFile(filepath.Join(d, "secret-named-file")); err == nil && string(b) == "TOPSECRET" {
			leaked = true
		}
		if !wroteThrough {
			_ = os.WriteFile(filepath.Join(d, "naive"), []byte("x"), 0o644)
			if _, err := os.Lstat(filepath.Join(secretDir, "naive")); err == nil {
				wroteThrough = true
			}
		}
	}
	close(stop)
	n := <-swaps
	if !leaked || !wroteThrough {
		t.Fatalf("control race never won (read %v, write %v, %d swaps): the harness cannot detect a leak", leaked, wroteThrough, n)
	}
	_ = os.Remove(filepath.Join(secretDir, "naive"))
	t.Logf("control: plain os.ReadFile/os.WriteFile leaked through the swap (%d swaps)", n)

	for _, mode := range []Mode{ModeRestricted, ModeWorkspaceWrite} {
		fa := f.access(t, mode)
		stop := make(chan struct{})
		swaps := fxSwapper(t, d, alt, stop)
		var reads, readOK, writes, writeOK, dirOK, stageOK atomic.Int64
		top, err := fa.OpenDir(".")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		deadline := time.Now().Add(4 * time.Second)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 5000 && time.Now().Before(deadline); i++ {
					reads.Add(1)
					file, _, err := fa.OpenRead("d/secret-named-file")
					if err == nil {
						b, _ := io.ReadAll(file)
						file.Close()
						if strings.Contains(string(b), "TOPSECRET") {
							t.Errorf("%s: OpenRead returned the secret", mode)
							return
						}
						readOK.Add(1)
					}
					writes.Add(1)
					if _, err := fa.WriteFile("d/x", []byte("payload"), WriteOptions{}); err == nil {
						writeOK.Add(1)
					}
					// The walking API: a child directory opened by name, then
					// a file in it.
					if c, err := top.OpenDir("d"); err == nil {
						if file, err := c.OpenFile("secret-named-file"); err == nil {
							b, _ := io.ReadAll(file)
							file.Close()
							if strings.Contains(string(b), "TOPSECRET") {
								t.Errorf("%s: Dir.OpenFile returned the secret", mode)
							}
							dirOK.Add(1)
						}
						c.Close()
					}
					// A staged change (apply_patch) committed mid-swap.
					st := fa.NewStage()
					if st.Write("d/y", []byte("staged"), WriteOptions{CreateParents: true}) == nil && st.Commit() == nil {
						stageOK.Add(1)
					}
					st.Abort()
				}
			}()
		}
		wg.Wait()
		close(stop)
		n := <-swaps
		top.Close()
		t.Logf("%s: %d swaps; %d rounds: reads %d ok, writes %d ok, dir walks %d ok, staged commits %d ok",
			mode, n, reads.Load(), readOK.Load(), writeOK.Load(), dirOK.Load(), stageOK.Load())
		if readOK.Load() == 0 || writeOK.Load() == 0 || dirOK.Load() == 0 {
			t.Errorf("%s: no operation ever succeeded; the race was not exercised", mode)
		}
		ents, err := os.ReadDir(secretDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "id_rsa" && e.Name() != "secret-named-file" {
				t.Errorf("%s: a write landed in the secret directory: %s", mode, e.Name())
			}
		}
		if got := fxRead(t, filepath.Join(secretDir, "secret-named-file")); got != "TOPSECRET" {
			t.Errorf("secret changed: %q", got)
		}
	}
	if l := fxLeftovers(t, f.root); len(l) > 0 {
		t.Errorf("fxLeftovers %v", l)
	}
}
