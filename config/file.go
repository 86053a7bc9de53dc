package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/evener-dev/evener-mcp/confine"
)

// layer is one decoded configuration file. Pointers and md.IsDefined tell a
// key that is absent from one set to its zero value.
type layer struct {
	Sandbox        *string               `toml:"sandbox"`
	Network        *string               `toml:"network"`
	Backend        *string               `toml:"backend"`
	AllowDomains   []string              `toml:"allow_domains"`
	AddDirs        []string              `toml:"add_dirs"`
	Tools          []string              `toml:"tools"`
	DenyPaths      []string              `toml:"deny_paths"`
	Protected      []string              `toml:"protected_paths"`
	StateRW        []string              `toml:"runner_state_dirs"`
	ShellTimeoutMs *int64                `toml:"shell_timeout_ms"`
	Memory         *bool                 `toml:"memory"`
	MaxCalls       *int64                `toml:"max_concurrent_calls"`
	EnvPassthrough []string              `toml:"env_passthrough"`
	Limits         fileLimits            `toml:"limits"`
	Terminals      fileTerminals         `toml:"terminals"`
	Hooks          map[string][]fileHook `toml:"hooks"`

	// SSHAgent is the [ssh_agent] table (sshagent.go); nil when absent.
	SSHAgent *fileSSHAgent `toml:"ssh_agent"`

	// MCPServers are the [mcp_servers.NAME] tables (mcpservers.go).
	MCPServers map[string]fileMCPServer `toml:"mcp_servers"`
	// ToolSearch is tool_search (Config.ToolSearch).
	ToolSearch *bool `toml:"tool_search"`

	md toml.MetaData
}

type fileLimits struct {
	TmpfsBytes *int64 `toml:"tmpfs_bytes"`
	FileBytes  *int64 `toml:"file_bytes"`
	DataBytes  *int64 `toml:"data_bytes"`
	Procs      *int64 `toml:"procs"`
	OpenFiles  *int64 `toml:"open_files"`
}

type fileHook struct {
	Matcher   string `toml:"matcher"`
	Command   string `toml:"command"`
	TimeoutMs int    `toml:"timeout_ms"`
}

// decode parses one file and rejects keys this version does not know.
func decode(data []byte) (*layer, error) {
	var l layer
	md, err := toml.Decode(string(data), &l)
	if err != nil {
		return nil, errors.New(strings.Join(strings.Fields(err.Error()), " "))
	}
	if u := md.Undecoded(); len(u) > 0 {
		keys := make([]string, len(u))
		for i, k := range u {
			keys[i] = fmt.Sprintf("%q", k.String())
		}
		return nil, fmt.Errorf("unknown key %s", strings.Join(keys, ", "))
	}
	l.md = md
	return &l, nil
}

func (l *layer) defined(key ...string) bool { return l.md.IsDefined(key...) }

