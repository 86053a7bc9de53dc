package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSharedTreeGuard(t *testing.T) {
	// Layout under one temp root R:
	//   R/home                 HOME
	//   R/projects/repo        the worktree (its parent is not above HOME)
	//   R/tmproot              an extra temp root (a TMPDIR)
	type env struct{ root, home, wt, tmp string }
	tests := []struct {
		Name            string
		Candidate       func(t *testing.T, e env) string
		HomeArg         func(t *testing.T, e env) string // default e.home
		WantErr         bool
		WantErrContains string
	}{
		{Name: "root", Candidate: func(*testing.T, env) string { return "/" }, WantErr: true, WantErrContains: "fewer than two components"},
		{Name: "tmp", Candidate: func(*testing.T, env) string { return "/tmp" }, WantErr: true, WantErrContains: "fewer than two components"},
		{Name: "home-dir", Candidate: func(*testing.T, env) string { return "/home" }, WantErr: true, WantErrContains: "fewer than two components"},
		{Name: "tmp-trailing-slash", Candidate: func(*testing.T, env) string { return "/tmp/" }, WantErr: true, WantErrContains: "fewer than two components"},
		{Name: "var-tmp", Candidate: func(*testing.T, env) string { return "/var/tmp" }, WantErr: true, WantErrContains: "at or above /var/tmp"},
		{Name: "dev-shm", Candidate: func(*testing.T, env) string { return "/dev/shm" }, WantErr: true, WantErrContains: "at or above /dev/shm"},
		{Name: "relative", Candidate: func(*testing.T, env) string { return "home/x" }, WantErr: true, WantErrContains: "not absolute"},
		{Name: "HOME", Candidate: func(_ *testing.T, e env) string { return e.home }, WantErr: true, WantErrContains: "at or above"},
		{Name: "HOME-dotdot", Candidate: func(_ *testing.T, e env) string { return e.home + "/x/.." }, WantErr: true, WantErrContains: "at or above"},
		{Name: "parent-of-HOME", Candidate: func(_ *testing.T, e env) string { return e.root }, WantErr: true, WantErrContains: "at or above"},
		{Name: "worktree", Candidate: func(_ *testing.T, e env) string { return e.wt }, WantErr: true, WantErrContains: "at or above " + "<wt>"},
		{Name: "parent-of-worktree", Candidate: func(_ *testing.T, e env) string { return filepath.Dir(e.wt) }, WantErr: true, WantErrContains: "at or above " + "<wt>"},
		{Name: "temp-root", Candidate: func(_ *testing.T, e env) string { return e.tmp }, WantErr: true, WantErrContains: "at or above " + "<tmp>"},
		{Name: "symlink-resolving-above-HOME", Candidate: func(t *testing.T, e env) string {
			l := filepath.Join(e.home, ".local", "share", "up")
			mustSymlink(t, e.root, l) // the literal spelling is deep under HOME
			return l
		}, WantErr: true, WantErrContains: "at or above"},
		{Name: "symlink-to-HOME", Candidate: func(t *testing.T, e env) string {
			l := filepath.Join(e.root, "links", "h")
			mustSymlink(t, e.home, l)
			return l
		}, WantErr: true, WantErrContains: "at or above"},
		{Name: "symlink-to-slash", Candidate: func(t *testing.T, e env) string {
			l := filepath.Join(e.root, "links", "slash")
			mustSymlink(t, "/", l)
			return l
		}, WantErr: true, WantErrContains: "fewer than two components"},
		{Name: "HOME-given-as-symlink", HomeArg: func(t *testing.T, e env) string {
			l := filepath.Join(e.root, "links", "home")
			mustSymlink(t, e.home, l)
			return l
		}, Candidate: func(_ *testing.T, e env) string { return e.home }, WantErr: true, WantErrContains: "at or above"},
		{Name: "same-dir-as-a-root-entry", Candidate: func(t *testing.T, e env) string {
			if l, err := os.Readlink("/lib"); err != nil || filepath.Clean(l) != "usr/lib" {
				t.Skip("needs a merged-/usr host where /lib -> usr/lib")
			}
			return "/usr/lib"
		}, WantErr: true, WantErrContains: "is the directory /lib"},

		// Admitted: below HOME, below a temp root, below the worktree, beside.
		{Name: "deep-under-HOME", Candidate: func(t *testing.T, e env) string {
			d := filepath.Join(e.home, ".local", "share", "x", "y")
			mustMkdir(t, d)
			return d
		}},
		{Name: "missing-under-HOME", Candidate: func(_ *testing.T, e env) string { return filepath.Join(e.home, "not", "there") }},
		{Name: "under-temp-root", Candidate: func(t *testing.T, e env) string {
			d := filepath.Join(e.tmp, "cache")
			mustMkdir(t, d)
			return d
		}},
		{Name: "under-worktree", Candidate: func(t *testing.T, e env) string {
			d := filepath.Join(e.wt, "vendor")
			mustMkdir(t, d)
			return d
		}},
		{Name: "sibling", Candidate: func(t *testing.T, e env) string {
			d := filepath.Join(e.root, "sibling")
			mustMkdir(t, d)
			return d
		}},
		{Name: "prefix-sibling-of-HOME", Candidate: func(t *testing.T, e env) string {
			d := e.home + "2" // "/r/home2" is not above "/r/home"
			mustMkdir(t, d)
			return d
		}},
		{Name: "usr-share", Candidate: func(*testing.T, env) string { return "/usr/share" }},
		{Name: "symlink-below-HOME", Candidate: func(t *testing.T, e env) string {
			d := filepath.Join(e.home, "src")
			mustMkdir(t, d)
			l := filepath.Join(e.root, "links", "src")
			mustSymlink(t, d, l)
			return l
		}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			e := env{root: root, home: filepath.Join(root, "home"), wt: filepath.Join(root, "projects", "repo"), tmp: filepath.Join(root, "tmproot")}
			for _, d := range []string{e.home, e.wt, e.tmp} {
				mustMkdir(t, d)
			}
			home := e.home
			if tt.HomeArg != nil {
				home = tt.HomeArg(t, e)
			}
			cand := tt.Candidate(t, e)
			err = sharedTreeGuard(cand, home, e.wt, []string{"/tmp", "/var/tmp", "/dev/shm", e.tmp})
			if gotErr := err != nil; gotErr != tt.WantErr {
				t.Fatalf("sharedTreeGuard(%s) = %v, want error %v", cand, err, tt.WantErr)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, errSharedTree) {
				t.Errorf("error %q does not wrap errSharedTree", err)
			}
			want := strings.NewReplacer("<wt>", e.wt, "<tmp>", e.tmp).Replace(tt.WantErrContains)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		})
	}
}

