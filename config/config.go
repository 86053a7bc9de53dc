// Package config resolves evener-mcp's layered configuration, once at start,
// into a confine.Spec plus the rest of what the server needs. It never probes
// the host and never builds the policy: cmd hands Config.Spec to
// confine.Resolve.
//
// # Layers
//
// Layers are applied in this order:
//
//  1. embedded defaults (network on, confine.DefaultLimits, a 10 minute
//     shell timeout, every tool, the mode left unset so that only it may
//     degrade);
//  2. the user's global file,
//     ${XDG_CONFIG_HOME:-$HOME/.config}/evener-mcp/config.toml (may be absent);
//  3. each --config file, in order (must exist; relative paths in it are
//     resolved against its directory);
//  4. the command-line flags.
//
// These are trusted: a later layer overrides scalars (sandbox, network,
// backend, tools, shell_timeout_ms, limits) and appends to lists
// (allow_domains, add_dirs, deny_paths, env_passthrough, hooks). Each hook
// command of a trusted layer is also listed in Spec.HookPaths, from which
// confine derives the read/exec grant on its directory.
//
// Last comes the project file <workdir>/.evener/mcp.toml. It sits inside the
// model's own write surface (docs/reference.md, "Command line": configuration layers),
// so it is untrusted and may only narrow: a stricter sandbox mode, network
// off, fewer tools, more deny_paths, a shorter shell timeout, lower limits.
// Asking for more than the trusted layers grant is an error, so the server
// refuses to start rather than run differently than the project asked. Keys
// that could only widen (allow_domains, add_dirs, hooks, ssh_agent, env_passthrough,
// backend) are ignored with a warning. A project file or .evener directory
// that is a symlink is ignored with a warning and never followed.
package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
)

// Flags are the command-line values shared by every subcommand, as parsed by
// cmd (which owns the flag.FlagSet).
type Flags struct {
	Workdir      string   // --workdir
	Sandbox      string   // --sandbox ("" = unset)
	SandboxNet   string   // --sandbox-net ("" = unset)
	Backend      string   // --sandbox-backend (native|none|microvm, "" = unset)
	AllowDomains []string // --allow-domain (repeatable)
	AddDirs      []string // --add-dir (repeatable)
	Tools        string   // --tools comma list ("" = all)
	ConfigFiles  []string // --config (repeatable)
	StateDir     string   // --state-dir
	// MaxConcurrentCalls is --max-concurrent-calls (0 = unset).
	MaxConcurrentCalls int
	// Terminals are --max-terminals, --terminal-scrollback and
	// --terminal-idle (zero fields unset).
	Terminals TerminalLimits
	// DisableMemory is --disable-memory: no memory tools, no memory guidance.
	DisableMemory bool
	// MCPConfigs are --mcp-config files (repeatable): {"mcpServers": {...}}.
	MCPConfigs []string
	// Protect are --protect paths (repeatable): never writable in a
	// sandboxed mode.
	Protect []string
	// StateRW are --state-rw directories (repeatable): an agent host's own
	// state, writable in every sandboxed mode.
	StateRW []string
	// SSHAgent are --ssh-agent keys (repeatable): fingerprints or
	// public-key files the session's brokered agent offers for logins and
	// signing (docs/ssh-agent.md).
	SSHAgent []string
}

// Config is the fully resolved configuration: the confine.Spec plus
// everything the server needs.
type Config struct {
	Spec confine.Spec
	// Backend is the explicit backend request, "" when unset.
	Backend confine.Backend
	// AllowDomains come from the trusted layers and flags; the embedded
	// baseline is applied later by egress, not here.
	AllowDomains []string
	// Tools is nil for every tool; otherwise a subset of KnownTools.
	Tools    []string
	StateDir string
	// Hooks by event (SessionStart, PreToolUse, PostToolUse, SessionEnd),
	// from trusted layers only.
	Hooks map[string][]Hook
	// ShellTimeout is the longest a shell call may run (and its default).
	ShellTimeout time.Duration
	// EnvPassthrough are extra variable names a trusted layer lets through
	// the environment floor.
	EnvPassthrough []string
	// MaxConcurrentCalls bounds the process-spawning calls (shell) one
	// session runs at once: limits.procs binds each sandbox, so this bounds
	// a session's processes at MaxConcurrentCalls x procs.
	MaxConcurrentCalls int
	// Terminals bound each session's terminals (zero fields: defaults).
	Terminals TerminalLimits
	// Memory publishes the memory tools and their guidance (docs/memory.md,
	// "Memory"); false by --disable-memory or memory = false (which the
	// project file may set, never unset).
	Memory bool
	// SSHAgent is the brokered per-session SSH agent (docs/ssh-agent.md),
	// nil when no trusted layer asks for one.
	SSHAgent *SSHAgent
	// MCPServers are the user's stdio MCP servers run behind evener-mcp,
	// from trusted layers only, in the order declared.
	MCPServers []MCPServer
	// ToolSearch is tool_search: true, every MCP server's tools are found
	// with find_tools rather than listed, false none, nil (the default)
	// when they would add more than the server's threshold to every
	// tools/list; a server's own tool_search wins (docs/gateway.md, "Tool
	// search").
	ToolSearch *bool
	// Warnings are one-line notices to print at start.
	Warnings []string
	// Sources are the files that were read, in order.
	Sources []string
}

