package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
)

// testEnv is a fake home, worktree and environment under t.TempDir.
type testEnv struct {
	root, home, wd string
	env            []string
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	root := t.TempDir()
	e := &testEnv{root: root, home: filepath.Join(root, "home"), wd: filepath.Join(root, "work")}
	for _, d := range []string{e.home, e.wd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.env = []string{"HOME=" + e.home, "PATH=/usr/bin:/bin"}
	return e
}

// expand replaces @ROOT@ and @HOME@ in s.
func (e *testEnv) expand(s string) string {
	return strings.NewReplacer("@ROOT@", e.root, "@HOME@", e.home).Replace(s)
}

func (e *testEnv) write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(e.expand(content)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (e *testEnv) globalPath() string {
	return filepath.Join(e.home, ".config", "evener-mcp", "config.toml")
}

func (e *testEnv) projectPath() string { return filepath.Join(e.wd, ".evener", "mcp.toml") }

type loadCase struct {
	name    string
	global  string   // global file content ("" = no file)
	configs []string // --config file contents, each in its own directory root/cfgN
	project string   // project file content ("" = no file)
	flags   Flags    // string paths may use @ROOT@ and @HOME@; Workdir defaults to the fake worktree
	setup   func(t *testing.T, e *testEnv)
	check   func(t *testing.T, e *testEnv, c *Config)

	WantErr      string   // substring of the one-line error; "" = success
	WantWarnings []string // substrings, one per warning, in order
}

func runCases(t *testing.T, cases []loadCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			if tc.global != "" {
				e.write(t, e.globalPath(), tc.global)
			}
			f := tc.flags
			f.Workdir = e.expand(f.Workdir)
			if f.Workdir == "" {
				f.Workdir = e.wd
			}
			f.StateDir = e.expand(f.StateDir)
			f.AddDirs = expandAll(e, f.AddDirs)
			f.Protect = expandAll(e, f.Protect)
			f.StateRW = expandAll(e, f.StateRW)
			var cfgs []string
			for i, content := range tc.configs {
				cfgs = append(cfgs, e.write(t, filepath.Join(e.root, "cfg"+string(rune('0'+i)), "config.toml"), content))
			}
			f.ConfigFiles = append(cfgs, expandAll(e, f.ConfigFiles)...)
			if tc.project != "" {
				e.write(t, e.projectPath(), tc.project)
			}
			if tc.setup != nil {
				tc.setup(t, e)
			}

			c, err := Load(f, e.env)
			if tc.WantErr != "" {
				if err == nil {
					t.Fatalf("Load succeeded, want error containing %q", tc.WantErr)
				}
				if !strings.Contains(err.Error(), e.expand(tc.WantErr)) {
					t.Fatalf("error %q does not contain %q", err, e.expand(tc.WantErr))
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(c.Warnings) != len(tc.WantWarnings) {
				t.Fatalf("warnings = %q, want %d matching %q", c.Warnings, len(tc.WantWarnings), tc.WantWarnings)
			}
			for i, w := range tc.WantWarnings {
				if !strings.Contains(c.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, c.Warnings[i], w)
				}
			}
			if tc.check != nil {
				tc.check(t, e, c)
			}
		})
	}
}

