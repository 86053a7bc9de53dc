package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInfraGuard is the shared-tree guard and the denylist applied to a
// hook's directory: never a shared, multi-tenant tree, and the denylist
// still wins (docs/hooks.md, "Hooks", "Where it runs").
func TestInfraGuard(t *testing.T) {
	f := newFixture(t)
	p := f.resolve(t, ModeWorkspaceWrite, NetworkOff, usableHost)
	mustMkdir(t, filepath.Join(f.home, ".ssh", "hooks"))
	mustMkdir(t, filepath.Join(f.home, ".config", "gh"))
	usrLink := filepath.Join(f.root, "deep", "er", "usr-link")
	mustSymlink(t, "/usr", usrLink)
	homeLink := filepath.Join(f.root, "deep", "home-link")
	mustSymlink(t, f.home, homeLink)
	tests := []struct {
		Name   string
		Dir    string
		Refuse string // "" allowed, else sharedTreeRefusal or maskedRefusal
	}{
		{Name: "root", Dir: "/", Refuse: sharedTreeRefusal},
		{Name: "home-parent", Dir: "/home", Refuse: sharedTreeRefusal},
		{Name: "opt", Dir: "/opt", Refuse: sharedTreeRefusal},
		{Name: "opt-hooks", Dir: "/opt/hooks"},
		{Name: "HOME", Dir: f.home, Refuse: sharedTreeRefusal},
		{Name: "above-HOME", Dir: filepath.Dir(f.home), Refuse: sharedTreeRefusal},
		{Name: "HOME-via-symlink", Dir: homeLink, Refuse: sharedTreeRefusal},
		{Name: "HOME-bin", Dir: filepath.Join(f.home, "bin")},
		{Name: "HOME-local-share-hooks", Dir: filepath.Join(f.home, ".local", "share", "evener-hooks")},
		{Name: "HOME-config-holding-masked", Dir: filepath.Join(f.home, ".config")},
		{Name: "HOME-config-evener-mcp-masked", Dir: filepath.Join(f.home, ".config", "evener-mcp", "hooks"), Refuse: maskedRefusal},
		{Name: "HOME-ssh", Dir: filepath.Join(f.home, ".ssh"), Refuse: maskedRefusal},
		{Name: "under-HOME-ssh", Dir: filepath.Join(f.home, ".ssh", "hooks"), Refuse: maskedRefusal},
		{Name: "HOME-config-gh", Dir: filepath.Join(f.home, ".config", "gh"), Refuse: maskedRefusal},
		{Name: "root-ssh", Dir: "/root/.ssh", Refuse: maskedRefusal},
		{Name: "tmp", Dir: "/tmp", Refuse: sharedTreeRefusal},
		{Name: "below-tmp", Dir: "/tmp/x"},
		{Name: "var-tmp", Dir: "/var/tmp", Refuse: sharedTreeRefusal},
		{Name: "below-var-tmp", Dir: "/var/tmp/x"},
		{Name: "dev-shm", Dir: "/dev/shm", Refuse: sharedTreeRefusal},
		{Name: "worktree", Dir: f.work, Refuse: sharedTreeRefusal},
		{Name: "above-worktree", Dir: f.root, Refuse: sharedTreeRefusal},
		{Name: "below-worktree", Dir: filepath.Join(f.work, "tools", "hooks")},
		{Name: "symlink-to-usr", Dir: usrLink, Refuse: sharedTreeRefusal},
		{Name: "usr-share", Dir: "/usr/share"},
		{Name: "proc", Dir: "/proc/self", Refuse: maskedRefusal},
		{Name: "sys", Dir: "/sys/kernel", Refuse: maskedRefusal},
		{Name: "dev", Dir: "/dev/input", Refuse: maskedRefusal},
		{Name: "run-user", Dir: "/run/user/1000", Refuse: maskedRefusal},
	}
	// A deeper path that is the same directory as an entry directly under
	// / (merged /usr: /bin is a link to usr/bin) is refused too.
	if r, err := filepath.EvalSymlinks("/bin"); err == nil && r != "/bin" {
		tests = append(tests, struct {
			Name   string
			Dir    string
			Refuse string
		}{Name: "same-as-top-level-entry", Dir: r, Refuse: sharedTreeRefusal})
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			dir := tt.Dir
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				dir = r // the caller hands a resolved directory
			}
			why, detail := p.guardHookDir(dir)
			if why != tt.Refuse {
				t.Fatalf("guardHookDir(%s) = %q (%s), want %q", tt.Dir, why, detail, tt.Refuse)
			}
			if why != "" && (strings.Contains(why, "/") || detail == "") {
				t.Errorf("refusal %q names a path, or the operator's detail is empty", why)
			}
		})
	}
}

