//go:build linux

package confine

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// protectFixture is a worktree holding a protected directory two levels
// down (a/b/prot/f), a protected file (Makefile), a protected path named
// through a symlink (ln2/c.txt, ln2 -> d), a symlink to an ancestor of the
// protected directory (ln -> a) and an unprotected file (free.txt); plus a
// runner state directory outside the worktree.
type protectFixture struct {
	fixture
	state string
}

func newProtectFixture(t *testing.T) protectFixture {
	t.Helper()
	f := protectFixture{fixture: newFixtureUnder(t, "/var/tmp")}
	w := f.work
	mustWrite(t, filepath.Join(w, "a/b/prot/f"), "orig")
	mustWrite(t, filepath.Join(w, "Makefile"), "orig")
	mustWrite(t, filepath.Join(w, "d/c.txt"), "orig")
	mustWrite(t, filepath.Join(w, "free.txt"), "orig")
	mustSymlink(t, "a", filepath.Join(w, "ln"))
	mustSymlink(t, "d", filepath.Join(w, "ln2"))
	f.state = filepath.Join(f.root, "agent-state")
	mustMkdir(t, f.state)
	// The fixture lives under /var/tmp: the test user must reach it too.
	_ = filepath.Walk(f.root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSymlink == 0 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o755)
		}
		return nil
	})
	return f
}

func (f protectFixture) protSpec(mode Mode) Spec {
	s := f.spec(mode, NetworkOff)
	s.Protected = []string{filepath.Join(f.work, "a/b/prot"), filepath.Join(f.work, "Makefile"), filepath.Join(f.work, "ln2/c.txt")}
	s.StateRW = []string{f.state}
	return s
}

// protectedFiles are the protected files and their content.
func (f protectFixture) protectedFiles() []string {
	return []string{filepath.Join(f.work, "a/b/prot/f"), filepath.Join(f.work, "Makefile"), filepath.Join(f.work, "d/c.txt")}
}

func (f protectFixture) checkUnchanged(t *testing.T) {
	t.Helper()
	for _, p := range f.protectedFiles() {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "orig" {
			t.Errorf("protected %s changed: %q, %v", p, b, err)
		}
	}
}

// protectAttacks are shell attempts to change a protected file; each
// prints BREACH when its command succeeded.
var protectAttacks = []struct{ name, cmd string }{
	{"literal write", "echo x > a/b/prot/f"},
	{"literal append", "echo x >> a/b/prot/f"},
	{"new file in protected dir", "echo x > a/b/prot/new"},
	{"symlinked spelling", "echo x > ln/b/prot/f"},
	{"file by literal", "echo x > Makefile"},
	{"file replaced by rename", "echo x > mk.tmp && mv -f mk.tmp Makefile"},
	{"file deleted", "rm -f Makefile && test ! -e Makefile"},
	{"configured through a symlink, written at its target", "echo x > d/c.txt"},
	{"configured through a symlink, written literally", "echo x > ln2/c.txt"},
	{"rename protected dir", "mv a/b/prot a/b/prot2 && echo x > a/b/prot2/f"},
	{"rename parent", "mv a/b a/b2 && echo x > a/b2/prot/f"},
	{"rename grandparent", "mv a a2 && echo x > a2/b/prot/f"},
	{"rename grandparent through the symlink", "mv ln/b lnb2 && echo x > lnb2/prot/f"},
	{"rename target dir of the symlinked spelling", "mv d d2 && echo x > d2/c.txt"},
	{"remove protected dir", "rm -rf a/b/prot && test ! -e a/b/prot"},
	{"hard link then write", "ln Makefile hl && echo x >> hl"},
}

func protectScript() string {
	var b strings.Builder
	for _, a := range protectAttacks {
		b.WriteString("( " + a.cmd + " ) 2>/dev/null && echo 'BREACH " + a.name + "'\n")
	}
	// The mechanism: renaming a pinned ancestor fails with EBUSY.
	b.WriteString("mv a a3 2>&1 | grep -qi busy && echo EBUSY-SEEN\n")
	return b.String()
}

