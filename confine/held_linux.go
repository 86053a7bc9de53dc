package confine

import "golang.org/x/sys/unix"

// openBeneath opens directory rel below dirfd with the kernel refusing
// every symbolic link and any escape (openat2: RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS).
func openBeneath(dirfd int, rel string) (int, error) {
	return openat2Retry(dirfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW,
		unix.RESOLVE_BENEATH|unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
}