func mustExec(t *testing.T, path string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestResolveHookGrants: the grant is derived from each configured command (its
// resolved directory), never from anything else, and a command the sandbox
// cannot serve is refused with a reason that names no host path.
func TestResolveHookGrants(t *testing.T) {
	f := newFixture(t)
	hooks := filepath.Join(f.root, "opt", "hooks")
	check := filepath.Join(hooks, "check")
	mustExec(t, check)
	linked := filepath.Join(f.root, "bin", "check-link")
	mustSymlink(t, check, linked)
	noExec := filepath.Join(hooks, "plain")
	mustWrite(t, noExec, "x")
	atHome := filepath.Join(f.home, "check")
	mustExec(t, atHome)
	inSSH := filepath.Join(f.home, ".ssh", "hook")
	mustExec(t, inSSH)
	intoSSH := filepath.Join(f.root, "bin", "into-ssh")
	mustSymlink(t, inSSH, intoSSH)
	deep := filepath.Join(f.home, ".local", "share", "evener-hooks", "post")
	mustExec(t, deep)

	s := f.spec(ModeRestricted, NetworkOff)
	s.HookPaths = []string{check, linked, noExec, atHome, inSSH, intoSSH, deep, hooks, filepath.Join(hooks, "absent"), "relative/hook", check}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // command -> granted dir, or "!" + refusal
		check:                          hooks,
		linked:                         hooks, // the directory holding what runs
		noExec:                         "!its command is not an executable regular file",
		atHome:                         "!" + sharedTreeRefusal,
		inSSH:                          "!" + maskedRefusal,
		intoSSH:                        "!" + maskedRefusal,
		deep:                           filepath.Dir(deep),
		hooks:                          "!its command is not an executable regular file",
		filepath.Join(hooks, "absent"): "!its command does not exist",
		"relative/hook":                "!its command is not an absolute path",
	}
	got := p.HookGrants()
	if len(got) != len(want) {
		t.Fatalf("HookGrants() has %d grants, want %d (one per distinct command): %+v", len(got), len(want), got)
	}
	for _, g := range got {
		w, ok := want[g.Command]
		if !ok {
			t.Errorf("unexpected grant %+v", g)
			continue
		}
		if refusal, refused := strings.CutPrefix(w, "!"); refused {
			if g.Dir != "" || g.Refused != refusal || g.Detail == "" {
				t.Errorf("%s: %+v, want refused with %q", g.Command, g, refusal)
			}
			if strings.Contains(g.Refused, f.root) {
				t.Errorf("%s: the model's reason names a host path: %q", g.Command, g.Refused)
			}
			path, err := p.HookCommand(g.Command)
			if !errors.Is(err, errHookRefused) || path != "" || !strings.Contains(err.Error(), refusal) {
				t.Errorf("InfraCommand(%s) = %q, %v; want ErrInfraRefused with %q", g.Command, path, err, refusal)
			}
			continue
		}
		if g.Dir != w || g.Refused != "" {
			t.Errorf("%s: %+v, want %s granted", g.Command, g, w)
		}
		if path, err := p.HookCommand(g.Command); err != nil || path != filepath.Join(w, filepath.Base(path)) {
			t.Errorf("InfraCommand(%s) = %q, %v", g.Command, path, err)
		}
	}
	if path, _ := p.HookCommand(linked); path != check {
		t.Errorf("a symlinked command runs %s, want its target %s", path, check)
	}
	if dirs := p.HookDirs(); !slices.Equal(dirs, []string{hooks, filepath.Dir(deep)}) {
		t.Errorf("InfraDirs() = %v, want the two granted directories once each", dirs)
	}
	if _, err := p.HookCommand(filepath.Join(hooks, "never-configured")); !errors.Is(err, errHookRefused) {
		t.Errorf("a command absent from the configuration was served: %v", err)
	}

	// Mode off grants nothing and refuses nothing: the command runs as
	// configured, with the user's own access.
	s.Mode = ModeOff
	off, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if path, err := off.HookCommand(atHome); err != nil || path != atHome {
		t.Errorf("off: InfraCommand(%s) = %q, %v", atHome, path, err)
	}
}

// TestInfraNarrow: a narrowed policy keeps the grants, drops those its new
// masks or its narrower worktree refuse, and never grants what was refused.
func TestInfraNarrow(t *testing.T) {
	f := newFixture(t)
	opt := filepath.Join(f.root, "opt", "hooks", "check")
	inWork := filepath.Join(f.work, "tools", "hooks", "check")
	atHome := filepath.Join(f.home, "check")
	for _, c := range []string{opt, inWork, atHome} {
		mustExec(t, c)
	}
	s := f.spec(ModeWorkspaceWrite, NetworkOff)
	s.HookPaths = []string{opt, inWork, atHome}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{filepath.Dir(opt), filepath.Dir(inWork)}
	if got := p.HookDirs(); !slices.Equal(got, all) {
		t.Fatalf("InfraDirs() = %v, want %v", got, all)
	}

	q, err := p.Narrow(ModeRestricted, NetworkOff, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.HookDirs(); !slices.Equal(got, all) {
		t.Errorf("Narrow dropped grants: %v, want %v", got, all)
	}
	if _, err := q.HookCommand(atHome); !errors.Is(err, errHookRefused) {
		t.Errorf("Narrow granted a refused command: %v", err)
	}

	q, err = p.Narrow("", "", []string{filepath.Join(f.root, "opt")})
	if err != nil {
		t.Fatal(err)
	}
	if got := q.HookDirs(); !slices.Equal(got, all[1:]) {
		t.Errorf("after masking its parent, InfraDirs() = %v, want %v", got, all[1:])
	}
	if _, err := q.HookCommand(opt); !errors.Is(err, errHookRefused) || !strings.Contains(err.Error(), maskedRefusal) {
		t.Errorf("a newly masked hook is still served: %v", err)
	}
	if got := p.HookDirs(); !slices.Equal(got, all) {
		t.Errorf("Narrow changed the original policy's grants: %v", got)
	}

	// The worktree narrowed to a directory inside the hook directory: the
	// hook directory is now above the worktree, a shared tree.
	inside := filepath.Join(f.work, "tools", "hooks", "sub")
	mustMkdir(t, inside)
	q, err = p.NarrowWorkdir(inside)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.HookCommand(inWork); !errors.Is(err, errHookRefused) || !strings.Contains(err.Error(), sharedTreeRefusal) {
		t.Errorf("a hook directory above the narrowed worktree is still served: %v", err)
	}
	other := filepath.Join(f.work, "src")
	mustMkdir(t, other)
	if q, err = p.NarrowWorkdir(other); err != nil {
		t.Fatal(err)
	}
	if got := q.HookDirs(); !slices.Equal(got, all) {
		t.Errorf("NarrowWorkdir(src) dropped grants: %v, want %v", got, all)
	}
}

// TestInspectHookDirs: at each spawn the hook directories are re-checked and
// those already visible through a bound root are left to it; in restricted
// mode the denylist reaches inside a hook directory.
func TestInspectHookDirs(t *testing.T) {
	f := newFixture(t)
	cfg := filepath.Join(f.home, ".config")
	hookInConfig := filepath.Join(cfg, "check")
	mustExec(t, hookInConfig)
	mustWrite(t, filepath.Join(cfg, "gh", "hosts.yml"), "SECRET")
	mustWrite(t, filepath.Join(cfg, "evener-mcp", "config.toml"), "SECRET")
	inWork := filepath.Join(f.work, "tools", "check")
	mustExec(t, inWork)
	swapped := filepath.Join(f.root, "opt", "hooks", "check")
	mustExec(t, swapped)

	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			s := f.spec(mode, NetworkOff)
			s.HookPaths = []string{hookInConfig, inWork, swapped}
			p, err := Resolve(s, usableHost)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.HookDirs(); len(got) != 3 {
				t.Fatalf("InfraDirs() = %v, want three", got)
			}
			l, err := Inspect(p, f.scratch, f.work)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{cfg, filepath.Dir(swapped)}
			if !slices.Equal(l.HookDirs, want) {
				t.Errorf("Layout.HookDirs = %v, want %v (the worktree's own hook dir is left to the worktree)", l.HookDirs, want)
			}
			for _, masked := range []string{filepath.Join(cfg, "gh"), filepath.Join(cfg, "evener-mcp")} {
				if !slices.ContainsFunc(l.Deny, func(e Entry) bool { return e.Path == masked }) {
					t.Errorf("%s inside a hook directory is not masked: %v", masked, l.Deny)
				}
			}
			mp := Plan(p, l)
			for _, d := range want {
				i := slices.IndexFunc(mp, func(m Mount) bool { return m.Dst == d })
				if i < 0 || mp[i].Kind != MountROBind || mp[i].Src != d {
					t.Errorf("hook directory %s is not bound read-only: %v", d, mp)
				}
			}
		})
	}

	// A hook directory that became a symlink after start is not bound.
	s := f.spec(ModeRestricted, NetworkOff)
	s.HookPaths = []string{swapped}
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(swapped)
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join(f.home, ".config"), dir)
	l, err := Inspect(p, f.scratch, f.work)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.HookDirs) != 0 {
		t.Errorf("a hook directory swapped for a symlink is still bound: %v", l.HookDirs)
	}
}