// TestProtectedShell: in every sandboxed mode, no spawned process changes a
// protected path under any spelling or by renaming an ancestor, while the
// rest of the worktree stays writable where the mode writes.
func TestProtectedShell(t *testing.T) {
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newProtectFixture(t)
			p, err := Resolve(f.protSpec(mode), h)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := runInSandbox(t, p, "cd "+f.work+"\n"+protectScript()+"echo y > free.txt && echo FREE-OK\necho s > "+f.state+"/s && echo STATE-OK\n")
			if strings.Contains(out, "BREACH") {
				t.Errorf("protected path changed:\n%s", out)
			}
			f.checkUnchanged(t)
			if mode != ModeReadOnly {
				if !strings.Contains(out, "FREE-OK") {
					t.Errorf("the rest of the worktree is not writable:\n%s", out)
				}
				if !strings.Contains(out, "EBUSY-SEEN") {
					t.Errorf("renaming a pinned ancestor did not fail with EBUSY:\n%s", out)
				}
			}
			if !strings.Contains(out, "STATE-OK") {
				t.Errorf("the runner state directory is not writable in %s:\n%s", mode, out)
			}
		})
	}
}

// TestProtectedShellControl is TestProtectedShell's control: without
// protected paths the same attacks succeed, so the test above can fail.
func TestProtectedShellControl(t *testing.T) {
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	f := newProtectFixture(t)
	p, err := Resolve(f.spec(ModeWorkspaceWrite, NetworkOff), h)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := runInSandbox(t, p, "cd "+f.work+"\n"+protectScript())
	for _, a := range []string{"literal write", "symlinked spelling", "rename protected dir", "file deleted"} {
		// Each runs after earlier ones changed the tree; these reach a
		// file either way.
		if !strings.Contains(out, "BREACH "+a) {
			t.Errorf("control: %q did not succeed without protection:\n%s", a, out)
		}
	}
	g := newProtectFixture(t)
	p, err = Resolve(g.spec(ModeWorkspaceWrite, NetworkOff), h)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := runInSandbox(t, p, "cd "+g.work+" && mv a a2 && echo x > a2/b/prot/f && echo RENAMED"); !strings.Contains(out, "RENAMED") {
		t.Errorf("control: renaming the grandparent failed without protection: %s", out)
	}
}

// TestProtectedFileLayer: the file tools refuse every write, delete and
// rename of a protected path, of anything in it and of its ancestors, in
// every sandboxed mode; and write the runner state directory in every
// sandboxed mode, read-only included.
func TestProtectedFileLayer(t *testing.T) {
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newProtectFixture(t)
			p, err := Resolve(f.protSpec(mode), usableHost)
			if err != nil {
				t.Fatal(err)
			}
			fa, err := NewFileAccess(p, f.scratch)
			if err != nil {
				t.Fatal(err)
			}
			defer fa.Close()
			writes := []string{"a/b/prot/f", "a/b/prot/new", "ln/b/prot/f", "Makefile", "d/c.txt", "ln2/c.txt", "a/b", "a"}
			for _, w := range writes {
				_, err := fa.WriteFile(w, []byte("x"), WriteOptions{CreateParents: true})
				var d *Denial
				if !errors.As(err, &d) {
					t.Errorf("write %s: %v, want a denial", w, err)
					continue
				}
				if mode != ModeReadOnly && !strings.HasPrefix(w, "ln") && d.Rule != RuleProtected {
					t.Errorf("write %s: rule %s, want %s", w, d.Rule, RuleProtected)
				}
			}
			for _, r := range []string{"Makefile", "a/b/prot/f", "d/c.txt"} {
				if err := fa.Remove(r); err == nil {
					t.Errorf("remove %s succeeded", r)
				}
				if err := fa.Rename(r, "moved.txt"); err == nil {
					t.Errorf("rename %s succeeded", r)
				}
			}
			if err := fa.Rename("free.txt", "a/b/prot/g"); err == nil {
				t.Errorf("rename into the protected dir succeeded")
			}
			if err := fa.Rename("free.txt", "a"); err == nil {
				t.Errorf("rename onto an ancestor succeeded")
			}
			f.checkUnchanged(t)
			if _, err := fa.WriteFile(filepath.Join(f.state, "s"), []byte("x"), WriteOptions{}); err != nil {
				t.Errorf("write into the runner state directory in %s: %v", mode, err)
			}
			if b, _, err := fa.ReadFile(filepath.Join(f.state, "s")); err != nil || string(b) != "x" {
				t.Errorf("read back from the runner state directory: %q, %v", b, err)
			}
			if mode != ModeReadOnly {
				if _, err := fa.WriteFile("free.txt", []byte("y"), WriteOptions{}); err != nil {
					t.Errorf("unprotected write refused: %v", err)
				}
			}
		})
	}
}

