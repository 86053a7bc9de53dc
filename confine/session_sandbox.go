package confine

import "os"

// SessionSandboxEnv names the opt-in to session sandboxes (experimental,
// Linux; docs/speed.md, "Session sandbox"): set to 1 in the server's
// environment, a session's eligible commands (sandboxed, no network, not a
// terminal's) start inside one sandbox built per session instead of a
// bubblewrap each.
const SessionSandboxEnv = "EVENER_MCP_SESSION_SANDBOX"

// The hidden subcommands of a session sandbox (session_sandbox_inside_linux.go).
const (
	SpawnerSubcommand = "__session-spawner"
	SlotSubcommand    = "__session-slot"
)

// sessionSandboxOn reports the opt-in, read at each call (a test sets it
// per server).
func sessionSandboxOn() bool { return os.Getenv(SessionSandboxEnv) == "1" }
