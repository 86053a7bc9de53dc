//go:build unix

package memory

import (
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on the root directory, shared
// by every server process on the host (two sessions of different servers
// editing one scope take turns, so an edit's check and its write see the
// same file and the caps count every write). The handle is opened without
// following a symlink and used for nothing but the lock.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the last handle releases the lock
}
