//go:build !linux

package confine

// The git sweep and the pins of nested repositories are Linux-only (see
// gitsweep.go): no spawn is swept, none pins a nested repository.

func nestedGitPins(roots []string) (dirs, links []string) { return nil, nil }

type sweepTicket struct{}

func (s *Launcher) sweepBegin() (*sweepTicket, error) { return nil, nil }
func (t *sweepTicket) end() []string                  { return nil }