func expandAll(e *testEnv, s []string) []string {
	var out []string
	for _, v := range s {
		out = append(out, e.expand(v))
	}
	return out
}

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func equalSlice[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestDefaults(t *testing.T) {
	runCases(t, []loadCase{{
		name: "no files no flags",
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, "")
			equal(t, "explicit", c.Spec.ModeExplicit, false)
			equal(t, "network", c.Spec.Network, confine.NetworkOn)
			equal(t, "limits", c.Spec.Limits, confine.DefaultLimits)
			equal(t, "workdir", c.Spec.Workdir, e.wd)
			equal(t, "home", c.Spec.Home, e.home)
			equal(t, "scratch root", c.Spec.ScratchRoot, "")
			equalSlice(t, "env", c.Spec.Env, e.env)
			equal(t, "backend", c.Backend, "")
			equal(t, "shell timeout", c.ShellTimeout, 10*time.Minute)
			equal(t, "state dir", c.StateDir, filepath.Join(e.home, ".local", "state", "evener-mcp"))
			if c.Tools != nil || c.Hooks != nil || c.AllowDomains != nil || c.Sources != nil {
				t.Errorf("want no tools/hooks/domains/sources, got %+v", c)
			}
		},
	}, {
		name:  "state dir flag relative to cwd",
		flags: Flags{StateDir: "@ROOT@/state/../st"},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "state dir", c.StateDir, filepath.Join(e.root, "st"))
		},
	}, {
		name: "XDG directories",
		setup: func(t *testing.T, e *testEnv) {
			e.env = append(e.env, "XDG_CONFIG_HOME="+filepath.Join(e.root, "xc"), "XDG_STATE_HOME="+filepath.Join(e.root, "xs"))
			e.write(t, filepath.Join(e.root, "xc", "evener-mcp", "config.toml"), `sandbox = "restricted"`)
			e.write(t, e.globalPath(), `sandbox = "read-only"`) // shadowed by XDG_CONFIG_HOME
		},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeRestricted)
			equal(t, "state dir", c.StateDir, filepath.Join(e.root, "xs", "evener-mcp"))
			equalSlice(t, "sources", c.Sources, []string{filepath.Join(e.root, "xc", "evener-mcp", "config.toml")})
		},
	}, {
		name:   "relative XDG values are ignored",
		global: `sandbox = "read-only"`,
		setup:  func(t *testing.T, e *testEnv) { e.env = append(e.env, "XDG_CONFIG_HOME=rel", "XDG_STATE_HOME=rel") },
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeReadOnly)
			equal(t, "state dir", c.StateDir, filepath.Join(e.home, ".local", "state", "evener-mcp"))
		},
	}, {
		name:    "no HOME: no state dir default",
		setup:   func(t *testing.T, e *testEnv) { e.env = []string{"PATH=/bin"} },
		WantErr: "--state-dir: no default",
	}})
}

func TestWorkdirDefaultsToCwd(t *testing.T) {
	e := newTestEnv(t)
	t.Chdir(e.wd)
	c, err := Load(Flags{}, e.env)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "workdir", c.Spec.Workdir, e.wd)

	// Relative flags are taken from the current directory; symlinks are
	// left for confine to resolve.
	link := filepath.Join(e.root, "link")
	if err := os.Symlink(e.wd, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(e.root)
	c, err = Load(Flags{Workdir: "link", AddDirs: []string{"extra", "./extra/"}}, e.env)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "workdir", c.Spec.Workdir, link)
	equalSlice(t, "add dirs", c.Spec.AddDirs, []string{filepath.Join(e.root, "extra")})
}

