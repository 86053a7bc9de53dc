//go:build linux

package confine

import (
	"errors"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reads: OpenRead, ReadFile, Stat and Lstat. readTarget says which held
// root a path is walked from and with which RESOLVE_* flags (restricted:
// beneath the worktree, scratch or a grant; the other modes: from /), and
// checkFD judges what the kernel opened.

// readTarget says where a read of abs starts: the descriptor, the path
// relative to it, the resolve flags and (restricted) the roots the result
// must lie in.
type readTarget struct {
	abs, display string
	dirfd        int
	rel          string
	resolve      uint64
	within       []string
}

func (fa *FileAccess) readTarget(op, path string) (readTarget, error) {
	abs, display, err := fa.resolve(op, path)
	if err != nil {
		return readTarget{}, err
	}
	t := readTarget{abs: abs, display: display}
	if fa.mode != ModeOff && fa.denyNow().deniedPath(abs) {
		return t, fa.denial(op, display, RuleDenylist)
	}
	if fa.mode != ModeRestricted {
		t.dirfd, t.rel, t.resolve = fa.slash.fd, relToRoot("/", abs), unix.RESOLVE_NO_MAGICLINKS
		return t, nil
	}
	roots := []*heldRoot{&fa.wd}
	if fa.scr != nil {
		roots = append(roots, fa.scr)
	}
	for i := range fa.grants {
		roots = append(roots, &fa.grants[i])
	}
	for i := range fa.state {
		roots = append(roots, &fa.state[i])
	}
	r := pickRoot(abs, roots)
	if r == nil {
		return t, fa.denial(op, display, RuleOutside)
	}
	t.dirfd, t.rel = r.fd, relToRoot(r.path, abs)
	t.resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS
	for _, r := range roots {
		t.within = append(t.within, r.real, r.path)
	}
	return t, nil
}

// pickRoot is the deepest root containing abs.
func pickRoot(abs string, roots []*heldRoot) *heldRoot {
	var best *heldRoot
	for _, r := range roots {
		if Within(abs, r.path) && (best == nil || len(r.path) > len(best.path)) {
			best = r
		}
	}
	return best
}

func relToRoot(rootPath, abs string) string {
	if abs == rootPath {
		return "."
	}
	if rootPath == "/" {
		return strings.TrimPrefix(abs, "/")
	}
	return strings.TrimPrefix(abs, rootPath+"/")
}

// statTarget opens t with O_PATH (following a final symlink unless
// nofollow), checks the result and returns the descriptor, its stat and its
// real path.
func (fa *FileAccess) statTarget(op string, t readTarget, nofollow bool) (int, unix.Stat_t, string, error) {
	flags := uint64(unix.O_PATH)
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := openat2Retry(t.dirfd, t.rel, flags, t.resolve)
	if err != nil {
		return -1, unix.Stat_t{}, "", fa.openErr(op, t.display, err, false)
	}
	st, err := fstatFD(fd)
	if err != nil {
		unix.Close(fd)
		return -1, st, "", filePathErr(op, t.display, err)
	}
	real, err := fa.checkFD(op, t.display, fd, &st, t.within)
	if err != nil {
		unix.Close(fd)
		return -1, st, "", err
	}
	return fd, st, real, nil
}

// OpenRead opens a regular file for reading under the mode's read rules:
// off anywhere; read-only and workspace-write anywhere but the denylist;
// restricted the workdir and the scratch only. Symlinks are followed by the
// kernel (in restricted, never out of the root) and the file is judged by
// where it really is.
func (fa *FileAccess) OpenRead(path string) (*os.File, Info, error) {
	if err := fa.enter(); err != nil {
		return nil, Info{}, err
	}
	defer fa.leave()
	const op = "read"
	t, err := fa.readTarget(op, path)
	if err != nil {
		return nil, Info{}, err
	}
	// First an O_PATH open: it never runs a device's or FIFO's open
	// routine, so the type and the location are judged before anything is
	// opened for data.
	pfd, pst, real, err := fa.statTarget(op, t, false)
	if err != nil {
		return nil, Info{}, err
	}
	defer unix.Close(pfd)
	if err := fa.regularOnly(op, t.display, &pst); err != nil {
		return nil, Info{}, err
	}
	fd, err := openat2Retry(t.dirfd, t.rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, t.resolve)
	if err != nil {
		return nil, Info{}, fa.openErr(op, t.display, err, false)
	}
	st, err := fstatFD(fd)
	if err != nil || !sameFile(&st, &pst) || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err == nil {
			err = errors.New("the file changed while it was opened")
		}
		return nil, Info{}, filePathErr(op, t.display, err)
	}
	clearNonblock(fd)
	info := statInfo(&st)
	info.Display, info.Abs, info.Real = t.display, t.abs, real
	return os.NewFile(uintptr(fd), t.display), info, nil
}

func (fa *FileAccess) regularOnly(op, display string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return filePathErr(op, display, syscall.EISDIR)
	}
	return fa.denial(op, display, RuleNotRegular)
}

// ReadFile reads a whole regular file, refusing one larger than
// MaxReadBytes (RuleTooLarge).
func (fa *FileAccess) ReadFile(path string) ([]byte, Info, error) {
	f, info, err := fa.OpenRead(path)
	if err != nil {
		return nil, info, err
	}
	defer f.Close()
	max := fa.opts.MaxReadBytes
	if info.Size > max {
		return nil, info, fa.denial("read", info.Display, RuleTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, info, filePathErr("read", info.Display, err)
	}
	if int64(len(data)) > max {
		return nil, info, fa.denial("read", info.Display, RuleTooLarge)
	}
	return data, info, nil
}

// Stat describes path (following symlinks) under the read rules.
func (fa *FileAccess) Stat(path string) (Info, error) { return fa.stat(path, false) }

// Lstat describes path without following a final symlink, under the read
// rules.
func (fa *FileAccess) Lstat(path string) (Info, error) { return fa.stat(path, true) }

func (fa *FileAccess) stat(path string, nofollow bool) (Info, error) {
	if err := fa.enter(); err != nil {
		return Info{}, err
	}
	defer fa.leave()
	const op = "read"
	t, err := fa.readTarget(op, path)
	if err != nil {
		return Info{}, err
	}
	fd, st, real, err := fa.statTarget(op, t, nofollow)
	if err != nil {
		return Info{}, err
	}
	defer unix.Close(fd)
	info := statInfo(&st)
	info.Display, info.Abs, info.Real = t.display, t.abs, real
	if info.IsSymlink {
		info.Target = readlinkAt(fd, "")
	}
	return info, nil
}