// TestStateRWOverlapRefused: a runner state directory that is, lies in or
// holds a denylisted path, a protected path or the server's state
// directory is refused at Resolve, naming the flag.
func TestStateRWOverlapRefused(t *testing.T) {
	f := newProtectFixture(t)
	mustMkdir(t, filepath.Join(f.home, ".ssh", "sub"))
	serverState := filepath.Join(f.root, "server-state")
	mustMkdir(t, filepath.Join(serverState, "in"))
	mustMkdir(t, filepath.Join(f.work, "a/b/prot/in"))
	cases := []struct{ name, dir, want string }{
		{"denylisted", filepath.Join(f.home, ".ssh"), "denylisted"},
		{"inside denylisted", filepath.Join(f.home, ".ssh", "sub"), "denylisted"},
		{"holding denylisted", f.home, "denylisted"},
		{"protected", filepath.Join(f.work, "a/b/prot"), "protected"},
		{"inside protected", filepath.Join(f.work, "a/b/prot/in"), "protected"},
		{"holding protected", filepath.Join(f.work, "a"), "protected"},
		{"server state dir", serverState, "state directory"},
		{"inside server state dir", filepath.Join(serverState, "in"), "state directory"},
		{"holding server state dir", f.root, "--state-rw"},
		{"a temp root", "/var/tmp", "--state-rw"},
		{"a pseudo-filesystem", "/proc/self", "denylisted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := f.protSpec(ModeWorkspaceWrite)
			s.StateDir = serverState
			s.StateRW = []string{c.dir}
			_, err := Resolve(s, usableHost)
			if err == nil || !strings.Contains(err.Error(), "--state-rw") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Resolve: %v, want a refusal naming --state-rw and %q", err, c.want)
			}
		})
	}
	s := f.protSpec(ModeWorkspaceWrite)
	s.StateDir = serverState
	if _, err := Resolve(s, usableHost); err != nil {
		t.Errorf("a state dir overlapping nothing refused: %v", err)
	}
	agent := filepath.Join(f.home, ".agent-host", "projects")
	mustMkdir(t, agent)
	s.StateRW = []string{agent}
	if _, err := Resolve(s, usableHost); err != nil {
		t.Errorf("an agent host's state dir in HOME refused: %v", err)
	}
	// Claude Code's ~/.claude holds a masked credentials file: the whole
	// directory overlaps the denylist; a subdirectory of it does not.
	mustMkdir(t, filepath.Join(f.home, ".claude", "projects"))
	s.StateRW = []string{filepath.Join(f.home, ".claude")}
	if _, err := Resolve(s, usableHost); err == nil || !strings.Contains(err.Error(), "denylisted") {
		t.Errorf("~/.claude (holding a masked credentials file): %v, want a refusal", err)
	}
	s.StateRW = []string{filepath.Join(f.home, ".claude", "projects")}
	if _, err := Resolve(s, usableHost); err != nil {
		t.Errorf("~/.claude/projects refused: %v", err)
	}
}

// TestProtectedWriteRootInside: a protected path holding a write root is
// refused (the write root would be writable under it).
func TestProtectedWriteRootInside(t *testing.T) {
	f := newProtectFixture(t)
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Protected = []string{f.root}
	if _, err := Resolve(s, usableHost); err == nil || !strings.Contains(err.Error(), "--protect") {
		t.Errorf("Resolve: %v, want a refusal naming --protect", err)
	}
}

