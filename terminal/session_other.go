//go:build !linux

package terminal

import "os"

// ttySession: not looked up outside Linux.
func ttySession(master *os.File) int { return 0 }

// killSession: outside Linux the process group the launcher kills is all
// that ends with a terminal.
func killSession(sid int) {}
