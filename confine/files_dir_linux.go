//go:build linux

package confine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Directory walking: OpenDir, and a Dir's Entries, Names, OpenDir and
// OpenFile, which read a held directory descriptor's entries themselves
// (getdents) and never follow a child symlink.

// Dir is an open directory for walking (glob, grep, list_dir). Children are
// described without being followed, and opened relative to this handle
// with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, so a walk never leaves the tree
// and always terminates.
type Dir struct {
	fa      *FileAccess
	fd      int
	display string
	real    string
	dev     uint64 // the directory's device, from fstat of its handle
	within  []string
	// mu guards fd, the shared handle: Entries (which seeks it) and Close
	// hold it exclusively; opening children only reads the handle, so many
	// may run.
	mu sync.RWMutex
}

// OpenDir opens a directory under the read rules (a symlink on the way is
// followed by the kernel and the directory judged by its real location).
func (fa *FileAccess) OpenDir(path string) (*Dir, error) {
	if err := fa.enter(); err != nil {
		return nil, err
	}
	defer fa.leave()
	const op = "list"
	t, err := fa.readTarget(op, path)
	if err != nil {
		return nil, err
	}
	fd, err := openat2Retry(t.dirfd, t.rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, t.resolve)
	if err != nil {
		return nil, fa.openErr(op, t.display, err, false)
	}
	st, err := fstatFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, filePathErr(op, t.display, err)
	}
	real, err := fa.checkFD(op, t.display, fd, &st, t.within)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Dir{fa: fa, fd: fd, display: t.display, real: real, dev: uint64(st.Dev), within: t.within}, nil
}

// Display is the directory's path as the model should see it.
func (d *Dir) Display() string { return d.display }

// Close releases the directory.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

func (d *Dir) child(name string) string {
	if d.display == "." {
		return name
	}
	return filepath.Join(d.display, name)
}

// Entries lists up to max children (max <= 0: all), sorted by name, each
// described by fstatat(AT_SYMLINK_NOFOLLOW). Children whose real location
// is masked are omitted. truncated says more children were left out.
func (d *Dir) Entries(max int) ([]DirEntry, bool, error) {
	return d.list(max, func(de dirent, ds *denyState) (DirEntry, bool) {
		var st unix.Stat_t
		if err := unix.Fstatat(d.fd, de.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return DirEntry{}, false // vanished since it was listed
		}
		if ds != nil && (ds.deniedClean(joinClean(d.real, de.name)) || ds.deniedStat(&st)) {
			return DirEntry{}, false
		}
		e := DirEntry{Name: de.name, Kind: kindFromUnix(st.Mode), Size: st.Size, Mode: fileModeFromUnix(st.Mode)}
		if e.Kind == PathSymlink {
			e.Target = readlinkAt(d.fd, de.name)
		}
		return e, true
	})
}

const childResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Names lists the directory like Entries, but types each entry from the
// directory listing itself (d_type) instead of a stat per entry, and leaves
// Size unknown (-1): for walks over large trees (grep, glob), where every
// file is judged again, by identity, when it is opened. Denylisted names
// are omitted as in Entries.
func (d *Dir) Names(max int) ([]DirEntry, bool, error) {
	return d.list(max, func(de dirent, ds *denyState) (DirEntry, bool) {
		if ds != nil && ds.deniedClean(joinClean(d.real, de.name)) {
			return DirEntry{}, false
		}
		e := DirEntry{Name: de.name, Size: -1}
		switch de.typ {
		case unix.DT_REG:
			e.Kind = PathFile
		case unix.DT_DIR:
			e.Kind = PathDir
		case unix.DT_LNK:
			e.Kind = PathSymlink
		case unix.DT_UNKNOWN:
			var st unix.Stat_t
			if unix.Fstatat(d.fd, de.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				return DirEntry{}, false
			}
			e.Kind, e.Size = kindFromUnix(st.Mode), st.Size
		default:
			e.Kind = PathOther
		}
		return e, true
	})
}

// list reads the directory and keeps up to max children that describe
// accepts (ds is the current denylist, nil in mode off).
func (d *Dir) list(max int, describe func(de dirent, ds *denyState) (DirEntry, bool)) ([]DirEntry, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil, false, errFileAccessClosed
	}
	dents, truncated, err := d.readDirents()
	if err != nil {
		return nil, false, err
	}
	var ds *denyState
	if d.fa.mode != ModeOff {
		ds = d.fa.denyNow()
	}
	out := make([]DirEntry, 0, len(dents))
	for _, de := range dents {
		if max > 0 && len(out) >= max {
			truncated = true // the remaining names were left out
			break
		}
		if e, ok := describe(de, ds); ok {
			out = append(out, e)
		}
	}
	return out, truncated, nil
}

