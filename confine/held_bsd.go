//go:build unix && !linux

package confine

import (
	"strings"

	"golang.org/x/sys/unix"
)

// openBeneath opens directory rel below dirfd one plain component at a
// time, each with O_NOFOLLOW|O_DIRECTORY (no openat2 here; rel holds no
// "..", so nothing escapes dirfd).
func openBeneath(dirfd int, rel string) (int, error) {
	cur := dirfd
	for _, c := range strings.Split(rel, "/") {
		fd, err := unix.Openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	if cur == dirfd {
		return unix.Dup(dirfd)
	}
	return cur, nil
}
