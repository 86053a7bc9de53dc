//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// This file is the core of the race-safe file layer every file tool uses
// (the package comment, "The file layer"). Nothing here resolves a
// model-supplied path in user space: a path is cleaned lexically once,
// checked lexically, and then handed to the kernel relative to a directory
// handle held since construction, with openat2's RESOLVE_* flags saying what
// the walk may do. Whatever the kernel opened is then judged by what it is
// (fstat) and where it really is (the descriptor's own path in
// /proc/self/fd), so a path swapped between a check and its use cannot lead
// anywhere the check would have refused.

// heldRoot is a directory the FileAccess holds open for its whole life.
type heldRoot struct {
	path string // canonical absolute path (as the policy or caller named it)
	real string // the kernel's own path for the held descriptor
	fd   int    // O_PATH|O_DIRECTORY
}

// FileAccess is the only way a tool touches the filesystem. It holds
// directory descriptors for "/" (the read-anywhere modes and mode off), the
// workdir, each --add-dir root and the session scratch. It is safe for
// concurrent use.
type FileAccess struct {
	mode    Mode
	opts    FileAccessOptions
	workdir string
	slash   heldRoot
	wd      heldRoot
	adds    []heldRoot
	scr     *heldRoot
	grants  []heldRoot // directories a human approved for this access (Grant)
	state   []heldRoot // runner state directories (Policy.StateRW), writable in every sandboxed mode
	deny    []string   // credential entries: p.Denylist() + systemSecrets

	writesBlocked bool // Policy.WritesBlocked: restricted reads, no writes but the scratch

	pol        *Policy // what Grant rebuilds from
	scratchArg string
	hide       string // opts.HideBeside, symlink-resolved

	life   sync.RWMutex // read-held by every operation, write-held by Close
	closed bool

	denyCur     atomic.Pointer[denyState]
	denyRefresh sync.Mutex // held by whoever recomputes denyCur: one refresh at a time
}

var errFileAccessClosed = errors.New("file access is closed")

// NewFileAccess opens the roots of p's file tools: "/", the workdir, every
// add-dir and scratch (the session's scratch directory; "" for none).
func NewFileAccess(p *Policy, scratch string) (*FileAccess, error) {
	return NewFileAccessWith(p, scratch, FileAccessOptions{})
}

// NewFileAccessWith is NewFileAccess with explicit limits.
func NewFileAccessWith(p *Policy, scratch string, o FileAccessOptions) (fa *FileAccess, err error) {
	if p == nil {
		return nil, errors.New("file access: no policy")
	}
	fa = &FileAccess{mode: p.Mode(), opts: o.withDefaults(), workdir: p.Workdir(),
		slash: heldRoot{fd: -1}, wd: heldRoot{fd: -1}, pol: p, scratchArg: scratch, writesBlocked: p.WritesBlocked()}
	defer func() {
		if err != nil {
			fa.closeFDs()
			fa = nil
		}
	}()
	openRoot := func(path string, resolve uint64) (heldRoot, error) {
		fd, err := openat2Retry(unix.AT_FDCWD, path, unix.O_PATH|unix.O_DIRECTORY, resolve)
		if err != nil {
			if errors.Is(err, unix.ENOSYS) {
				return heldRoot{fd: -1}, errors.New("file access: the kernel lacks openat2Retry (Linux 5.6 or later is required)")
			}
			return heldRoot{fd: -1}, fmt.Errorf("file access: open root %s: %w", path, err)
		}
		real, err := fdPath(fd)
		if err != nil {
			unix.Close(fd)
			return heldRoot{fd: -1}, fmt.Errorf("file access: cannot read descriptor paths from /proc/self/fd: %w", err)
		}
		return heldRoot{path: path, real: real, fd: fd}, nil
	}
	if fa.slash, err = openRoot("/", unix.RESOLVE_NO_MAGICLINKS); err != nil {
		return nil, err
	}
	// The workdir and add-dirs are symlink-resolved by the policy, so a
	// symlink on their spelling now means the layout changed under us.
	strict := uint64(unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS)
	if fa.wd, err = openRoot(p.Workdir(), strict); err != nil {
		return nil, err
	}
	for _, d := range p.AddDirs() {
		r, err := openRoot(d, strict)
		if err != nil {
			return nil, err
		}
		fa.adds = append(fa.adds, r)
	}
	if fa.mode != ModeOff {
		for _, d := range p.StateRW() {
			r, err := openRoot(d, strict)
			if err != nil {
				return nil, err
			}
			fa.state = append(fa.state, r)
		}
	}
	if scratch != "" {
		if !filepath.IsAbs(scratch) {
			return nil, fmt.Errorf("file access: scratch %q is not absolute", scratch)
		}
		s, err := filepath.EvalSymlinks(scratch)
		if err != nil {
			return nil, fmt.Errorf("file access: scratch: %w", err)
		}
		r, err := openRoot(s, strict)
		if err != nil {
			return nil, err
		}
		fa.scr = &r
	}
	fa.deny = append(p.Denylist(), systemSecrets...)
	if fa.opts.HideBeside != "" && fa.mode != ModeOff {
		if fa.hide, err = filepath.EvalSymlinks(fa.opts.HideBeside); err != nil {
			return nil, fmt.Errorf("file access: hidden scratch parent: %w", err)
		}
	}
	st := fa.computeDeny()
	fa.denyCur.Store(st)
	if fa.mode != ModeOff {
		for _, r := range fa.allRoots() {
			if r == &fa.slash {
				continue
			}
			if st.deniedPath(r.real) || st.deniedPath(r.path) {
				return nil, fmt.Errorf("file access: root %s lies inside a denylisted path", r.path)
			}
		}
	}
	return fa, nil
}

