package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// pollableStdin is standard input read through the runtime's poller when
// it is a pipe or a socket (as an agent host connects it): a blocking read
// holds an OS thread and its scheduler slot while the client thinks, and
// every message then waits for the scheduler to take the slot back, which
// was a measurable share of a forwarded call (docs/gateway.md, "MCP servers behind
// evener-mcp"). A terminal, a file or anything else is read as it is. The
// returned func puts the descriptor back in blocking mode, for whoever
// shares it after this process.
func pollableStdin() (*os.File, func()) {
	var st unix.Stat_t
	if unix.Fstat(0, &st) != nil {
		return os.Stdin, func() {}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return os.Stdin, func() {}
	}
	if unix.SetNonblock(0, true) != nil {
		return os.Stdin, func() {}
	}
	return os.NewFile(0, "/dev/stdin"), func() { _ = unix.SetNonblock(0, false) }
}
