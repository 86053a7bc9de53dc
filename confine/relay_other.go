//go:build !linux

package confine

import (
	"fmt"
	"os"
)

// RunRelay is Linux-only in this build.
func RunRelay(args []string) int {
	fmt.Fprintln(os.Stderr, "evener-mcp relay: not supported on this OS")
	return 125
}