// TestProtectedPlan: the plan read-only binds the literal and the resolved
// spelling and pins every ancestor between the write root and the path.
func TestProtectedPlan(t *testing.T) {
	f := newProtectFixture(t)
	p, err := Resolve(f.protSpec(ModeWorkspaceWrite), usableHost)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Inspect(p, f.scratch, f.work)
	if err != nil {
		t.Fatal(err)
	}
	mp := Plan(p, l)
	want := map[string]MountKind{
		filepath.Join(f.work, "a"):         MountBind,
		filepath.Join(f.work, "a/b"):       MountBind,
		filepath.Join(f.work, "a/b/prot"):  MountROBind,
		filepath.Join(f.work, "Makefile"):  MountROBind,
		filepath.Join(f.work, "d/c.txt"):   MountROBind,
		filepath.Join(f.work, "ln2/c.txt"): MountROBind, // the literal spelling
		filepath.Join(f.work, "d"):         MountBind,
		f.state:                            MountBind,
	}
	for dst, k := range want {
		found := false
		for _, m := range mp {
			if m.Dst == dst && m.Kind == k {
				found = true
			}
		}
		if !found {
			t.Errorf("plan has no %s %s:\n%s", k, dst, mp)
		}
	}
	for _, path := range []string{"a/b/prot/f", "Makefile", "d/c.txt"} {
		if planWrites(mp, filepath.Join(f.work, path)) {
			t.Errorf("%s writable in the plan", path)
		}
	}
}

// TestProtectedAbsentCreated: a protected path that does not exist is
// created as an empty directory at spawn so it can be bound read-only, and
// its ancestors pinned.
func TestProtectedAbsentCreated(t *testing.T) {
	f := newProtectFixture(t)
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.Protected = []string{filepath.Join(f.work, "x/y")}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Inspect(p, f.scratch, f.work)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := lstatKind(filepath.Join(f.work, "x/y")); k != PathDir {
		t.Fatalf("absent protected path not created")
	}
	mp := Plan(p, l)
	if planWrites(mp, filepath.Join(f.work, "x/y/z")) {
		t.Errorf("absent protected path writable:\n%s", mp)
	}
	// A symlink where the path would be created refuses the spawn.
	mustSymlink(t, f.root, filepath.Join(f.work, "s"))
	s.Protected = []string{filepath.Join(f.work, "s2/y")}
	p, _ = Resolve(s, usableHost)
	_ = os.Remove(filepath.Join(f.work, "s2"))
	mustSymlink(t, f.root, filepath.Join(f.work, "s2"))
	if _, err := Inspect(p, f.scratch, f.work); !errors.Is(err, ErrUnsafeLayout) {
		t.Errorf("Inspect with a symlink where a protected path goes: %v, want ErrUnsafeLayout", err)
	}
}

