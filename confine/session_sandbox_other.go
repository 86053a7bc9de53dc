//go:build !linux

package confine

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// sessionBoxes: session sandboxes are Linux-only in this build.
type sessionBoxes struct {
	server atomic.Bool // StartSpawner was called
}

func (s *Launcher) runSession(ctx context.Context, c Command, began time.Time) (Result, bool, error) {
	return Result{}, false, nil
}

func (s *Launcher) closeBoxes() {}

// RunSessionSpawner is Linux-only in this build.
func RunSessionSpawner(args []string) int {
	fmt.Fprintln(os.Stderr, "evener-mcp: session sandboxes are Linux-only")
	return 125
}

// RunSessionSlot is Linux-only in this build.
func RunSessionSlot(args []string) int { return RunSessionSpawner(args) }
