//go:build !linux

package confine

import (
	"fmt"
	"os"
	"syscall"
)

// RunLandlock is Linux-only (landlock_linux.go).
func RunLandlock(args []string) int {
	fmt.Fprintln(os.Stderr, "evener-mcp landlock: not supported on this OS")
	return 125
}

// landlockProcAttr: no landlock backend here; never reached.
func landlockProcAttr(terminal bool) *syscall.SysProcAttr { return procAttr(false, terminal) }
