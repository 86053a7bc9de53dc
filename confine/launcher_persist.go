package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// A session persisted across a server restart (README, "Sessions that
// survive a restart") keeps its scratch: the old server's Close leaves it
// (KeepScratch), the new server reopens a launcher over it
// (ReopenLauncherUnder) after checking that it is still the directory this
// server created.

// scratchName is the base name NewLauncherUnder gives a scratch.
var scratchName = regexp.MustCompile(`^evener-mcp-[0-9]{1,20}$`)

// KeepScratch makes Close end the session's processes and release its
// backend but leave the scratch directory where it is.
func (s *Launcher) KeepScratch() { s.keep.Store(true) }

// CheckScratch verifies that dir is a scratch this server could have
// created in parent: parent's direct child with a scratch's name, a real
// directory (not a symbolic link), owned by this process's effective user,
// mode 0700. parent must be canonical (symbolic links resolved).
func CheckScratch(parent, dir string) error {
	if parent == "" || !filepath.IsAbs(parent) || !filepath.IsAbs(dir) {
		return errors.New("scratch and its parent must be absolute")
	}
	if filepath.Clean(dir) != dir || filepath.Dir(dir) != parent || !scratchName.MatchString(filepath.Base(dir)) {
		return errors.New("the scratch does not lie where this server puts scratch")
	}
	if err := PrivateDir(dir); err != nil {
		return fmt.Errorf("scratch: %w", err)
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
// holds for it (an expired persisted session).
func RemoveScratch(parent, dir string) error {
	if err := CheckScratch(parent, dir); err != nil {
		return err
	}
	return removeAllForce(dir)
}
