//go:build linux

package memory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/internal/sandboxtest"
)

// fixture is a host: a sandboxtest host (a home with a secret), a state
// directory and two worktrees.
type fixture struct {
	home, state, wt, wt2, secret string
	base                         *confine.Policy
}

func newFixture(t testing.TB, mode confine.Mode) *fixture {
	t.Helper()
	h := sandboxtest.NewHost(t)
	f := &fixture{home: h.Home, wt: h.Work, wt2: filepath.Join(h.Root, "work2"), secret: h.Secret}
	f.state = filepath.Join(f.home, ".local", "state", "evener-mcp")
	if err := os.Mkdir(f.wt2, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := h.Spec(mode)
	spec.Home, spec.StateDir = f.home, f.state
	f.base = sandboxtest.Resolve(t, spec, sandboxtest.Usable)
	return f
}

func (f *fixture) open(t *testing.T, wt string, lim Limits) *Store {
	t.Helper()
	s, err := Open(f.state, wt, f.base, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func root(t *testing.T, s *Store, sc Scope) *Root {
	t.Helper()
	r, err := s.Root(sc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestScopesAndOperations(t *testing.T) {
	for _, mode := range []confine.Mode{confine.ModeOff, confine.ModeWorkspaceWrite} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t, mode)
			s1 := f.open(t, f.wt, Limits{})
			p := root(t, s1, Project)
			if created, err := p.Write("notes/build.md", []byte("# Build\nuse make -j4\n")); err != nil || !created {
				t.Fatalf("write: %v %v", created, err)
			}
			if _, err := root(t, s1, Personal).Write("prefs.md", []byte("tabs\n")); err != nil {
				t.Fatal(err)
			}
			// The next session of the same project sees it.
			s2 := f.open(t, f.wt, Limits{})
			p2 := root(t, s2, Project)
			b, err := p2.Read("notes/build.md")
			if err != nil || string(b) != "# Build\nuse make -j4\n" {
				t.Fatalf("read: %q %v", b, err)
			}
			if err := p2.Edit("notes/build.md", "-j4", "-j8"); err != nil {
				t.Fatal(err)
			}
			ms, _, err := p2.Search("make -j8", true)
			if err != nil || len(ms) != 1 || ms[0].Path != "notes/build.md" || ms[0].Line != 2 {
				t.Fatalf("search: %+v %v", ms, err)
			}
			es, err := p2.List("", true)
			if err != nil || len(es) != 1 || es[0].FirstLine != "# Build" {
				t.Fatalf("list: %+v %v", es, err)
			}
			// Another project does not see it; personal is shared.
			s3 := f.open(t, f.wt2, Limits{})
			if _, err := root(t, s3, Project).Read("notes/build.md"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("other project read: %v", err)
			}
			if b, err := root(t, s3, Personal).Read("prefs.md"); err != nil || string(b) != "tabs\n" {
				t.Fatalf("personal: %q %v", b, err)
			}
			// The worktree is recorded beside the root, out of reach.
			rec, err := os.ReadFile(p.Dir() + ".path")
			if err != nil || strings.TrimSpace(string(rec)) != f.wt {
				t.Fatalf("project record: %q %v", rec, err)
			}
			if _, err := p.Read("../" + filepath.Base(p.Dir()) + ".path"); err == nil {
				t.Fatal("the project record is reachable")
			}
			if err := p2.Delete("notes/build.md"); err != nil {
				t.Fatal(err)
			}
			if _, err := p2.Read("notes/build.md"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}
		})
	}
}

func TestEditCounts(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r := root(t, f.open(t, f.wt, Limits{}), Project)
	if _, err := r.Write("a.md", []byte("x x\n")); err != nil {
		t.Fatal(err)
	}
	if err := r.Edit("a.md", "x", "y"); err == nil || !strings.Contains(err.Error(), "found 2 times") {
		t.Fatalf("two matches: %v", err)
	}
	if err := r.Edit("a.md", "z", "y"); err == nil || !strings.Contains(err.Error(), "found 0 times") {
		t.Fatalf("no match: %v", err)
	}
}

func TestCaps(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r := root(t, f.open(t, f.wt, Limits{FileBytes: 10, ScopeBytes: 25, Files: 3}), Project)
	if _, err := r.Write("big", []byte(strings.Repeat("x", 11))); err == nil || !strings.Contains(err.Error(), "memory file cap") {
		t.Fatalf("file cap: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := r.Write(n, []byte(strings.Repeat("x", 10))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Write("c", []byte(strings.Repeat("x", 6))); err == nil || !strings.Contains(err.Error(), "25-byte cap") {
		t.Fatalf("scope cap: %v", err)
	}
	if _, err := r.Write("a", []byte("y")); err != nil { // a replacement counts its new size only
		t.Fatal(err)
	}
	if _, err := r.Write("c", []byte("z")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write("d", []byte("z")); err == nil || !strings.Contains(err.Error(), "3 files, its cap") {
		t.Fatalf("file count: %v", err)
	}
	if err := r.Edit("a", "y", strings.Repeat("y", 11)); err == nil || !strings.Contains(err.Error(), "memory file cap") {
		t.Fatalf("edit over the cap: %v", err)
	}
}

// TestEscapes: every spelling that could leave the root is refused, with
// the session's sandbox off too, and nothing outside is read or written.
func TestEscapes(t *testing.T) {
	for _, mode := range []confine.Mode{confine.ModeOff, confine.ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t, mode)
			r := root(t, f.open(t, f.wt, Limits{}), Project)
			for _, p := range []string{"", "..", "../x", "a/../../x", "/etc/passwd", f.secret, "~/.ssh/id_rsa", "~", "a\x00b", ".", "./a", "a//b", "a/", ".git/config", "x/.git/hooks/pre-commit", "GIT~1/config", ".GIT./x", "a\\b", "\xff"} {
				if _, err := r.Write(p, []byte("pwned")); err == nil {
					t.Errorf("write %q accepted", p)
				}
				if b, err := r.Read(p); err == nil {
					t.Errorf("read %q accepted: %q", p, b)
				}
				if err := r.Delete(p); err == nil {
					t.Errorf("delete %q accepted", p)
				}
			}
			// A symlink and a hard link planted by the host inside the root.
			if err := os.Symlink(f.secret, filepath.Join(r.Dir(), "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Dir(f.secret), filepath.Join(r.Dir(), "dirlink")); err != nil {
				t.Fatal(err)
			}
			hard := filepath.Join(r.Dir(), "hard")
			if err := os.Link(f.secret, hard); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(r.Dir(), "fifo"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"link", "dirlink/id_rsa", "hard", "fifo"} {
				if b, err := r.Read(p); err == nil {
					t.Errorf("read %s: %q", p, b)
				}
			}
			if _, err := r.Write("dirlink/id_rsa", []byte("pwned")); err == nil {
				t.Error("write through a directory symlink accepted")
			}
			if _, err := r.Write("link", []byte("pwned")); err == nil {
				t.Error("write onto a symlink accepted")
			}
			ms, _, err := r.Search("PRIVATE", true)
			if err != nil || len(ms) != 0 {
				t.Errorf("search found the secret: %+v %v", ms, err)
			}
			es, _ := r.List("", true)
			for _, e := range es {
				if strings.Contains(e.FirstLine, "PRIVATE") {
					t.Errorf("listing shows the secret: %+v", e)
				}
			}
			if b, _ := os.ReadFile(f.secret); string(b) != sandboxtest.SecretContent {
				t.Fatalf("the secret changed: %q", b)
			}
		})
	}
}

func TestRootSymlinkRefused(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	outside := filepath.Join(filepath.Dir(f.home), "elsewhere")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.state, "memory"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.state, "memory", "personal")); err != nil {
		t.Fatal(err)
	}
	s := f.open(t, f.wt, Limits{})
	if _, err := s.Root(Personal); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("a symlinked root: %v", err)
	}
	if _, err := root(t, s, Project).Write("x", []byte("y")); err != nil {
		t.Fatalf("project scope: %v", err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("written through the symlinked root: %v", es)
	}
}

