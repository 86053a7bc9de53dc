package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// A session persisted across a server restart (docs/http.md, "Sessions that
// survive a restart") keeps its scratch: the old server's Close leaves it
// (KeepScratch), the new server reopens a launcher over it
// (ReopenLauncherUnder) after checking that it is still the directory this
// server created.

// scratchName is the base name NewLauncherUnder gives a scratch.
var scratchName = lazyRegexp(`^evener-mcp-[0-9]{1,20}$`)

// KeepScratch makes Close end the session's processes and release its
// backend but leave the scratch directory where it is.
func (s *Launcher) KeepScratch() { s.keep.Store(true) }

// CheckScratch verifies that dir is a scratch this server could have
// created in parent: parent's direct child with a scratch's name, a real
// directory (not a symbolic link), owned by this process's effective user,
// in a parent that is this user's private directory (PrivateDir). parent
// must be canonical (symbolic links resolved). A command in the sandbox can
// change the scratch's mode (chmod $TMPDIR): the mode is set back to 0700
// through the directory's own descriptor, reached from the held parent
// without following a link, since nobody but this user can have made an
// entry in a private parent.
func CheckScratch(parent, dir string) error {
	_, err := checkScratch(parent, dir)
	return err
}

// checkScratch is CheckScratch, returning the held parent (to close).
func checkScratch(parent, dir string) (*HeldDir, error) {
	if parent == "" || !filepath.IsAbs(parent) || !filepath.IsAbs(dir) {
		return nil, errors.New("scratch and its parent must be absolute")
	}
	if filepath.Clean(dir) != dir || filepath.Dir(dir) != parent || !scratchName().MatchString(filepath.Base(dir)) {
		return nil, errors.New("the scratch does not lie where this server puts scratch")
	}
	if err := PrivateDir(parent); err != nil {
		return nil, fmt.Errorf("scratch parent: %w", err)
	}
	pd, err := OpenHeld(parent, nil)
	if err != nil {
		return nil, fmt.Errorf("scratch parent: %w", err)
	}
	if err := pd.restorePrivate(filepath.Base(dir)); err != nil {
		pd.Close()
		return nil, fmt.Errorf("scratch: %w", err)
	}
	return pd, nil
}

// restorePrivate checks that name in d is a directory of this process's
// effective user and sets its mode back to 0700 (no set-id or sticky bit)
// through its own descriptor.
func (d *HeldDir) restorePrivate(name string) error {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		}
		return fmt.Errorf("%s is not a directory (a symbolic link or another file)", name)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not owned by this server's user", name)
	}
	if st.Mode&0o7777 != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return fmt.Errorf("%s: restore mode 0700: %w", name, err)
		}
	}
	return nil
}

// PrivateDir checks that dir is a directory of this process's effective
// user only: not a symbolic link or another file, owned by it, mode 0700
// (no set-id or sticky bit). Messages name the base name only.
func PrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	name := filepath.Base(dir)
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symbolic link or another file)", name)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not owned by this server's user", name)
	}
	if fi.Mode().Perm() != 0o700 || fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
		return fmt.Errorf("%s has mode %v, not 0700", name, fi.Mode())
	}
	return nil
}

// ReopenLauncherUnder is NewLauncherUnder over an existing scratch dir in
// parent (CheckScratch), for a session resumed after a server restart.
func ReopenLauncherUnder(p *Policy, envPassthrough []string, parent, dir string) (*Launcher, error) {
	var be osBackend
	if err := be.ready(); err != nil {
		return nil, err
	}
	if err := CheckScratch(parent, dir); err != nil {
		return nil, err
	}
	return launcherOver(p, envPassthrough, dir, parent)
}

// RemoveScratch removes a kept scratch dir of parent, once CheckScratch
// holds for it (an expired persisted session), relative to the held
// parent (HeldDir.RemoveAll). A scratch that is already gone gives an
// error wrapping fs.ErrNotExist.
func RemoveScratch(parent, dir string) error {
	pd, err := checkScratch(parent, dir)
	if err != nil {
		return err
	}
	defer pd.Close()
	return pd.RemoveAll(filepath.Base(dir))
}
