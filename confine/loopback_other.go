//go:build !linux

package confine

import "errors"

// loopback is Linux-only: no network namespaces elsewhere.
type loopback struct{}

func (*loopback) close() {}

// LoopbackAvailable: only Linux gives a session a loopback of its own.
func (s *Launcher) LoopbackAvailable() error {
	return errors.New("a session loopback needs Linux network namespaces")
}

// RunLoopbackHold is Linux-only in this build.
func RunLoopbackHold(args []string) int { return RunRelay(nil) }
