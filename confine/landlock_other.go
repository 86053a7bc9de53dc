//go:build !linux

package confine

import (
	"fmt"
	"os"
)

// RunLandlock is Linux-only (landlock_linux.go).
func RunLandlock(args []string) int {
	fmt.Fprintln(os.Stderr, "evener-mcp landlock: not supported on this OS")
	return 125
}
