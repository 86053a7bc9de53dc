//go:build linux

package confine

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Chmod sets the mode of name in d without following a link: name is
// opened O_PATH|O_NOFOLLOW and the inode it names is changed through its
// descriptor (fchmodat would follow a link swapped in meanwhile); a
// symbolic link is refused.
func (d *HeldDir) Chmod(name string, mode uint32) error {
	if !validChildName(name) {
		return fmt.Errorf("%q: not a plain name", name)
	}
	fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "chmod", Path: filepath.Join(d.path, name), Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "chmod", Path: filepath.Join(d.path, name), Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return &os.PathError{Op: "chmod", Path: filepath.Join(d.path, name), Err: unix.ELOOP}
	}
	return chmodFD(fd, mode)
}
