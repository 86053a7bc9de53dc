//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

func fxPath(p string) func(*fileFixture) string { return func(*fileFixture) string { return p } }

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