func (fa *FileAccess) allRoots() []*heldRoot {
	out := []*heldRoot{&fa.slash, &fa.wd}
	for i := range fa.adds {
		out = append(out, &fa.adds[i])
	}
	if fa.scr != nil {
		out = append(out, fa.scr)
	}
	for i := range fa.grants {
		out = append(out, &fa.grants[i])
	}
	for i := range fa.state {
		out = append(out, &fa.state[i])
	}
	return out
}

// errNotGrantable is returned by Grant for a directory no approval may
// open: a masked path, a pseudo-filesystem, a path that does not resolve
// to a directory without symlinks, or any directory in read-only or off
// mode.
var errNotGrantable = errors.New("not grantable")

// Grant returns a new FileAccess that also treats dir as a root for reads
// (restricted) and writes (workspace-write, restricted): the escalation a
// human approved for one call whose path lies outside the mode's roots.
// Everything else is unchanged: the denylist, the pseudo-filesystem floor,
// git metadata and symlink rules still apply inside dir. The caller closes
// the result after the one operation.
func (fa *FileAccess) Grant(dir string) (*FileAccess, error) {
	if fa.mode != ModeWorkspaceWrite && fa.mode != ModeRestricted || fa.writesBlocked {
		return nil, fmt.Errorf("grant in %s mode: %w", fa.mode, errNotGrantable)
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, fmt.Errorf("grant: path is not absolute and clean: %w", errNotGrantable)
	}
	ds := fa.denyNow()
	if ds.deniedPath(dir) {
		return nil, fmt.Errorf("grant: masked: %w", errNotGrantable)
	}
	fd, err := openat2Retry(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, fmt.Errorf("grant: %w: %w", errNotGrantable, err)
	}
	g := heldRoot{path: dir, fd: fd}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if g.real, err = fdPath(fd); err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err == nil {
		err = unix.Fstatfs(fd, &sfs)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("grant: %w", err)
	}
	if sfs.Type == unix.PROC_SUPER_MAGIC || sfs.Type == unix.SYSFS_MAGIC || ds.deniedPath(g.real) || ds.deniedStat(&st) {
		unix.Close(fd)
		return nil, fmt.Errorf("grant: masked: %w", errNotGrantable)
	}
	out, err := NewFileAccessWith(fa.pol, fa.scratchArg, fa.opts)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	out.grants = append(out.grants, g)
	return out, nil
}

func (fa *FileAccess) closeFDs() {
	for _, r := range fa.allRoots() {
		if r.fd >= 0 {
			unix.Close(r.fd)
			r.fd = -1
		}
	}
}

// Close releases the held directories. Operations after Close fail.
func (fa *FileAccess) Close() error {
	fa.life.Lock()
	defer fa.life.Unlock()
	if fa.closed {
		return nil
	}
	fa.closed = true
	fa.closeFDs()
	return nil
}

func (fa *FileAccess) enter() error {
	fa.life.RLock()
	if fa.closed {
		fa.life.RUnlock()
		return errFileAccessClosed
	}
	return nil
}

func (fa *FileAccess) leave() { fa.life.RUnlock() }

// Mode is the mode the file rules follow.
func (fa *FileAccess) Mode() Mode { return fa.mode }

// MaxReadBytes is the largest content ReadFile returns (and read tools
// should cap at).
func (fa *FileAccess) MaxReadBytes() int64 { return fa.opts.MaxReadBytes }

// MaxWriteBytes is the largest content WriteFile and Stage.Write accept.
func (fa *FileAccess) MaxWriteBytes() int64 { return fa.opts.MaxWriteBytes }

// Scratch is the scratch root, "" when none.
func (fa *FileAccess) Scratch() string {
	if fa.scr == nil {
		return ""
	}
	return fa.scr.path
}