// TestProtectedHardLinkRefused: a protected file with another name (a hard
// link made outside the sandbox) refuses the spawn: the other name would
// stay writable. Without the extra link the same layout is accepted.
func TestProtectedHardLinkRefused(t *testing.T) {
	f := newProtectFixture(t)
	p, err := Resolve(f.protSpec(ModeWorkspaceWrite), usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(p, f.scratch, f.work); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := os.Link(filepath.Join(f.work, "a/b/prot/f"), filepath.Join(f.work, "hl")); err != nil {
		t.Fatal(err)
	}
	_, err = Inspect(p, f.scratch, f.work)
	if !errors.Is(err, ErrUnsafeLayout) || !strings.Contains(err.Error(), "hard link") {
		t.Errorf("Inspect with a hard link to a protected file: %v, want ErrUnsafeLayout naming the hard link", err)
	}
	if _, err := InspectSeatbelt(p, f.scratch, nil, nil, ""); !errors.Is(err, ErrUnsafeLayout) {
		t.Errorf("InspectSeatbelt with a hard link to a protected file: %v, want ErrUnsafeLayout", err)
	}
}

// BenchmarkInspectProtected: what protected paths add to each spawn's
// Inspect: a protected directory of 2000 files walked for hard links (up to
// maxProtectWalk entries), two
// protected files, the ancestors resolved. Compare with
// BenchmarkInspectUnprotected (same tree, nothing protected).
func BenchmarkInspectProtected(b *testing.B)   { benchInspect(b, true) }
func BenchmarkInspectUnprotected(b *testing.B) { benchInspect(b, false) }

func benchInspect(b *testing.B, protect bool) {
	t := &testing.T{}
	f := newProtectFixture(t)
	b.Cleanup(func() { os.RemoveAll(f.root) })
	for i := 0; i < 2000; i++ {
		if err := os.WriteFile(filepath.Join(f.work, "a/b/prot", "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	if protect {
		s = f.protSpec(ModeWorkspaceWrite)
	}
	p, err := Resolve(s, usableHost)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := Inspect(p, f.scratch, f.work)
		if err != nil {
			b.Fatal(err)
		}
		_ = Plan(p, l)
	}
}

// TestProtectStartupLine: the startup line names protected paths and
// runner state when enforced, and says protected paths are not enforced in
// mode off.
func TestProtectStartupLine(t *testing.T) {
	f := newProtectFixture(t)
	p, err := Resolve(f.protSpec(ModeWorkspaceWrite), usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if l := p.StartupLine(); !strings.HasPrefix(l, "sandbox: bwrap enforcing workspace-write (") ||
		!strings.HasSuffix(l, "; protected: 3 path(s), read-only in every mode; runner state: 1 dir(s), writable in every mode") {
		t.Errorf("startup line %q", l)
	}
	p, err = Resolve(f.protSpec(ModeOff), usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if l := p.StartupLine(); !strings.Contains(l, "3 protected path(s) NOT enforced") {
		t.Errorf("mode off startup line %q", l)
	}
}

// TestProtectedShellInRepository: the same in a git worktree, with a
// protected path inside the git dir too (.git/info/exclude): the git pins
// and the protected pins compose, and git still commits.
func TestProtectedShellInRepository(t *testing.T) {
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, mode := range []Mode{ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			f := newProtectFixture(t)
			if out, err := exec.Command("git", "init", "-q", f.work).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			mustWrite(t, filepath.Join(f.work, ".git/info/exclude"), "orig")
			s := f.protSpec(mode)
			s.Protected = append(s.Protected, filepath.Join(f.work, ".git/info/exclude"))
			p, err := Resolve(s, h)
			if err != nil {
				t.Fatal(err)
			}
			script := "cd " + f.work + "\n" + protectScript() +
				"( echo x > .git/info/exclude ) 2>/dev/null && echo 'BREACH exclude'\n" +
				"( mv .git/info .git/info2 ) 2>/dev/null && echo 'BREACH info renamed'\n" +
				"git -c user.email=a@b -c user.name=n add free.txt && git -c user.email=a@b -c user.name=n commit -qm m && echo COMMIT-OK\n"
			out, _ := runInSandbox(t, p, script)
			if strings.Contains(out, "BREACH") {
				t.Errorf("protected path changed:\n%s", out)
			}
			f.checkUnchanged(t)
			if b, _ := os.ReadFile(filepath.Join(f.work, ".git/info/exclude")); string(b) != "orig" {
				t.Errorf(".git/info/exclude changed: %q", b)
			}
			if !strings.Contains(out, "COMMIT-OK") {
				t.Errorf("git cannot commit with protected paths:\n%s", out)
			}
		})
	}
}

// TestProtectedRepointedSymlink: a protected path named through a symlink
// that a command re-points keeps the file it named at start protected, and
// the new target is bound read-only without its ancestors being pinned
// (writable binds only ever follow the start spelling, which every sandbox
// has pinned since the first spawn).
func TestProtectedRepointedSymlink(t *testing.T) {
	f := newProtectFixture(t)
	p, err := Resolve(f.protSpec(ModeWorkspaceWrite), usableHost)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(f.work, "e/sub/c.txt"), "other")
	if err := os.Remove(filepath.Join(f.work, "ln2")); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "e/sub", filepath.Join(f.work, "ln2"))
	l, err := Inspect(p, f.scratch, f.work)
	if err != nil {
		t.Fatal(err)
	}
	mp := Plan(p, l)
	for _, path := range []string{"d/c.txt", "e/sub/c.txt"} {
		if planWrites(mp, filepath.Join(f.work, path)) {
			t.Errorf("%s writable after the symlink was re-pointed:\n%s", path, mp)
		}
	}
	for _, m := range mp {
		if m.Kind == MountBind && (m.Dst == filepath.Join(f.work, "e") || m.Dst == filepath.Join(f.work, "e/sub")) {
			t.Errorf("a writable pin on the re-pointed spelling's ancestor %s", m.Dst)
		}
	}
}