func TestLayers(t *testing.T) {
	runCases(t, []loadCase{{
		name:    "later trusted layers override scalars",
		global:  "sandbox = \"read-only\"\nnetwork = \"off\"\nshell_timeout_ms = 1000\ntools = [\"shell\"]\n[limits]\nprocs = 10\nopen_files = 20",
		configs: []string{"sandbox = \"restricted\"\nshell_timeout_ms = 2000\n[limits]\nprocs = 99999", `network = "on"`},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeRestricted)
			equal(t, "explicit", c.Spec.ModeExplicit, true)
			equal(t, "network", c.Spec.Network, confine.NetworkOn)
			equal(t, "shell timeout", c.ShellTimeout, 2*time.Second)
			equalSlice(t, "tools", c.Tools, []string{"shell"})
			equal(t, "procs", c.Spec.Limits.Procs, 99999)
			equal(t, "open files", c.Spec.Limits.OpenFiles, 20)
			equal(t, "tmpfs", c.Spec.Limits.TmpfsBytes, confine.DefaultLimits.TmpfsBytes)
			equalSlice(t, "sources", c.Sources, []string{e.globalPath(),
				filepath.Join(e.root, "cfg0", "config.toml"), filepath.Join(e.root, "cfg1", "config.toml")})
		},
	}, {
		name:    "flags override files",
		global:  "sandbox = \"read-only\"\nnetwork = \"off\"\nbackend = \"microvm\"\ntools = [\"shell\"]",
		configs: []string{`sandbox = "restricted"`},
		flags:   Flags{Sandbox: "workspace-write", SandboxNet: "on", Backend: "native", Tools: "read_file,grep"},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeWorkspaceWrite)
			equal(t, "network", c.Spec.Network, confine.NetworkOn)
			equal(t, "backend", c.Backend, confine.BackendNative)
			equalSlice(t, "tools", c.Tools, []string{"read_file", "grep"})
		},
	}, {
		name: "lists accumulate in layer order without duplicates",
		global: `allow_domains = ["github.com"]
add_dirs = ["/srv/a"]
deny_paths = ["/srv/secret"]
env_passthrough = ["MY_VAR"]
[[hooks.PreToolUse]]
matcher = "shell"
command = "/opt/h/one"
`,
		configs: []string{`allow_domains = ["*.example.com", "github.com"]
add_dirs = ["/srv/b", "/srv/a"]
deny_paths = ["/srv/secret2"]
env_passthrough = ["OTHER", "MY_VAR"]
[[hooks.PreToolUse]]
matcher = "write_file|edit_file"
command = "/opt/h/two"
timeout_ms = 5000
[[hooks.SessionStart]]
command = "/opt/h/start"
`},
		flags: Flags{AllowDomains: []string{"127.0.0.1:8080", "api.*.example.org"}, AddDirs: []string{"/srv/c"}},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equalSlice(t, "allow", c.AllowDomains, []string{"github.com", "*.example.com", "127.0.0.1:8080", "api.*.example.org"})
			equalSlice(t, "add dirs", c.Spec.AddDirs, []string{"/srv/a", "/srv/b", "/srv/c"})
			equalSlice(t, "deny", c.Spec.ExtraDeny, []string{"/srv/secret", "/srv/secret2"})
			equalSlice(t, "env", c.EnvPassthrough, []string{"MY_VAR", "OTHER"})
			equalSlice(t, "PreToolUse", c.Hooks["PreToolUse"], []Hook{
				{Matcher: "shell", Command: "/opt/h/one"},
				{Matcher: "write_file|edit_file", Command: "/opt/h/two", TimeoutMs: 5000},
			})
			equalSlice(t, "SessionStart", c.Hooks["SessionStart"], []Hook{{Command: "/opt/h/start"}})
			if len(c.Hooks) != 2 {
				t.Errorf("hooks = %v, want two events", c.Hooks)
			}
			// Every trusted hook command, once: confine grants its directory.
			equalSlice(t, "hook grants", c.Spec.HookPaths, []string{"/opt/h/one", "/opt/h/start", "/opt/h/two"})
		},
	}, {
		name:    "relative paths in a --config file are resolved against its directory",
		configs: []string{"add_dirs = [\"cache\", \"../shared\"]\ndeny_paths = [\"keys/x\"]"},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equalSlice(t, "add dirs", c.Spec.AddDirs, []string{filepath.Join(e.root, "cfg0", "cache"), filepath.Join(e.root, "shared")})
			equalSlice(t, "deny", c.Spec.ExtraDeny, []string{filepath.Join(e.root, "cfg0", "keys", "x")})
		},
	}, {
		name:    "relative path in the global file is an error",
		global:  `add_dirs = ["cache"]`,
		WantErr: "config @HOME@/.config/evener-mcp/config.toml: add_dirs: cache: not an absolute path",
	}, {
		name: "~ expands to HOME",
		global: `add_dirs = ["~/shared"]
deny_paths = ["~/secret", "~"]
[[hooks.SessionEnd]]
command = "~/bin/hook"
`,
		flags: Flags{AddDirs: []string{"~/flagdir"}},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equalSlice(t, "add dirs", c.Spec.AddDirs, []string{filepath.Join(e.home, "shared"), filepath.Join(e.home, "flagdir")})
			equalSlice(t, "deny", c.Spec.ExtraDeny, []string{filepath.Join(e.home, "secret"), e.home})
			equal(t, "hook", c.Hooks["SessionEnd"][0].Command, filepath.Join(e.home, "bin", "hook"))
		},
	}, {
		name:    "~user is not expanded",
		configs: []string{`deny_paths = ["~bob/x"]`},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equalSlice(t, "deny", c.Spec.ExtraDeny, []string{filepath.Join(e.root, "cfg0", "~bob", "x")})
		},
	}, {
		name:    "missing global file is fine, missing --config is an error",
		flags:   Flags{ConfigFiles: []string{"@ROOT@/nope.toml"}},
		WantErr: "--config @ROOT@/nope.toml: no such file",
	}})
}