// ---------------------------------------------------------------------------
// Small syscall helpers.

// Openat2 is openat2(2) with O_CLOEXEC, retried on the transient errors
// below (openat2Retry); for packages that hold directories of their own
// (memory).
func Openat2(dirfd int, path string, flags, resolve uint64) (int, error) {
	return openat2Retry(dirfd, path, flags, resolve)
}

// openat2Retry retries the transient EAGAIN that RESOLVE_BENEATH returns when a
// rename raced its ".." handling, and EINTR.
func openat2Retry(dirfd int, path string, flags, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolve}
	if flags&unix.O_CREAT != 0 {
		how.Mode = 0o600
	}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, path, &how)
		if err == unix.EINTR || (err == unix.EAGAIN && i < 16) {
			continue
		}
		return fd, err
	}
}

// fdPath is the kernel's path for an open descriptor.
func fdPath(fd int) (string, error) {
	link := "/proc/self/fd/" + strconv.Itoa(fd)
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlink(link, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

func fstatFD(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	return st, err
}

func sameFile(a, b *unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

func statInfo(st *unix.Stat_t) Info {
	m := fileModeFromUnix(st.Mode)
	return Info{
		Size:      st.Size,
		Mode:      m,
		IsDir:     m.IsDir(),
		IsSymlink: m&fs.ModeSymlink != 0,
		Nlink:     uint64(st.Nlink),
		ModTime:   time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
	}
}

func readlinkAt(dirfd int, name string) string {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return ""
		}
		if n < size {
			return string(buf[:n])
		}
	}
	return ""
}

// joinClean joins a clean absolute directory and a validated child name.
func joinClean(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func clearNonblock(fd int) {
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
}

// ---------------------------------------------------------------------------
// Denials and errors.

func (fa *FileAccess) denial(op, display, rule string) *Denial {
	return &Denial{Op: op, Path: display, Base: filepath.Base(display), Rule: rule, Mode: fa.mode}
}

func filePathErr(op, display string, err error) error {
	return &fs.PathError{Op: op, Path: display, Err: err}
}

// openErr maps an openat2 failure to what the model should see.
func (fa *FileAccess) openErr(op, display string, err error, symlinksRefused bool) error {
	switch {
	case errors.Is(err, unix.EXDEV):
		return fa.denial(op, display, RuleOutside)
	case errors.Is(err, unix.ELOOP) && symlinksRefused:
		return fa.denial(op, display, RuleSymlink)
	}
	return filePathErr(op, display, err)
}

// checkFD judges an opened descriptor by where it really is: never on a
// pseudo-filesystem or under (or the same inode as) a masked path, and in
// restricted mode never outside the granted roots. It returns the real
// path.
func (fa *FileAccess) checkFD(op, display string, fd int, st *unix.Stat_t, within []string) (string, error) {
	real, err := fdPath(fd)
	if err != nil {
		if fa.mode == ModeOff {
			return "", nil
		}
		return "", filePathErr(op, display, fmt.Errorf("cannot verify the opened path: %w", err))
	}
	if fa.mode == ModeOff {
		return real, nil
	}
	if !strings.HasPrefix(real, "/") {
		return "", fa.denial(op, display, RuleOutside)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return "", filePathErr(op, display, err)
	}
	if sfs.Type == unix.PROC_SUPER_MAGIC || sfs.Type == unix.SYSFS_MAGIC {
		return "", fa.denial(op, display, RuleDenylist)
	}
	ds := fa.denyNow()
	if ds.deniedPath(real) || ds.deniedPath(strings.TrimSuffix(real, " (deleted)")) || ds.deniedStat(st) {
		return "", fa.denial(op, display, RuleDenylist)
	}
	if within != nil && !slices.ContainsFunc(within, func(r string) bool { return Within(real, r) }) {
		return "", fa.denial(op, display, RuleOutside)
	}
	return real, nil
}

// Resolve turns a model-supplied path into an absolute cleaned path (relative
// paths are relative to the workdir) and the form the model should see. It
// refuses NUL bytes, a leading "~", an empty path and invalid UTF-8 before
// any syscall; ".." leaving the workdir is for the mode's root rules to judge.
func (fa *FileAccess) Resolve(path string) (abs, display string, err error) {
	return fa.resolve("resolve", path)
}

func (fa *FileAccess) resolve(op, path string) (abs, display string, err error) {
	abs, display, ok := cleanModelPath(fa.workdir, path)
	if !ok {
		return "", "", &Denial{Op: op, Path: path, Base: filepath.Base(path), Rule: RuleInvalidPath, Mode: fa.mode}
	}
	return abs, display, nil
}