// trustedFile reads and applies a global or --config file; base is the
// directory relative paths are resolved against ("" refuses them).
func (m *merger) trustedFile(path, base string, optional bool) error {
	data, err := os.ReadFile(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--config %s: no such file", path)
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	l, err := decode(data)
	if err == nil {
		err = m.trusted(l, path, base)
	}
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	m.c.Sources = append(m.c.Sources, path)
	return nil
}

// trusted merges one trusted file, named path: scalars override, lists
// accumulate.
func (m *merger) trusted(l *layer, path, base string) error {
	c := m.c
	if l.Sandbox != nil {
		mode, err := confine.ParseMode(*l.Sandbox)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		m.setMode(mode, path)
	}
	if l.Network != nil {
		n, err := parseNetwork(*l.Network)
		if err != nil {
			return err
		}
		c.Spec.Network = n
	}
	if l.Backend != nil {
		if *l.Backend == "" {
			return errors.New(`backend: empty value (want native, none or microvm)`)
		}
		b, err := confine.ParseBackend(*l.Backend)
		if err != nil {
			return fmt.Errorf("backend: %w", err)
		}
		c.Backend, m.backendSrc = b, path
	}
	for _, d := range l.AllowDomains {
		if err := checkDomain(d); err != nil {
			return fmt.Errorf("allow_domains: %w", err)
		}
		c.AllowDomains = appendNew(c.AllowDomains, d)
	}
	for _, d := range l.AddDirs {
		p, err := m.path(d, base)
		if err != nil {
			return fmt.Errorf("add_dirs: %w", err)
		}
		c.Spec.AddDirs = appendNew(c.Spec.AddDirs, p)
	}
	if err := m.denyPaths(l, base); err != nil {
		return err
	}
	if err := m.protectPaths(l, base, true); err != nil {
		return err
	}
	if l.defined("tools") {
		tools, err := parseTools(l.Tools)
		if err != nil {
			return fmt.Errorf("tools: %w", err)
		}
		c.Tools = tools
	}
	if l.ShellTimeoutMs != nil {
		d, err := shellTimeout(*l.ShellTimeoutMs)
		if err != nil {
			return err
		}
		c.ShellTimeout = d
	}
	if l.MaxCalls != nil {
		n, err := maxConcurrentCalls(*l.MaxCalls)
		if err != nil {
			return err
		}
		c.MaxConcurrentCalls = n
	}
	if err := l.Terminals.apply(&c.Terminals, false); err != nil {
		return err
	}
	if l.Memory != nil {
		c.Memory = *l.Memory
	}
	for _, name := range l.EnvPassthrough {
		if !envName.MatchString(name) {
			return fmt.Errorf("env_passthrough: %q is not a variable name", name)
		}
		c.EnvPassthrough = appendNew(c.EnvPassthrough, name)
	}
	if err := l.Limits.apply(&c.Spec.Limits, false); err != nil {
		return err
	}
	if err := m.mcpServers(l.MCPServers, path, base); err != nil {
		return err
	}
	if l.SSHAgent != nil {
		if err := m.sshAgent(l.SSHAgent, base); err != nil {
			return err
		}
	}
	if l.ToolSearch != nil {
		c.ToolSearch = l.ToolSearch
	}
	return m.hooks(l)
}

func (m *merger) denyPaths(l *layer, base string) error {
	for _, d := range l.DenyPaths {
		p, err := m.path(d, base)
		if err != nil {
			return fmt.Errorf("deny_paths: %w", err)
		}
		m.c.Spec.ExtraDeny = appendNew(m.c.Spec.ExtraDeny, p)
	}
	return nil
}

// hooks appends l's hooks in file order, per event, after validating all of
// them. Event names are visited in HookEvents order so errors are stable.
func (m *merger) hooks(l *layer) error {
	for ev := range l.Hooks {
		if !slices.Contains(HookEvents, ev) {
			return fmt.Errorf("hooks: unknown event %q (want %s)", ev, strings.Join(HookEvents, ", "))
		}
	}
	for _, ev := range HookEvents {
		for i, h := range l.Hooks[ev] {
			where := fmt.Sprintf("hooks.%s[%d]", ev, i)
			cmd, err := m.path(h.Command, "")
			if err != nil {
				return fmt.Errorf("%s: command: %w", where, err)
			}
			if _, err := regexp.Compile(h.Matcher); err != nil {
				return fmt.Errorf("%s: matcher: %w", where, err)
			}
			if h.TimeoutMs < 0 {
				return fmt.Errorf("%s: timeout_ms %d is negative", where, h.TimeoutMs)
			}
			if m.c.Hooks == nil {
				m.c.Hooks = make(map[string][]Hook)
			}
			m.c.Hooks[ev] = append(m.c.Hooks[ev], Hook{Matcher: h.Matcher, Command: cmd, TimeoutMs: h.TimeoutMs})
			// The directory holding it is granted read/exec to the
			// sandbox (confine judges it): derived from the trusted
			// configuration only, never from the project file.
			m.c.Spec.HookPaths = appendNew(m.c.Spec.HookPaths, cmd)
		}
	}
	return nil
}

// apply writes the limits l sets into dst. With lowerOnly (the project
// layer) a value above dst's is refused.
func (l fileLimits) apply(dst *confine.Limits, lowerOnly bool) error {
	for _, f := range []struct {
		key string
		v   *int64
		dst *int64
	}{
		{"tmpfs_bytes", l.TmpfsBytes, &dst.TmpfsBytes},
		{"file_bytes", l.FileBytes, &dst.FileBytes},
		{"data_bytes", l.DataBytes, &dst.DataBytes},
		{"procs", l.Procs, &dst.Procs},
		{"open_files", l.OpenFiles, &dst.OpenFiles},
	} {
		switch {
		case f.v == nil:
			continue
		case *f.v <= 0:
			return fmt.Errorf("limits.%s: %d is not positive", f.key, *f.v)
		case lowerOnly && *f.v > *f.dst:
			return fmt.Errorf("limits.%s: %d is above the trusted %d; the project file may only lower limits", f.key, *f.v, *f.dst)
		}
		*f.dst = *f.v
	}
	return nil
}

// MaxConcurrentCallsLimit is the largest max_concurrent_calls accepted.
const MaxConcurrentCallsLimit = 1024

func maxConcurrentCalls(n int64) (int, error) {
	if n <= 0 || n > MaxConcurrentCallsLimit {
		return 0, fmt.Errorf("max_concurrent_calls: %d is not between 1 and %d", n, MaxConcurrentCallsLimit)
	}
	return int(n), nil
}

func parseNetwork(s string) (confine.Network, error) {
	n, err := confine.ParseNetwork(s)
	if err != nil {
		return "", fmt.Errorf("network: unknown value %q (want on or off)", s)
	}
	return n, nil
}

func shellTimeout(ms int64) (time.Duration, error) {
	if ms <= 0 {
		return 0, fmt.Errorf("shell_timeout_ms: %d is not positive", ms)
	}
	if ms > int64(24*time.Hour/time.Millisecond) {
		return 0, fmt.Errorf("shell_timeout_ms: %d is more than a day", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