func TestBadValues(t *testing.T) {
	cfg := "config @ROOT@/cfg0/config.toml: "
	runCases(t, []loadCase{
		{name: "unknown key", configs: []string{"sandbox = \"off\"\nsandbox_mode = \"x\""}, WantErr: cfg + `unknown key "sandbox_mode"`},
		{name: "unknown limits key", configs: []string{"[limits]\nmemory = 1"}, WantErr: cfg + `unknown key "limits.memory"`},
		{name: "unknown hook key", configs: []string{"[[hooks.PreToolUse]]\ncommand = \"/x\"\nargs = []"}, WantErr: cfg + `unknown key "hooks.PreToolUse.args"`},
		{name: "unknown hook event", configs: []string{"[[hooks.PreTool]]\ncommand = \"/x\""}, WantErr: cfg + `hooks: unknown event "PreTool"`},
		{name: "toml syntax", configs: []string{"sandbox = "}, WantErr: cfg + "toml: line 1"},
		{name: "toml type", configs: []string{"sandbox = 3"}, WantErr: cfg + "toml: line 1"},
		{name: "file sandbox", configs: []string{`sandbox = "on"`}, WantErr: cfg + `sandbox: unknown sandbox mode "on"`},
		{name: "file network", configs: []string{`network = "proxy"`}, WantErr: cfg + `network: unknown value "proxy"`},
		{name: "file backend", configs: []string{`backend = "docker2"`}, WantErr: cfg + `backend: unknown sandbox backend "docker2"`},
		{name: "file backend empty", configs: []string{`backend = ""`}, WantErr: cfg + `backend: empty value`},
		{name: "file tools unknown", configs: []string{`tools = ["read_file", "bash"]`}, WantErr: cfg + `tools: unknown tool "bash" (known: read_file, write_file`},
		{name: "file tools empty", configs: []string{`tools = []`}, WantErr: cfg + `tools: empty tool list`},
		{name: "hook relative command", configs: []string{"[[hooks.PreToolUse]]\ncommand = \"check\""}, WantErr: cfg + "hooks.PreToolUse[0]: command: check: not an absolute path"},
		{name: "hook bad matcher", configs: []string{"[[hooks.PostToolUse]]\ncommand = \"/x\"\nmatcher = \"(shell\""}, WantErr: cfg + "hooks.PostToolUse[0]: matcher: error parsing regexp"},
		{name: "hook negative timeout", configs: []string{"[[hooks.PostToolUse]]\ncommand = \"/x\"\ntimeout_ms = -1"}, WantErr: cfg + "hooks.PostToolUse[0]: timeout_ms -1 is negative"},
		{name: "shell timeout zero", configs: []string{"shell_timeout_ms = 0"}, WantErr: cfg + "shell_timeout_ms: 0 is not positive"},
		{name: "limit zero", configs: []string{"[limits]\nprocs = 0"}, WantErr: cfg + "limits.procs: 0 is not positive"},
		{name: "env name", configs: []string{`env_passthrough = ["A=B"]`}, WantErr: cfg + `env_passthrough: "A=B" is not a variable name`},
		{name: "domain url in file", configs: []string{`allow_domains = ["https://github.com"]`}, WantErr: cfg + `allow_domains: "https://github.com": want a host pattern`},
		{name: "flag sandbox", flags: Flags{Sandbox: "strict"}, WantErr: `--sandbox: unknown sandbox mode "strict"`},
		{name: "flag network", flags: Flags{SandboxNet: "maybe"}, WantErr: `unknown --sandbox-net value "maybe"`},
		{name: "flag backend", flags: Flags{Backend: "firecracker"}, WantErr: `--sandbox-backend: unknown sandbox backend "firecracker"`},
		{name: "flag tools", flags: Flags{Tools: "read_file,run"}, WantErr: `--tools: unknown tool "run" (known: read_file, write_file, edit_file, apply_patch, glob, grep, list_dir, shell, memory_view, memory_write, memory_edit, memory_search, memory_delete, terminal_start, terminal_send, terminal_read, terminal_close, terminal_list)`},
		{name: "flag tools empty", flags: Flags{Tools: " , "}, WantErr: `--tools: empty tool list`},
		{name: "domain star", flags: Flags{AllowDomains: []string{"*"}}, WantErr: `--allow-domain: "*": too broad`},
		{name: "domain tld wildcard", flags: Flags{AllowDomains: []string{"*.com"}}, WantErr: `"*.com": too broad`},
		{name: "domain mid wildcard on tld", flags: Flags{AllowDomains: []string{"api.*.com"}}, WantErr: `"api.*.com": too broad`},
		{name: "domain tld wildcard with port", flags: Flags{AllowDomains: []string{"*.com:443"}}, WantErr: `too broad`},
		{name: "domain partial wildcard", flags: Flags{AllowDomains: []string{"git*.com"}}, WantErr: `a wildcard must be a whole label`},
		{name: "domain empty", flags: Flags{AllowDomains: []string{""}}, WantErr: `--allow-domain: empty pattern`},
		{name: "domain space", flags: Flags{AllowDomains: []string{"a b.com"}}, WantErr: `want a host pattern`},
		{name: "domain slash", flags: Flags{AllowDomains: []string{"github.com/org"}}, WantErr: `want a host pattern`},
		{name: "domain port", flags: Flags{AllowDomains: []string{"github.com:99999"}}, WantErr: `bad port "99999"`},
		{name: "domain empty label", flags: Flags{AllowDomains: []string{"github..com"}}, WantErr: `empty label`},
		{name: "add-dir empty", flags: Flags{AddDirs: []string{""}}, WantErr: `--add-dir: empty path`},
		{
			name: "good domains", flags: Flags{AllowDomains: []string{"localhost", "[::1]:3000", "::1", "github.com:22", "*.githubusercontent.com", "a.*.b.example.com"}},
			check: func(t *testing.T, e *testEnv, c *Config) { equal(t, "count", len(c.AllowDomains), 6) },
		},
		{
			name: "tools flag trims and dedupes", flags: Flags{Tools: "read_file, shell,read_file,"},
			check: func(t *testing.T, e *testEnv, c *Config) {
				equalSlice(t, "tools", c.Tools, []string{"read_file", "shell"})
			},
		},
	})
}