// Hook is one configured hook command.
type Hook struct {
	Matcher   string // regular expression over tool names
	Command   string // absolute path
	TimeoutMs int    // 0 = the hooks package's default
}

// KnownTools are the tools the server can publish.
var KnownTools = []string{"read_file", "write_file", "edit_file", "apply_patch", "glob", "grep", "list_dir", "shell",
	"memory_view", "memory_write", "memory_edit", "memory_search", "memory_delete",
	"terminal_start", "terminal_send", "terminal_read", "terminal_close", "terminal_list"}

// HookEvents are the hook event names a configuration file may use.
var HookEvents = []string{"SessionStart", "PreToolUse", "PostToolUse", "SessionEnd"}

// DefaultShellTimeout is the embedded default of Config.ShellTimeout.
const DefaultShellTimeout = 10 * time.Minute

// DefaultMaxConcurrentCalls is the embedded default of
// Config.MaxConcurrentCalls: with the default limits.procs (1024), one
// session holds at most 8192 processes, a quarter of a typical pid_max
// (32768).
const DefaultMaxConcurrentCalls = 8

// ProjectFile is the project layer's path relative to the workdir.
const ProjectFile = ".evener/mcp.toml"

// Load resolves the layers: embedded defaults, the user's global file
// ${XDG_CONFIG_HOME:-$HOME/.config}/evener-mcp/config.toml, then each
// --config file in order, then flags (all trusted); then the untrusted
// project file <workdir>/.evener/mcp.toml, which may only narrow. env is in
// os.Environ form. Every error is one line naming the file or flag at fault.
func Load(f Flags, env []string) (*Config, error) {
	home := absEnv(env, "HOME")
	c := &Config{
		Spec: confine.Spec{
			Network: confine.NetworkOn,
			Limits:  confine.DefaultLimits,
			Env:     slices.Clone(env),
			Home:    lookupEnv(env, "HOME"),
		},
		ShellTimeout:       DefaultShellTimeout,
		MaxConcurrentCalls: DefaultMaxConcurrentCalls,
		Memory:             true,
	}
	m := &merger{c: c, home: home}

	wd, err := absFromCwd(f.Workdir)
	if err != nil {
		return nil, fmt.Errorf("--workdir: %w", err)
	}
	c.Spec.Workdir = wd

	if dir := xdgDir(env, "XDG_CONFIG_HOME", home, ".config"); dir != "" {
		path := filepath.Join(dir, "evener-mcp", "config.toml")
		if err := m.trustedFile(path, "", true); err != nil {
			return nil, err
		}
	}
	for _, p := range f.ConfigFiles {
		path, err := absFromCwd(p)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", p, err)
		}
		if err := m.trustedFile(path, filepath.Dir(path), false); err != nil {
			return nil, err
		}
	}
	if err := m.flags(f); err != nil {
		return nil, err
	}
	if err := m.sshAgentDefaults(env); err != nil {
		return nil, err
	}
	if err := m.backendNone(); err != nil {
		return nil, err
	}
	if err := m.projectFile(); err != nil {
		return nil, err
	}

	c.StateDir, err = stateDir(f.StateDir, env, home)
	if err != nil {
		return nil, err
	}
	// The state directory holds every session's audit log (command lines,
	// tokens in them included): masked for both layers wherever it is
	// (--state-dir, a relocated XDG_STATE_HOME), not only at the default
	// location the credential denylist names (docs/security.md, "What is enforced").
	c.Spec.StateDir = c.StateDir
	return c, nil
}

// merger folds layers into c, remembering who set the mode and the backend
// so that conflicts name their sources.
type merger struct {
	c          *Config
	home       string // absolute HOME, or ""
	modeSrc    string
	backendSrc string
}