func TestSharedTreeGuardNoWorktree(t *testing.T) {
	// An empty worktree argument (the workdir's own check) judges only
	// HOME and the temp roots.
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	wt := filepath.Join(root, "wt")
	mustMkdir(t, home)
	mustMkdir(t, wt)
	if err := sharedTreeGuard(wt, home, "", nil); err != nil {
		t.Errorf("sharedTreeGuard(%s, worktree \"\") = %v, want nil", wt, err)
	}
	if err := sharedTreeGuard(home, home, "", nil); !errors.Is(err, errSharedTree) {
		t.Errorf("sharedTreeGuard(HOME, worktree \"\") = %v, want errSharedTree", err)
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		P, Root string
		Want    bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/b/", "/a/b", true},
		{"/a/b", "/a/b/", true},
		{"/a/bc", "/a/b", false},
		{"/a/b-c", "/a/b", false},
		{"/a", "/a/b", false},
		{"/a/b/../c", "/a/b", false},
		{"/a/b/../b/x", "/a/b", true},
		{"/a/b/./c", "/a/b", true},
		{"//a//b//c", "/a/b", true},
		{"/x", "/", true},
		{"/", "/", true},
		{"/", "/a", false},
		{"/a/b", "/a/b/c/..", true},
		{"/a/bc/d", "/a/b/../bc", true},
	}
	for _, tt := range tests {
		if got := Within(tt.P, tt.Root); got != tt.Want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.P, tt.Root, got, tt.Want)
		}
	}
}

