package confine

import (
	"fmt"
	"slices"
)

// Rehost is p against a host measured again, for a persisted session
// resumed by a later server (docs/http.md, "Sessions that survive a restart"):
// a mode other than off that the host can no longer enforce is refused
// (ErrUnenforceable), never degraded; the backend and cache strategy
// follow what the host offers now.
func (p *Policy) Rehost(h HostReport) (*Policy, error) {
	q := *p
	q.addDirs = slices.Clone(p.addDirs)
	q.deny = slices.Clone(p.deny)
	q.host = h
	if q.mode != ModeOff {
		if reason := h.Unusable(); reason != "" {
			return nil, fmt.Errorf("%w: --sandbox %s: %s", ErrUnenforceable, q.mode, reason)
		}
	}
	q.setBackend()
	return &q, nil
}