// flags applies the command line, the last trusted layer.
func (m *merger) flags(f Flags) error {
	c := m.c
	if f.DisableMemory {
		c.Memory = false
	}
	if f.Sandbox != "" {
		mode, err := confine.ParseMode(f.Sandbox)
		if err != nil {
			return fmt.Errorf("--sandbox: %w", err)
		}
		m.setMode(mode, "--sandbox")
	}
	if f.SandboxNet != "" {
		n, err := confine.ParseNetwork(f.SandboxNet)
		if err != nil {
			return err // already names --sandbox-net
		}
		c.Spec.Network = n
	}
	if f.Backend != "" {
		b, err := confine.ParseBackend(f.Backend)
		if err != nil {
			return fmt.Errorf("--sandbox-backend: %w", err)
		}
		c.Backend, m.backendSrc = b, "--sandbox-backend"
	}
	for _, d := range f.AllowDomains {
		if err := checkDomain(d); err != nil {
			return fmt.Errorf("--allow-domain: %w", err)
		}
		c.AllowDomains = appendNew(c.AllowDomains, d)
	}
	for _, d := range f.AddDirs {
		p, err := m.path(d, ".")
		if err != nil {
			return fmt.Errorf("--add-dir: %w", err)
		}
		c.Spec.AddDirs = appendNew(c.Spec.AddDirs, p)
	}
	if err := m.protectFlags(f); err != nil {
		return err
	}
	if err := m.sshAgentFlags(f.SSHAgent); err != nil {
		return err
	}
	if f.Tools != "" {
		tools, err := parseTools(strings.Split(f.Tools, ","))
		if err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
		c.Tools = tools
	}
	for _, p := range f.MCPConfigs {
		path, err := absFromCwd(p)
		if err != nil {
			return fmt.Errorf("--mcp-config %s: %w", p, err)
		}
		if err := m.mcpConfigFile(path); err != nil {
			return err
		}
	}
	if err := checkTerminalLimits(f.Terminals, [3]string{"--max-terminals", "--terminal-scrollback", "--terminal-idle"}); err != nil {
		return err
	}
	if f.Terminals.Max != 0 {
		c.Terminals.Max = f.Terminals.Max
	}
	if f.Terminals.Scrollback != 0 {
		c.Terminals.Scrollback = f.Terminals.Scrollback
	}
	if f.Terminals.Idle != 0 {
		c.Terminals.Idle = f.Terminals.Idle
	}
	if f.MaxConcurrentCalls != 0 {
		n, err := maxConcurrentCalls(int64(f.MaxConcurrentCalls))
		if err != nil {
			return fmt.Errorf("--max-concurrent-calls: %d is not between 1 and %d", f.MaxConcurrentCalls, MaxConcurrentCallsLimit)
		}
		c.MaxConcurrentCalls = n
	}
	return nil
}

func (m *merger) setMode(mode confine.Mode, src string) {
	m.c.Spec.Mode, m.c.Spec.ModeExplicit, m.modeSrc = mode, true, src
}

// backendNone applies "backend none is --sandbox off" once the trusted
// layers are merged.
func (m *merger) backendNone() error {
	s := &m.c.Spec
	if m.c.Backend != confine.BackendNone {
		return nil
	}
	switch s.Mode {
	case "":
		m.setMode(confine.ModeOff, m.backendSrc)
	case confine.ModeOff:
	default:
		return fmt.Errorf("%s: backend none means no sandbox, but sandbox %s is set by %s", m.backendSrc, s.Mode, m.modeSrc)
	}
	return nil
}

// path expands a leading ~ against HOME and makes p absolute against base;
// with base "" a relative path is an error, with base "." it is taken from
// the current directory.
func (m *merger) path(p, base string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if m.home == "" {
			return "", fmt.Errorf("%s: HOME is unset or relative", p)
		}
		p = filepath.Join(m.home, p[1:])
	}
	switch {
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	case base == ".":
		return absFromCwd(p)
	case base != "":
		return filepath.Join(base, p), nil
	}
	return "", fmt.Errorf("%s: not an absolute path", p)
}

func stateDir(flag string, env []string, home string) (string, error) {
	if flag != "" {
		d, err := absFromCwd(flag)
		if err != nil {
			return "", fmt.Errorf("--state-dir: %w", err)
		}
		return d, nil
	}
	if dir := xdgDir(env, "XDG_STATE_HOME", home, filepath.Join(".local", "state")); dir != "" {
		return filepath.Join(dir, "evener-mcp"), nil
	}
	return "", errors.New("--state-dir: no default: HOME and XDG_STATE_HOME are both unset or relative")
}

// xdgDir is $key when absolute (the XDG spec ignores relative values), else
// home/fallback, else "".
func xdgDir(env []string, key, home, fallback string) string {
	if d := absEnv(env, key); d != "" {
		return d
	}
	if home != "" {
		return filepath.Join(home, fallback)
	}
	return ""
}

// absFromCwd is filepath.Abs that also defaults "" to the current directory.
// It does not resolve symlinks: confine does, race-safely.
func absFromCwd(p string) (string, error) {
	if p == "" {
		p = "."
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return a, nil
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func absEnv(env []string, key string) string {
	if v := lookupEnv(env, key); filepath.IsAbs(v) {
		return filepath.Clean(v)
	}
	return ""
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
