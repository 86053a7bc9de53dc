//go:build !linux

package confine

// The git sweep, the pins of nested repositories and the protected-in-git
// check are Linux-only (see gitsweep.go, gitprotect.go): no spawn is
// swept or checked, none pins a nested repository.

func nestedGitPins(roots []string) (dirs, links []string) { return nil, nil }

type sweepTicket struct{}

func (s *Launcher) sweepBegin() (*sweepTicket, error) { return nil, nil }
func (t *sweepTicket) end(res *Result)                {}
