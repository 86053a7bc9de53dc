package confine

import "os"

// SessionSandboxEnv names the switch of session sandboxes (Linux;
// docs/speed.md, "Session sandbox"): on by default, a server session's
// eligible commands (sandboxed, network off or through the session's
// proxies, not a terminal's) start inside one sandbox built per session
// instead of a bubblewrap each; set to 0 in the server's environment, every
// command gets a bubblewrap of its own, as before.
const SessionSandboxEnv = "EVENER_MCP_SESSION_SANDBOX"

// The hidden subcommands of a session sandbox (session_sandbox_inside_linux.go).
const (
	SpawnerSubcommand = "__session-spawner"
	SlotSubcommand    = "__session-slot"
)

// sessionSandboxOn reports the switch, read at each call (a test sets it
// per server).
func sessionSandboxOn() bool { return os.Getenv(SessionSandboxEnv) != "0" }
