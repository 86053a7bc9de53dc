//go:build unix

package pins

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lock takes the exclusive lock of key (flock on KEY.lock, made 0600 in
// the store's directory, which is made 0700), waiting for another holder.
func (s Store) lock(key string) (func(), error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway pins: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, key+".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("gateway pins: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gateway pins: lock %s: %w", key, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// inode is the file's inode number, 0 when unknown.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