func TestDenylistDefaults(t *testing.T) {
	const home = "/home/u"
	// docs/security.md, "What is enforced", "Denylist": the first floor, then the
	// equally sensitive ones.
	floor := []string{".ssh", ".aws", ".config/gcloud", ".netrc", ".config/evener", ".gnupg", ".docker/config.json", ".kube", ".git-credentials"}
	sensitive := []string{".npmrc", ".pypirc", ".config/gh", ".cargo/credentials.toml", ".pgpass", ".vault-token",
		".bash_history", ".zsh_history", ".local/share/fish/fish_history",
		// Issue 13 item 10: agent hosts' own credentials, cloud, VM and
		// build-tool credentials.
		".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json",
		".config/rclone/rclone.conf", ".docker/desktop", ".colima", ".lima", ".m2/settings.xml",
		".gradle/gradle.properties", ".terraform.d/credentials.tfrc.json", ".password-store"}
	tests := []struct {
		Name     string
		XDG      string
		WantHas  []string
		WantNot  []string
		WantOnce []string
	}{
		{Name: "no-xdg", XDG: "", WantNot: []string{"/evener", "/gh"}},
		{Name: "xdg-is-default", XDG: home + "/.config", WantOnce: []string{home + "/.config/evener", home + "/.config/gh"}},
		{Name: "xdg-is-default-unclean", XDG: home + "/.config/", WantOnce: []string{home + "/.config/evener"}},
		{Name: "xdg-relocated", XDG: "/xdg/conf",
			WantHas:  []string{"/xdg/conf/evener", home + "/.config/evener"},
			WantOnce: []string{"/xdg/conf/evener", home + "/.config/evener"}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			got := defaultDenylist(home, tt.XDG)
			for _, r := range append(slices.Clone(floor), sensitive...) {
				if want := filepath.Join(home, r); !slices.Contains(got, want) {
					t.Errorf("defaultDenylist lacks %s", want)
				}
			}
			for _, want := range tt.WantHas {
				if !slices.Contains(got, want) {
					t.Errorf("defaultDenylist lacks %s", want)
				}
			}
			for _, not := range tt.WantNot {
				if slices.Contains(got, not) {
					t.Errorf("defaultDenylist has %s", not)
				}
			}
			for _, once := range tt.WantOnce {
				n := 0
				for _, g := range got {
					if g == once {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s appears %d times, want once", once, n)
				}
			}
			for _, g := range got {
				if !filepath.IsAbs(g) || filepath.Clean(g) != g {
					t.Errorf("entry %q is not a clean absolute path", g)
				}
				if g == home || Within(home, g) {
					t.Errorf("entry %q masks HOME itself", g)
				}
			}
		})
	}
}

func TestDenylistPseudoFloor(t *testing.T) {
	for _, want := range []string{"/proc", "/sys", "/dev/fd", "/dev/mem", "/run/user",
		"/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock",
		"/run/containerd/containerd.sock", "/run/dbus/system_bus_socket"} {
		if !slices.Contains(PseudoDenylist, want) {
			t.Errorf("PseudoDenylist lacks %s", want)
		}
	}
	for _, s := range daemonSockets {
		if !strings.HasSuffix(s, ".sock") && !strings.HasSuffix(s, "_socket") && !strings.HasSuffix(s, "/private") && !strings.HasSuffix(s, ".socket") {
			t.Errorf("daemonSockets holds %s, which is not a socket path", s)
		}
	}
	for _, want := range []string{"/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock", "/run/dbus/system_bus_socket"} {
		if !slices.Contains(daemonSockets, want) {
			t.Errorf("daemonSockets lacks %s", want)
		}
	}
	for _, want := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt", "/nix/store"} {
		if !slices.Contains(systemReadRoots, want) {
			t.Errorf("systemReadRoots lacks %s", want)
		}
	}
}

