//go:build linux

package memory

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/evener-dev/evener-mcp/confine"
	"golang.org/x/sys/unix"
)

// Held directory handles: what memory does itself, outside its confined
// file layer, goes through them and never through a path string into a
// root (docs/memory.md, "Memory"). That is the layout under the state directory
// (the roots and the projects' .path records), a root's lock, and the
// removal of directories a delete leaves empty. Every name is one
// component, resolved relative to a held handle with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS.

const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// maxRecordBytes bounds the read of a project's .path record (a path).
const maxRecordBytes = 8 << 10

// openat2 is confine's openat2(2), retried on its transient errors.
var openat2 = confine.Openat2

// openRealDir opens a directory by its real path (symlink-resolved by the
// caller), refusing a symlink anywhere on it: one there now means the
// layout changed since it was resolved.
func openRealDir(real string) (int, error) {
	fd, err := openat2(unix.AT_FDCWD, real, unix.O_PATH|unix.O_DIRECTORY, unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return -1, fmt.Errorf("open the state directory: %w", err)
	}
	return fd, nil
}

// makeDirAt makes name in the held directory dirfd (0700; an existing one
// is kept) and opens it, never through a symlink.
func makeDirAt(dirfd int, name string) (int, error) {
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && err != unix.EEXIST {
		return -1, fmt.Errorf("make %s: %w", name, err)
	}
	fd, err := openat2(dirfd, name, unix.O_PATH|unix.O_DIRECTORY, beneath)
	switch {
	case err == unix.ELOOP:
		return -1, fmt.Errorf("%s is a symlink; a memory root is never followed through one", name)
	case err == unix.ENOTDIR:
		return -1, fmt.Errorf("%s is not a directory", name)
	case err != nil:
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	return fd, nil
}

// layout makes and opens stateReal/rel... one component at a time. It
// returns the held root and its parent (the caller closes both).
func layout(stateReal string, rel []string) (root, parent int, err error) {
	parent, err = openRealDir(stateReal)
	if err != nil {
		return -1, -1, err
	}
	for i, c := range rel {
		fd, err := makeDirAt(parent, c)
		if err != nil {
			unix.Close(parent)
			return -1, -1, err
		}
		if i == len(rel)-1 {
			return fd, parent, nil
		}
		unix.Close(parent)
		parent = fd
	}
	unix.Close(parent)
	return -1, -1, errors.New("memory: an empty root path")
}

// recordProjectAt writes the worktree's path as name in the held
// directory dirfd (beside the project's root), or checks the one there.
func recordProjectAt(dirfd int, name, worktree string) error {
	fd, err := openat2(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, beneath)
	if err == nil {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("%s is not a regular file", name)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) != worktree {
			return fmt.Errorf("%s records another worktree", name)
		}
		return nil
	}
	if err == unix.ELOOP {
		return fmt.Errorf("%s is not a regular file", name)
	}
	if err != unix.ENOENT {
		return fmt.Errorf("open %s: %w", name, err)
	}
	fd, err = openat2(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, beneath)
	if err != nil {
		if err == unix.EEXIST {
			return nil // another session recorded it meanwhile
		}
		return fmt.Errorf("create %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.WriteString(worktree + "\n")
	return errors.Join(err, f.Close())
}

// lockHeld takes an exclusive advisory lock on the held root directory,
// shared by every server process on the host (two sessions of different
// servers editing one scope take turns, so an edit's check and its write
// see the same file and the caps count every write). The lock is on a
// fresh open of the held directory itself ("." relative to it), used for
// nothing else.
func lockHeld(dirfd int) (unlock func(), err error) {
	fd, err := openat2(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, beneath)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return func() { unix.Close(fd) }, nil // closing the last handle releases the lock
}

func closeHeld(fd int) error {
	if fd < 0 {
		return nil
	}
	return unix.Close(fd)
}

// chain holds the directories of a path's components from the root:
// fds[0] is the root (not owned), fds[k] the directory parts[:k], each
// opened relative to the one before with no symlink on the way.
type chain struct {
	parts []string
	fds   []int
}

// holdChain opens the first n components of parts (all directories).
func (r *Root) holdChain(parts []string, n int) (*chain, error) {
	c := &chain{parts: parts, fds: []int{r.fd}}
	for _, name := range parts[:n] {
		fd, err := openat2(c.fds[len(c.fds)-1], name, unix.O_PATH|unix.O_DIRECTORY, beneath)
		if err != nil {
			c.close()
			return nil, err
		}
		c.fds = append(c.fds, fd)
	}
	return c, nil
}

func (c *chain) close() {
	for _, fd := range c.fds[1:] {
		unix.Close(fd)
	}
	c.fds = c.fds[:1]
}

func sameDir(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Mode&unix.S_IFMT == unix.S_IFDIR && b.Mode&unix.S_IFMT == unix.S_IFDIR
}

// rmdir removes the held directory parts[:k] (k >= 1: never the root)
// from its held parent, with unlinkat(AT_REMOVEDIR): only if it is empty
// (the kernel's check), only by its one-component name in the parent the
// walk opened, and only while that name still is the directory held and
// the parent still lies where the walk found it beneath the root.
func (r *Root) rmdir(c *chain, k int) error {
	parent, name := c.fds[k-1], c.parts[k-1]
	var held, named unix.Stat_t
	if err := unix.Fstat(c.fds[k], &held); err != nil {
		return err
	}
	if err := unix.Fstatat(parent, name, &named, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if !sameDir(&held, &named) {
		return errors.New("the directory changed while it was removed")
	}
	if k > 1 {
		// The parent, walked again from the root: still the one held.
		fd, err := openat2(r.fd, strings.Join(c.parts[:k-1], "/"), unix.O_PATH|unix.O_DIRECTORY, beneath)
		if err != nil {
			return err
		}
		var again, p unix.Stat_t
		err = errors.Join(unix.Fstat(fd, &again), unix.Fstat(parent, &p))
		unix.Close(fd)
		if err != nil {
			return err
		}
		if !sameDir(&again, &p) {
			return errors.New("the directory moved while it was removed")
		}
	}
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}

// pruneEmpty removes the held directories parts[:k], parts[:k-1], ...
// while each is empty, stopping at the first that is not (or cannot be
// removed); the root itself is never removed.
func (r *Root) pruneEmpty(c *chain, k int) {
	for ; k >= 1; k-- {
		if r.rmdir(c, k) != nil {
			return
		}
	}
}

// removeDirectory removes the empty directory p (its components, parts,
// already resolved by the file layer's rules to a directory), then the
// parents it leaves empty.
func (r *Root) removeDirectory(p string, parts []string) error {
	c, err := r.holdChain(parts, len(parts))
	if err != nil {
		return notFound(err, p)
	}
	defer c.close()
	if err := r.rmdir(c, len(parts)); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%s is a directory and not empty; delete its files first", p)
		}
		return fmt.Errorf("delete %s: %w", p, err)
	}
	r.pruneEmpty(c, len(parts)-1)
	return nil
}

// pruneParents removes the parents of the file p that are now empty.
func (r *Root) pruneParents(parts []string) {
	c, err := r.holdChain(parts, len(parts)-1)
	if err != nil {
		return // the file is gone; what is left above it is harmless
	}
	defer c.close()
	r.pruneEmpty(c, len(parts)-1)
}
