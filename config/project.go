package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/evener-dev/evener-mcp/confine"
)

// maxProjectFile bounds what is read from the untrusted project file.
const maxProjectFile = 1 << 20

// projectFile applies <workdir>/.evener/mcp.toml, which may only narrow.
func (m *merger) projectFile() error {
	c := m.c
	path := filepath.Join(c.Spec.Workdir, ProjectFile)
	data, warn, err := readProject(c.Spec.Workdir)
	if warn != "" {
		c.Warnings = append(c.Warnings, ProjectFile+": "+warn)
	}
	if err != nil {
		return fmt.Errorf("project file %s: %w", path, err)
	}
	if data == nil {
		return nil
	}
	l, err := decode(data)
	if err == nil {
		err = m.project(l, path)
	}
	if err != nil {
		return fmt.Errorf("project file %s: %w", path, err)
	}
	c.Sources = append(c.Sources, path)
	return nil
}

// project narrows the trusted result with l. Keys that could only widen are
// ignored with a warning; a value that would widen is an error, so the
// server refuses to start instead of running looser than the project asked.
func (m *merger) project(l *layer, path string) error {
	c := m.c
	for _, key := range []string{"allow_domains", "add_dirs", "env_passthrough", "backend", "runner_state_dirs"} {
		if l.defined(key) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: ignoring %s: the project file may only narrow", ProjectFile, key))
		}
	}
	if l.defined("hooks") {
		c.Warnings = append(c.Warnings, ProjectFile+": ignoring hooks: this file sits in the model's own write surface,"+
			" and a hook runs a command (and is granted its directory) on the file's say-so; declare hooks in the global file or a --config file")
	}
	if l.defined("ssh_agent") {
		c.Warnings = append(c.Warnings, ProjectFile+": ignoring ssh_agent: this file sits in the model's own write surface,"+
			" and the agent signs with the user's keys on the file's say-so; declare it in the global file or a --config file")
	}
	if l.defined("mcp_servers") {
		c.Warnings = append(c.Warnings, ProjectFile+": ignoring mcp_servers: this file sits in the model's own write surface,"+
			" and a server runs a program (and is granted its directories) on the file's say-so; declare servers in the global file, a --config file or an --mcp-config file")
	}
	if l.defined("tool_search") {
		c.Warnings = append(c.Warnings, ProjectFile+": ignoring tool_search: how the MCP servers' tools reach the model is decided where the servers are declared (the global file, a --config file)")
	}
	if l.Sandbox != nil {
		mode, err := confine.ParseMode(*l.Sandbox)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		base := c.Spec.Mode
		if base == "" {
			base = confine.ModeWorkspaceWrite // the unset default
		}
		if !mode.NoWiderThan(base) {
			return fmt.Errorf("sandbox %s would widen the trusted sandbox %s; the project file may only narrow", mode, base)
		}
		if c.Backend == confine.BackendNone && mode != confine.ModeOff {
			return fmt.Errorf("sandbox %s needs a sandbox, but backend none is set by %s", mode, m.backendSrc)
		}
		m.setMode(mode, path)
	}
	if l.Network != nil {
		n, err := parseNetwork(*l.Network)
		if err != nil {
			return err
		}
		if n == confine.NetworkOn && c.Spec.Network == confine.NetworkOff {
			return errors.New("network on would widen the trusted network off; the project file may only narrow")
		}
		c.Spec.Network = n
	}
	if l.defined("tools") {
		tools, err := parseTools(l.Tools)
		if err != nil {
			return fmt.Errorf("tools: %w", err)
		}
		trusted := c.Tools
		if trusted == nil {
			trusted = KnownTools
		}
		for _, t := range tools {
			if !slices.Contains(trusted, t) {
				return fmt.Errorf("tools: %s is not among the trusted tools; the project file may only drop tools", t)
			}
		}
		c.Tools = tools
	}
	if err := m.denyPaths(l, ""); err != nil {
		return err
	}
	// Relative protected paths are relative to the worktree; the project
	// may add protected paths, never remove one.
	if err := m.protectPaths(l, c.Spec.Workdir, false); err != nil {
		return err
	}
	if l.ShellTimeoutMs != nil {
		d, err := shellTimeout(*l.ShellTimeoutMs)
		if err != nil {
			return err
		}
		if d > c.ShellTimeout {
			return fmt.Errorf("shell_timeout_ms: %d is above the trusted %d; the project file may only shorten it", *l.ShellTimeoutMs, c.ShellTimeout.Milliseconds())
		}
		c.ShellTimeout = d
	}
	if l.MaxCalls != nil {
		n, err := maxConcurrentCalls(*l.MaxCalls)
		if err != nil {
			return err
		}
		if n > c.MaxConcurrentCalls {
			return fmt.Errorf("max_concurrent_calls: %d is above the trusted %d; the project file may only lower it", n, c.MaxConcurrentCalls)
		}
		c.MaxConcurrentCalls = n
	}
	if err := l.Terminals.apply(&c.Terminals, true); err != nil {
		return err
	}
	if l.Memory != nil {
		if *l.Memory && !c.Memory {
			return errors.New("memory = true would turn on the memory the trusted layers turned off; the project file may only turn it off")
		}
		c.Memory = *l.Memory
	}
	return l.Limits.apply(&c.Spec.Limits, true)
}

// readProject reads <workdir>/.evener/mcp.toml through directory handles
// that refuse symlinks at both components, so the model cannot point the
// server at a file elsewhere, nor swap one in between a check and the read.
// It returns nil data when there is no project file, and a warning when
// there is one but it is ignored.
func readProject(workdir string) (data []byte, warning string, err error) {
	dir := filepath.Join(workdir, ".evener")
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		return nil, "", nil
	case err == unix.ELOOP || err == unix.ENOTDIR:
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, "ignored: .evener is a symlink (not followed)", nil
		}
		return nil, "", nil // a file named .evener: no project configuration
	case err != nil:
		return nil, "", &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)

	// O_NONBLOCK: a FIFO planted here must not hang the server at start.
	fd, err := unix.Openat(dfd, "mcp.toml", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		return nil, "", nil
	case err == unix.ELOOP:
		return nil, "ignored: it is a symlink (not followed)", nil
	case err != nil:
		return nil, "", err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, "mcp.toml"))
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !fi.Mode().IsRegular() {
		return nil, "ignored: not a regular file", nil
	}
	data, err = io.ReadAll(io.LimitReader(f, maxProjectFile+1))
	if err != nil {
		return nil, "", err
	}
	if len(data) > maxProjectFile {
		return nil, "", fmt.Errorf("larger than %d bytes", maxProjectFile)
	}
	return data, "", nil
}
