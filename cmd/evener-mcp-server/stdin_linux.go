package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// pollableStdin is standard input read through the runtime's poller when
// it is a pipe or a socket (as an agent host connects it): a blocking read
// holds an OS thread and its scheduler slot while the client thinks, and
// every message then waits for the scheduler to take the slot back, which
// was a measurable share of a forwarded call (README, "MCP servers behind
// evener-mcp", speed). A terminal, a file or anything else is read as it is.
func pollableStdin() *os.File {
	var st unix.Stat_t
	if unix.Fstat(0, &st) != nil {
		return os.Stdin
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return os.Stdin
	}
	if unix.SetNonblock(0, true) != nil {
		return os.Stdin
	}
	return os.NewFile(0, "/dev/stdin")
}