func TestBackend(t *testing.T) {
	runCases(t, []loadCase{{
		name:  "none with unset mode means off, explicitly",
		flags: Flags{Backend: "none"},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "backend", c.Backend, confine.BackendNone)
			equal(t, "mode", c.Spec.Mode, confine.ModeOff)
			equal(t, "explicit", c.Spec.ModeExplicit, true)
		},
	}, {
		name:  "none with explicit off",
		flags: Flags{Backend: "none", Sandbox: "off"},
		check: func(t *testing.T, e *testEnv, c *Config) { equal(t, "mode", c.Spec.Mode, confine.ModeOff) },
	}, {
		name:    "none with explicit read-only is an error",
		flags:   Flags{Backend: "none", Sandbox: "read-only"},
		WantErr: "--sandbox-backend: backend none means no sandbox, but sandbox read-only is set by --sandbox",
	}, {
		name:    "none from a file with a mode from another file",
		global:  `sandbox = "restricted"`,
		configs: []string{`backend = "none"`},
		WantErr: "@ROOT@/cfg0/config.toml: backend none means no sandbox, but sandbox restricted is set by @HOME@/.config/evener-mcp/config.toml",
	}, {
		name:    "none and a project file asking for a sandbox",
		flags:   Flags{Backend: "none"},
		project: `sandbox = "read-only"`,
		WantErr: "project file @ROOT@/work/.evener/mcp.toml: sandbox read-only needs a sandbox, but backend none is set by --sandbox-backend",
	}, {
		name:  "microvm is recorded, not judged here",
		flags: Flags{Backend: "microvm"},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "backend", c.Backend, confine.BackendMicrovm)
			equal(t, "mode", c.Spec.Mode, "")
			equal(t, "explicit", c.Spec.ModeExplicit, false)
		},
	}, {
		name:   "docker is native",
		global: `backend = "docker"`,
		check:  func(t *testing.T, e *testEnv, c *Config) { equal(t, "backend", c.Backend, confine.BackendNative) },
	}})
}

