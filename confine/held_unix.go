//go:build unix

package confine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The server is never the sandbox's deputy (docs/security.md, "What is enforced",
// "The server itself"). What it does on its own account in a tree a
// sandbox can write (pre-creating git surfaces and protected directories,
// removing a scratch or a memory entry) goes through a HeldDir: a
// directory descriptor reached from a trusted anchor without following a
// single symbolic link, and every create, remove and rename is relative to
// it and refuses links and existing entries. A name a running command
// flips between absent and a symlink then makes the operation fail; it
// never lands outside the tree. internal/archtest fails the build when a
// path-based mutating call appears outside its reviewed exceptions.

// HeldDir is an open directory of a tree a sandbox may write.
type HeldDir struct {
	fd   int
	path string // for messages only; never used to reach the directory
}

// ErrLinkInPath is returned when a component on the way to a held directory
// is a symbolic link or not a directory.
var ErrLinkInPath = errors.New("a component is a symbolic link or not a directory")

// OpenHeld opens directory path for the server's own work. anchors are the
// roots a sandbox may write below (write roots, scratch, state dirs, a git
// dir bound writable): the outermost anchor holding path is opened by its
// path (its ancestors are outside every tree a sandbox can write, and the
// policy resolved it at start) and everything below it is resolved by the
// kernel beneath it, refusing every symbolic link. A path under no anchor
// is opened by path, refusing a link in its last component only: nothing a
// sandbox controls lies on its way.
func OpenHeld(path string, anchors []string) (*HeldDir, error) {
	path = filepath.Clean(path)
	anchor := ""
	for _, a := range anchors {
		if a = filepath.Clean(a); Within(path, a) && (anchor == "" || len(a) < len(anchor)) {
			anchor = a
		}
	}
	if anchor == "" {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, heldErr(path, err)
		}
		return &HeldDir{fd: fd, path: path}, nil
	}
	afd, err := unix.Open(anchor, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, heldErr(anchor, err)
	}
	d := &HeldDir{fd: afd, path: anchor}
	if path == anchor {
		return d, nil
	}
	rel, _ := filepath.Rel(anchor, path)
	sub, err := d.Sub(rel)
	d.Close()
	return sub, err
}

func heldErr(path string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, ErrLinkInPath)
	}
	return &os.PathError{Op: "open", Path: path, Err: err}
}

// Path is the directory's path as opened (for messages).
func (d *HeldDir) Path() string { return d.path }

// FD is the descriptor (valid until Close).
func (d *HeldDir) FD() int { return d.fd }

// Close releases the descriptor.
func (d *HeldDir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// validChildName reports whether name is one plain directory entry name.
func validChildName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// validRel reports whether rel is a relative path of plain names (no "..",
// no ".", no empty component).
func validRel(rel string) bool {
	if rel == "" {
		return false
	}
	for _, c := range strings.Split(rel, "/") {
		if !validChildName(c) {
			return false
		}
	}
	return true
}

// Sub opens the directory rel below d, refusing every symbolic link on the
// way and any escape from d.
func (d *HeldDir) Sub(rel string) (*HeldDir, error) {
	if !validRel(rel) {
		return nil, fmt.Errorf("%s: not a plain relative path", rel)
	}
	fd, err := openBeneath(d.fd, rel)
	if err != nil {
		return nil, heldErr(filepath.Join(d.path, rel), err)
	}
	return &HeldDir{fd: fd, path: filepath.Join(d.path, rel)}, nil
}

// Kind is what name is in d, never following a link.
func (d *HeldDir) Kind(name string) PathKind {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return PathAbsent
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return PathSymlink
	case unix.S_IFDIR:
		return PathDir
	case unix.S_IFREG:
		return PathFile
	}
	return PathOther
}

