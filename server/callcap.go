package server

import (
	"fmt"
	"slices"

	"github.com/evener-dev/evener-mcp/config"
)

// spawningTools are the tools whose calls start processes. limits.procs
// binds each sandbox (RLIMIT_NPROC counts per user namespace, and every
// call has its own), so a session's processes are bounded only if its
// concurrent spawning calls are: at most max_concurrent_calls x procs.
var spawningTools = []string{"shell"}

// acquireCall admits one call of tool name, or refuses it at once (never
// waits) when the session already runs its limit of spawning calls.
func (s *Session) acquireCall(name string) (release func(), err error) {
	if !slices.Contains(spawningTools, name) {
		return func() {}, nil
	}
	max := config.DefaultMaxConcurrentCalls
	if s.o.Config != nil && s.o.Config.MaxConcurrentCalls > 0 {
		max = s.o.Config.MaxConcurrentCalls
	}
	if n := s.spawning.Add(1); n > int64(max) {
		s.spawning.Add(-1)
		return nil, fmt.Errorf("refused: this session already runs %d %s calls at once, its limit (max_concurrent_calls, which bounds the session's processes); wait for one to finish, then call again", max, name)
	}
	return func() { s.spawning.Add(-1) }, nil
}