func TestProjectNarrows(t *testing.T) {
	proj := "project file @ROOT@/work/.evener/mcp.toml: "
	runCases(t, []loadCase{{
		name:   "narrowing is accepted",
		global: "sandbox = \"workspace-write\"\ntools = [\"read_file\", \"grep\", \"shell\"]\nshell_timeout_ms = 60000\n[limits]\nprocs = 100",
		project: `sandbox = "read-only"
network = "off"
tools = ["grep", "read_file"]
deny_paths = ["@ROOT@/work/secrets", "~/other"]
shell_timeout_ms = 30000
[limits]
procs = 50
tmpfs_bytes = 1024
`,
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeReadOnly)
			equal(t, "network", c.Spec.Network, confine.NetworkOff)
			equalSlice(t, "tools", c.Tools, []string{"grep", "read_file"})
			equalSlice(t, "deny", c.Spec.ExtraDeny, []string{filepath.Join(e.wd, "secrets"), filepath.Join(e.home, "other")})
			equal(t, "shell timeout", c.ShellTimeout, 30*time.Second)
			equal(t, "procs", c.Spec.Limits.Procs, 50)
			equal(t, "tmpfs", c.Spec.Limits.TmpfsBytes, 1024)
			equalSlice(t, "sources", c.Sources, []string{e.globalPath(), e.projectPath()})
		},
	}, {
		name:    "a project mode over the unset default is explicit",
		project: `sandbox = "restricted"`,
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeRestricted)
			equal(t, "explicit", c.Spec.ModeExplicit, true)
		},
	}, {
		name:    "off may narrow to anything",
		flags:   Flags{Sandbox: "off"},
		project: `sandbox = "restricted"`,
		check:   func(t *testing.T, e *testEnv, c *Config) { equal(t, "mode", c.Spec.Mode, confine.ModeRestricted) },
	}, {
		name:    "restating the trusted values is not widening",
		flags:   Flags{Sandbox: "read-only", SandboxNet: "on"},
		project: "sandbox = \"read-only\"\nnetwork = \"on\"\nshell_timeout_ms = 600000",
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, confine.ModeReadOnly)
			equal(t, "network", c.Spec.Network, confine.NetworkOn)
		},
	}, {
		name:    "workspace-write to off is refused",
		flags:   Flags{Sandbox: "workspace-write"},
		project: `sandbox = "off"`,
		WantErr: proj + "sandbox off would widen the trusted sandbox workspace-write; the project file may only narrow",
	}, {
		name:    "unset default to off is refused",
		project: `sandbox = "off"`,
		WantErr: proj + "sandbox off would widen the trusted sandbox workspace-write",
	}, {
		name:    "read-only to workspace-write is refused",
		global:  `sandbox = "read-only"`,
		project: `sandbox = "workspace-write"`,
		WantErr: proj + "sandbox workspace-write would widen the trusted sandbox read-only",
	}, {
		name:    "restricted to read-only is refused",
		flags:   Flags{Sandbox: "restricted"},
		project: `sandbox = "read-only"`,
		WantErr: proj + "sandbox read-only would widen the trusted sandbox restricted",
	}, {
		name:    "network off to on is refused",
		flags:   Flags{SandboxNet: "off"},
		project: `network = "on"`,
		WantErr: proj + "network on would widen the trusted network off",
	}, {
		name:    "a tool outside the trusted set is refused",
		flags:   Flags{Tools: "read_file"},
		project: `tools = ["read_file", "shell"]`,
		WantErr: proj + "tools: shell is not among the trusted tools",
	}, {
		name:    "a longer shell timeout is refused",
		project: `shell_timeout_ms = 600001`,
		WantErr: proj + "shell_timeout_ms: 600001 is above the trusted 600000",
	}, {
		name:    "a higher limit is refused",
		project: "[limits]\nopen_files = 70000",
		WantErr: proj + "limits.open_files: 70000 is above the trusted 65536",
	}, {
		name:    "a relative deny path is refused",
		project: `deny_paths = ["secrets"]`,
		WantErr: proj + "deny_paths: secrets: not an absolute path",
	}, {
		name:    "unknown keys are refused",
		project: `sandboxx = "read-only"`,
		WantErr: proj + `unknown key "sandboxx"`,
	}, {
		name:   "widening keys are ignored with warnings",
		global: `allow_domains = ["github.com"]`,
		project: `allow_domains = ["evil.example.com"]
add_dirs = ["/"]
env_passthrough = ["AWS_SECRET_ACCESS_KEY"]
backend = "none"
deny_paths = ["/srv/x"]
[[hooks.SessionStart]]
command = "/bin/sh"
`,
		WantWarnings: []string{
			".evener/mcp.toml: ignoring allow_domains: the project file may only narrow",
			".evener/mcp.toml: ignoring add_dirs: the project file may only narrow",
			".evener/mcp.toml: ignoring env_passthrough: the project file may only narrow",
			".evener/mcp.toml: ignoring backend: the project file may only narrow",
			".evener/mcp.toml: ignoring hooks: this file sits in the model's own write surface, and a hook runs a command (and is granted its directory) on the file's say-so; declare hooks in the global file or a --config file",
		},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equalSlice(t, "allow", c.AllowDomains, []string{"github.com"})
			equal(t, "add dirs", len(c.Spec.AddDirs), 0)
			equal(t, "env", len(c.EnvPassthrough), 0)
			equal(t, "backend", c.Backend, "")
			equal(t, "mode", c.Spec.Mode, "")
			equal(t, "hooks", len(c.Hooks), 0)
			equal(t, "hook grants", len(c.Spec.HookPaths), 0)
			equalSlice(t, "deny", c.Spec.ExtraDeny, []string{"/srv/x"})
		},
	}, {
		name: "a symlinked project file is ignored",
		setup: func(t *testing.T, e *testEnv) {
			target := e.write(t, filepath.Join(e.root, "elsewhere.toml"), `sandbox = "read-only"`)
			if err := os.MkdirAll(filepath.Dir(e.projectPath()), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, e.projectPath()); err != nil {
				t.Fatal(err)
			}
		},
		WantWarnings: []string{".evener/mcp.toml: ignored: it is a symlink (not followed)"},
		check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "mode", c.Spec.Mode, "")
			equal(t, "sources", len(c.Sources), 0)
		},
	}, {
		name: "a symlinked .evener directory is ignored",
		setup: func(t *testing.T, e *testEnv) {
			e.write(t, filepath.Join(e.root, "dir", "mcp.toml"), `sandbox = "read-only"`)
			if err := os.Symlink(filepath.Join(e.root, "dir"), filepath.Join(e.wd, ".evener")); err != nil {
				t.Fatal(err)
			}
		},
		WantWarnings: []string{".evener/mcp.toml: ignored: .evener is a symlink (not followed)"},
		check:        func(t *testing.T, e *testEnv, c *Config) { equal(t, "mode", c.Spec.Mode, "") },
	}, {
		name: "a FIFO project file does not hang start",
		setup: func(t *testing.T, e *testEnv) {
			if err := os.MkdirAll(filepath.Dir(e.projectPath()), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(e.projectPath(), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		WantWarnings: []string{".evener/mcp.toml: ignored: not a regular file"},
	}, {
		name: "a file named .evener is no project configuration",
		setup: func(t *testing.T, e *testEnv) {
			e.write(t, filepath.Join(e.wd, ".evener"), "x")
		},
	}})
}