// Stat is fstatat(name) in d, never following a link.
func (d *HeldDir) Stat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// CreateFile creates name in d holding data: O_CREAT|O_EXCL|O_NOFOLLOW, so
// an entry that exists (a symbolic link included) is never opened; the
// error then wraps fs.ErrExist.
func (d *HeldDir) CreateFile(name string, data []byte, perm uint32) error {
	if !validChildName(name) {
		return fmt.Errorf("%q: not a plain name", name)
	}
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(d.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Mkdir makes directory name in d (mkdirat: never through a link; an entry
// that exists gives an error wrapping fs.ErrExist).
func (d *HeldDir) Mkdir(name string, perm uint32) error {
	if !validChildName(name) {
		return fmt.Errorf("%q: not a plain name", name)
	}
	if err := unix.Mkdirat(d.fd, name, perm); err != nil {
		return &os.PathError{Op: "mkdir", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// MkdirAll makes the directories of rel below d one component at a time,
// each reached without following a link; a component that exists as
// anything but a directory fails with ErrLinkInPath.
func (d *HeldDir) MkdirAll(rel string, perm uint32) (*HeldDir, error) {
	if !validRel(rel) {
		return nil, fmt.Errorf("%s: not a plain relative path", rel)
	}
	cur := &HeldDir{fd: -1, path: d.path}
	fd, err := unix.Dup(d.fd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	cur.fd = fd
	for _, c := range strings.Split(rel, "/") {
		if err := cur.Mkdir(c, perm); err != nil && !errors.Is(err, os.ErrExist) {
			cur.Close()
			return nil, err
		}
		next, err := cur.Sub(c)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// Remove unlinks the file or empty directory name in d (never through a
// link: a link is removed itself).
func (d *HeldDir) Remove(name string) error {
	if !validChildName(name) {
		return fmt.Errorf("%q: not a plain name", name)
	}
	err := unix.Unlinkat(d.fd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		if k := d.Kind(name); k == PathDir {
			err = unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
		}
	}
	if err != nil {
		return &os.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// maxRemoveDepth bounds RemoveAll's recursion (one descriptor a level).
const maxRemoveDepth = 256

// RemoveAll removes name in d and everything below it. Each directory is
// entered through a descriptor opened without following a link, made
// writable by its descriptor when this user owns it (a command may leave
// read-only directories, and a scratch chmod'ed by the sandbox), and
// emptied with unlinkat relative to it; a link is removed, never followed.
// An absent name is not an error.
func (d *HeldDir) RemoveAll(name string) error {
	if !validChildName(name) {
		return fmt.Errorf("%q: not a plain name", name)
	}
	err := removeAt(d.fd, name, d.path, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

func removeAt(parent int, name, path string, depth int) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return err
	}
	var st unix.Stat_t
	if serr := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil {
		return serr
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &os.PathError{Op: "remove", Path: filepath.Join(path, name), Err: err}
	}
	if depth >= maxRemoveDepth {
		return fmt.Errorf("remove %s: deeper than %d levels", filepath.Join(path, name), maxRemoveDepth)
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Join(path, name), Err: err}
	}
	if int(st.Uid) == os.Geteuid() && st.Mode&0o700 != 0o700 {
		_ = unix.Fchmod(fd, 0o700)
	}
	sub := filepath.Join(path, name)
	var firstErr error
	for round := 0; round < 4; round++ {
		names, rerr := readNames(fd)
		if rerr != nil {
			firstErr = rerr
			break
		}
		if len(names) == 0 {
			break
		}
		for _, n := range names {
			if e := removeAt(fd, n, sub, depth+1); e != nil && !errors.Is(e, unix.ENOENT) && firstErr == nil {
				firstErr = e
			}
		}
		if firstErr != nil {
			break
		}
	}
	unix.Close(fd)
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if firstErr != nil {
			return firstErr
		}
		return &os.PathError{Op: "remove", Path: sub, Err: err}
	}
	return nil
}

// readNames lists the entries of the directory open at fd (without . and
// ..), reading from its start through a duplicate descriptor.
func readNames(fd int) ([]string, error) {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dfd), ".")
	defer f.Close()
	var out []string
	for {
		names, err := f.Readdirnames(1024)
		out = append(out, names...)
		if err == io.EOF || (err == nil && len(names) == 0) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// OpenFile opens name in d with flags (O_NOFOLLOW and O_CLOEXEC always
// added: a link is never opened).
func (d *HeldDir) OpenFile(name string, flags int, perm uint32) (*os.File, error) {
	if !validChildName(name) {
		return nil, fmt.Errorf("%q: not a plain name", name)
	}
	fd, err := unix.Openat(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.path, name)), nil
}

// Rename renames old to new within d (names, never links followed; new is
// replaced).
func (d *HeldDir) Rename(old, new string) error {
	if !validChildName(old) || !validChildName(new) {
		return fmt.Errorf("%q, %q: not plain names", old, new)
	}
	if err := unix.Renameat(d.fd, old, d.fd, new); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, old), New: filepath.Join(d.path, new), Err: err}
	}
	return nil
}

// Names lists up to max entries of d (max <= 0: all).
func (d *HeldDir) Names(max int) ([]string, error) {
	names, err := readNames(d.fd)
	if max > 0 && len(names) > max {
		names = names[:max]
	}
	return names, err
}
