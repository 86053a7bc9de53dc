package confine

import (
	"errors"
	"io"
	"time"
)

// ErrSandboxSetup means bubblewrap could not build the sandbox; the command
// did not run.
var ErrSandboxSetup = errors.New("sandbox setup failed")

// Command is one process to start under the session's policy.
type Command struct {
	Args []string
	// Dir is the working directory, absolute or relative to the worktree.
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Timeout kills the whole process tree when it expires (0: none).
	Timeout time.Duration
	// Env sets further variables (trusted callers only: hooks, tools).
	Env map[string]string
	// OnStart, if set, runs once the sandbox exists and before the command
	// is released into it (for a mode-off command: just before it starts).
	OnStart func()
	// Network, when NetworkOff or NetworkHost, replaces the session's
	// network for this one command (docs/gateway.md, "MCP servers behind
	// evener-mcp"): NetworkHost keeps the host's network (no namespace of
	// its own, no relay; Linux). "" is the session's.
	Network Network
	// Terminal says Stdin is a pseudo-terminal the command takes as its
	// controlling terminal (docs/terminals.md, "Terminals"): its sandbox keeps the
	// session it starts (no --new-session) so job control and ^C work.
	Terminal bool
}

// NetworkHost is a Command's choice of the host's network.
const NetworkHost Network = "host"

// Result is how a command ended.
type Result struct {
	ExitCode int
	Signal   string
	TimedOut bool
	Duration time.Duration
	// Quarantined lists what the git sweep set aside after the command:
	// repositories and .git entries it left or changed, each as a
	// worktree-relative path and what was renamed (docs/security.md, "Git"). Empty
	// when nothing was.
	Quarantined []string
	// GitProtected lists what the protected-in-git check set back after
	// the command: a ref, HEAD or index entry it moved that changed a
	// protected path in git (docs/protected-paths.md, "Protected paths and runner state";
	// Linux). Empty when nothing was.
	GitProtected []GitProtected
}

// GitProtected is one protected path the command changed through git.
type GitProtected struct {
	// Path is the protected path, relative to the worktree ("" when the
	// check itself failed).
	Path string
	// What says what changed and what was done about it, naming refs and
	// worktree-relative paths only.
	What string
}

// Prepared is a fully resolved spawn: what will run and with what view.
type Prepared struct {
	Path      string
	Args      []string
	Env       []string
	Dir       string
	Plan      MountPlan // bubblewrap's mounts (Linux)
	Profile   string    // the Seatbelt profile (macOS)
	Sandboxed bool
	// optsAt, when set, is where bubblewrap's options lie in Args: the
	// backend passes them through a pipe instead, so the process limit is
	// set on bubblewrap before it reads them (Linux, loopback_linux.go).
	optsAt [2]int
	// landlock: a landlock-backend spawn (landlock_backend_linux.go), a
	// plain process that leads a session of its own, killed with it.
	landlock bool
	// after, when set, runs once the command and its session are gone;
	// what it returns joins Result.Quarantined (landlock_backend_linux.go).
	after func() []string
}