func TestCleanPath(t *testing.T) {
	for _, p := range []string{"a", "a/b.md", "notes/2026-12-01 build.md", "é.md", "...x",
		// Corpus entries the fuzz target found interesting, accepted.
		"x/..ccccc", "a/.m~٘", "GI~T1/x", ".gitgi", "0/0", "a/@/b", "Ȗ_/etc/x"} {
		if _, err := CleanPath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	// Corpus entries the fuzz target found interesting.
	for _, p := range []string{"", ".", "..", "/", "//", "a/./b", "a/../b", "~x", "\x00", "a\nb", "\u202e", strings.Repeat("a/", 9) + "a", strings.Repeat("x", 256), "a\\..\\b",
		"0/", "\t", "0000\x7f00", "\xff\xff", "0\xff000", "\x00\x00"} {
		if _, err := CleanPath(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

func TestProjectKey(t *testing.T) {
	a, b := ProjectKey("/src/app"), ProjectKey("/other/app")
	if a == b || !strings.HasPrefix(a, "app-") || ProjectKey("/src/app") != a {
		t.Fatalf("keys: %s %s", a, b)
	}
	if k := ProjectKey("/"); !strings.HasPrefix(k, "root-") {
		t.Fatal(k)
	}
	if _, err := CleanPath(ProjectKey("/x/../../y\x00z")); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentWritersNeverTear: two sessions (each its own root handle
// and in-process lock, as two server processes would have) replacing the
// same file while a reader that takes no lock reads it from disk: every
// read is one whole version.
func TestConcurrentWritersNeverTear(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r1 := root(t, f.open(t, f.wt, Limits{}), Project)
	r2 := root(t, f.open(t, f.wt, Limits{}), Project)
	r2.mu = new(sync.Mutex) // as in another process
	a, b := strings.Repeat("A", 60<<10), strings.Repeat("B", 60<<10)
	if _, err := r1.Write("shared.md", []byte(a)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, w := range []struct {
		r *Root
		s string
	}{{r1, a}, {r2, b}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 150 {
				if _, err := w.r.Write("shared.md", []byte(w.s)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	for {
		select {
		case <-done:
			t.Logf("%d reads", reads)
			if reads == 0 {
				t.Fatal("no read ran during the writes")
			}
			return
		default:
		}
		got, err := os.ReadFile(filepath.Join(r1.Dir(), "shared.md"))
		if err != nil {
			t.Fatal(err)
		}
		if s := string(got); s != a && s != b {
			t.Fatalf("a torn file: %d bytes", len(got))
		}
		reads++
	}
}

// TestEditsSerialised: two sessions (separate handles and in-process
// locks, as two server processes) each appending by edit to one file
// 100 times: the directory lock makes every edit see the other's, so
// none is lost.
func TestEditsSerialised(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	r1 := root(t, f.open(t, f.wt, Limits{}), Project)
	r2 := root(t, f.open(t, f.wt, Limits{}), Project)
	r2.mu = new(sync.Mutex)
	if _, err := r1.Write("log.md", []byte("END")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, r := range []*Root{r1, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if err := r.Edit("log.md", "END", string(rune('a'+i))+"\nEND"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b, err := r1.Read("log.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 200 {
		t.Fatalf("%d of 200 edits kept", n)
	}
}

// TestStateDirOtherSpelling: the state directory named by another spelling
// than the denylist's (HOME through a symlink) still opens, and the secret
// in the real home stays refused by identity.
func TestStateDirOtherSpelling(t *testing.T) {
	f := newFixture(t, confine.ModeOff)
	linkHome := filepath.Join(filepath.Dir(f.home), "home-link")
	if err := os.Symlink(f.home, linkHome); err != nil {
		t.Fatal(err)
	}
	base, err := confine.Resolve(confine.Spec{Mode: confine.ModeOff, ModeExplicit: true, Workdir: f.wt, Home: linkHome,
		StateDir: filepath.Join(linkHome, ".local", "state", "evener-mcp")}, confine.HostReport{OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(f.state, f.wt, base, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := root(t, s, Project)
	if err := os.Link(f.secret, filepath.Join(r.Dir(), "hard")); err != nil {
		t.Fatal(err)
	}
	if b, err := r.Read("hard"); err == nil {
		t.Fatalf("a hard link to the secret read: %q", b)
	}
}

// TestRootServerDefaultStateDir: a server started by root masks every
// person's credential paths, its own default state directory among them;
// the memory roots under that directory must still open (they failed with
// "lies inside the denylisted ..." for every root-started server with the
// default state directory). Root only: it uses a scratch directory under
// root's real default state directory, removed afterwards.
func TestRootServerDefaultStateDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a root-started server's denylist needs root")
	}
	parent := "/root/.local/state/evener-mcp"
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp(parent, "memory-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	wt := t.TempDir()
	base, err := confine.Resolve(confine.Spec{Mode: confine.ModeWorkspaceWrite, ModeExplicit: true, Workdir: wt, Home: "/root", StateDir: parent},
		confine.HostReport{OS: "linux", Bwrap: "/usr/bin/bwrap", UserNS: true, Seccomp: true, RunAsRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(state, wt, base, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if u := s.Unavailable(); len(u) > 0 {
		t.Fatalf("memory unavailable for a root server: %v", u)
	}
	r, err := s.Root(Project)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.fa.Stat("."); err != nil {
		t.Fatal(err)
	}
	// The session's own masks still hold inside the memory layer.
	if _, err := r.fa.Stat("/root/.ssh"); err == nil {
		t.Error("the memory layer reaches root's ~/.ssh")
	}
}