type dirent struct {
	name string
	typ  uint8
}

// readDirents reads the whole directory from its start (at most
// MaxDirNames names), sorted by name, with the type the listing gives;
// "." and ".." are left out. The caller holds d.mu exclusively.
func (d *Dir) readDirents() ([]dirent, bool, error) {
	if _, err := unix.Seek(d.fd, 0, io.SeekStart); err != nil {
		return nil, false, filePathErr("list", d.display, err)
	}
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(d.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false, filePathErr("list", d.display, err)
		}
		if n <= 0 {
			break
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			typ := b[18]
			b = b[reclen:]
			if nm := string(name); nm != "." && nm != ".." {
				out = append(out, dirent{nm, typ})
			}
			if len(out) >= d.fa.opts.MaxDirNames {
				slices.SortFunc(out, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
				return out, true, nil
			}
		}
	}
	slices.SortFunc(out, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return out, false, nil
}

// OpenDir opens a direct child directory, never through a symlink.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	const op = "list"
	display := d.child(name)
	if d.fd < 0 {
		return nil, errFileAccessClosed
	}
	if !validChildName(name) {
		return nil, d.fa.denial(op, display, RuleInvalidPath)
	}
	// No O_NOFOLLOW: with O_DIRECTORY it would turn a symlink into ENOTDIR;
	// RESOLVE_NO_SYMLINKS refuses it with ELOOP instead.
	fd, err := openat2Retry(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, childResolve)
	if err != nil {
		return nil, d.fa.openErr(op, display, err, true)
	}
	st, err := fstatFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, filePathErr(op, display, err)
	}
	real, err := d.fa.checkFD(op, display, fd, &st, d.within)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Dir{fa: d.fa, fd: fd, display: display, real: real, dev: uint64(st.Dev), within: d.within}, nil
}

// OpenFile opens a direct child regular file for reading, never through a
// symlink; FIFOs, sockets and devices are refused without being opened.
func (d *Dir) OpenFile(name string) (*os.File, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	const op = "read"
	display := d.child(name)
	if d.fd < 0 {
		return nil, errFileAccessClosed
	}
	if !validChildName(name) {
		return nil, d.fa.denial(op, display, RuleInvalidPath)
	}
	var pre unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &pre, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, filePathErr(op, display, err)
	}
	if pre.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, d.fa.denial(op, display, RuleSymlink)
	}
	if err := d.fa.regularOnly(op, display, &pre); err != nil {
		return nil, err
	}
	if d.fa.mode != ModeOff {
		// Judge what the listing knows before opening anything; the
		// opened descriptor is judged again below.
		if ds := d.fa.denyNow(); ds.deniedPath(d.real+"/"+name) || ds.deniedStat(&pre) {
			return nil, d.fa.denial(op, display, RuleDenylist)
		}
	}
	fd, err := openat2Retry(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, childResolve)
	if err != nil {
		return nil, d.fa.openErr(op, display, err, true)
	}
	st, err := fstatFD(fd)
	if err != nil || !sameFile(&st, &pre) || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err == nil {
			err = errors.New("the file changed while it was opened")
		}
		return nil, filePathErr(op, display, err)
	}
	if uint64(st.Dev) == d.dev && d.fa.mode != ModeOff {
		// A regular file opened beneath this handle with no symlink on the
		// way, on the handle's own filesystem (so not a procfs or sysfs
		// mount): its real path is the handle's plus its name, and reading
		// it back from /proc for every file of a walk would double the
		// cost of a grep. Its identity is still judged.
		if ds := d.fa.denyNow(); ds.deniedClean(joinClean(d.real, name)) || ds.deniedStat(&st) {
			unix.Close(fd)
			return nil, d.fa.denial(op, display, RuleDenylist)
		}
	} else if _, err := d.fa.checkFD(op, display, fd, &st, d.within); err != nil {
		unix.Close(fd)
		return nil, err
	}
	clearNonblock(fd)
	return os.NewFile(uintptr(fd), display), nil
}
