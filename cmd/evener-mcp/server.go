package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
)

// ServerBinary is the MCP server, installed beside evener-mcp. It is a
// binary of its own because the MCP library links a JSON Schema package
// whose initialisation costs about 6 ms at every start: evener-mcp stays
// small for `exec`, `probe` and the in-sandbox egress relay, and hands the
// MCP modes to the server with execve (same process, same stdio).
const ServerBinary = "evener-mcp-server"

// execServer execs the server binary with args, its environment being this
// one plus extraEnv (what DropBeforeExec returned).
func execServer(args, extraEnv []string) int {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: locate %s: %v\n", ServerBinary, err)
		return cli.ExitUsage
	}
	path := filepath.Join(filepath.Dir(self), ServerBinary)
	env := append(os.Environ(), extraEnv...)
	if err := syscall.Exec(path, append([]string{path}, args...), env); err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: the MCP server %s must be installed beside evener-mcp (scripts/run.sh builds both): %v\n", path, err)
		return cli.ExitUsage
	}
	return 0
}
