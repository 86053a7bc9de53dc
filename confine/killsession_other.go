//go:build !linux

package confine

import "syscall"

// killSession: outside Linux the session leader's process group is what is
// killed (a process that made a group of its own in that session stays).
func killSession(sid int) {
	if sid > 1 {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
	}
}