func TestGlobalGitConfigFiles(t *testing.T) {
	type env struct{ home, xdg string }
	tests := []struct {
		Name    string
		Setup   func(t *testing.T, e env)
		UseXDG  bool
		WantRel []string // relative to "<home>" or "<xdg>"
	}{
		{Name: "none", Setup: func(*testing.T, env) {}, WantRel: nil},
		{Name: "gitconfig-file", Setup: func(t *testing.T, e env) {
			mustWrite(t, filepath.Join(e.home, ".gitconfig"), "[user]\n")
		}, WantRel: []string{"<home>/.gitconfig"}},
		{Name: "gitconfig-dir", Setup: func(t *testing.T, e env) {
			mustMkdir(t, filepath.Join(e.home, ".gitconfig"))
		}, WantRel: nil},
		{Name: "gitconfig-symlink-to-file", Setup: func(t *testing.T, e env) {
			mustWrite(t, filepath.Join(e.home, "dotfiles", "gitconfig"), "[user]\n")
			mustSymlink(t, filepath.Join(e.home, "dotfiles", "gitconfig"), filepath.Join(e.home, ".gitconfig"))
		}, WantRel: []string{"<home>/.gitconfig"}},
		{Name: "gitconfig-symlink-to-dir", Setup: func(t *testing.T, e env) {
			mustMkdir(t, filepath.Join(e.home, "dotfiles"))
			mustSymlink(t, filepath.Join(e.home, "dotfiles"), filepath.Join(e.home, ".gitconfig"))
		}, WantRel: nil},
		{Name: "gitconfig-dangling-symlink", Setup: func(t *testing.T, e env) {
			mustSymlink(t, filepath.Join(e.home, "gone"), filepath.Join(e.home, ".gitconfig"))
		}, WantRel: nil},
		{Name: "default-xdg-file", Setup: func(t *testing.T, e env) {
			mustWrite(t, filepath.Join(e.home, ".config", "git", "config"), "[core]\n")
		}, WantRel: []string{"<home>/.config/git/config"}},
		{Name: "default-xdg-config-is-dir", Setup: func(t *testing.T, e env) {
			mustMkdir(t, filepath.Join(e.home, ".config", "git", "config"))
		}, WantRel: nil},
		{Name: "xdg-honoured", UseXDG: true, Setup: func(t *testing.T, e env) {
			mustWrite(t, filepath.Join(e.xdg, "git", "config"), "[core]\n")
			// With XDG_CONFIG_HOME set, ~/.config/git/config is not git's file.
			mustWrite(t, filepath.Join(e.home, ".config", "git", "config"), "[core]\n")
		}, WantRel: []string{"<xdg>/git/config"}},
		{Name: "both", UseXDG: true, Setup: func(t *testing.T, e env) {
			mustWrite(t, filepath.Join(e.xdg, "git", "config"), "[core]\n")
			mustWrite(t, filepath.Join(e.home, ".gitconfig"), "[user]\n")
		}, WantRel: []string{"<xdg>/git/config", "<home>/.gitconfig"}},
		{Name: "both-default-xdg", Setup: func(t *testing.T, e env) {
			mustWrite(t, filepath.Join(e.home, ".config", "git", "config"), "[core]\n")
			mustWrite(t, filepath.Join(e.home, ".gitconfig"), "[user]\n")
		}, WantRel: []string{"<home>/.config/git/config", "<home>/.gitconfig"}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			root := t.TempDir()
			e := env{home: filepath.Join(root, "home"), xdg: filepath.Join(root, "xdg")}
			mustMkdir(t, e.home)
			mustMkdir(t, e.xdg)
			tt.Setup(t, e)
			xdg := ""
			if tt.UseXDG {
				xdg = e.xdg
			}
			got := globalGitConfigFiles(e.home, xdg)
			var want []string
			for _, w := range tt.WantRel {
				want = append(want, strings.NewReplacer("<home>", e.home, "<xdg>", e.xdg).Replace(w))
			}
			if !slices.Equal(got, want) {
				t.Errorf("globalGitConfigFiles = %v, want %v", got, want)
			}
			// File-exact: never a directory, never HOME or ~/.config.
			for _, g := range got {
				if fi, err := os.Stat(g); err != nil || fi.IsDir() {
					t.Errorf("granted %s, which is not a file", g)
				}
			}
		})
	}
}

func TestGlobalGitConfigThroughResolve(t *testing.T) {
	f := newFixture(t)
	mustWrite(t, filepath.Join(f.home, ".gitconfig"), "[user]\n")
	mustMkdir(t, filepath.Join(f.home, ".config", "git", "config")) // a directory: refused
	p := f.resolve(t, ModeRestricted, NetworkOn, usableHost)
	if got, want := p.GlobalGitConfig(), []string{filepath.Join(f.home, ".gitconfig")}; !slices.Equal(got, want) {
		t.Errorf("GlobalGitConfig() = %v, want %v", got, want)
	}
	// A relative XDG_CONFIG_HOME is ignored, as git ignores it.
	s := f.spec(ModeRestricted, NetworkOn)
	s.Env = append(s.Env, "XDG_CONFIG_HOME=rel/conf")
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.GlobalGitConfig(), []string{filepath.Join(f.home, ".gitconfig")}; !slices.Equal(got, want) {
		t.Errorf("GlobalGitConfig() with a relative XDG_CONFIG_HOME = %v, want %v", got, want)
	}
	for _, d := range p.Denylist() {
		if strings.HasPrefix(d, "rel/") {
			t.Errorf("relative XDG_CONFIG_HOME leaked into the denylist: %s", d)
		}
	}
}

func TestDenylistXDGThroughResolve(t *testing.T) {
	f := newFixture(t)
	xdg := filepath.Join(f.root, "xdg")
	s := f.spec(ModeWorkspaceWrite, NetworkOn)
	s.Env = append(s.Env, "XDG_CONFIG_HOME="+xdg)
	p, err := Resolve(s, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(xdg, "evener"), filepath.Join(f.home, ".config", "evener")} {
		if !slices.Contains(p.Denylist(), want) {
			t.Errorf("Denylist() lacks %s", want)
		}
	}
}
