//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The git sweep. A repository is code that waits: its config
// (core.fsmonitor, core.pager, aliases) and hooks run when the user's own
// git reaches it, and a sandboxed command can leave one where it will
// (a gitlink in the writable index, a `gitdir:` file, a linked worktree's
// commondir, a bare repository the user later enters). Mounts cannot stop
// that: a repository is ordinary files in a writable worktree. So after
// every sandboxed spawn ends, the launcher walks the write roots (and a
// common git dir outside them) and sets aside every git directory and
// every `.git` file or link that was not there, unchanged, before the spawn
// began; git no longer takes what was set aside for a repository (docs/security.md,
// "Git").
//
// Why it holds: git takes a directory for a repository only when it holds
// an entry named HEAD (is_git_directory), and finds one in a worktree only
// through an entry named `.git` or the directory itself; a sweep that
// renames every such HEAD and `.git` the spawn created or touched leaves
// git nothing to run. The walk re-lists only directories whose ctime or
// inode changed since the last walk: an entry created, removed or renamed
// in a directory changes its ctime, which no unprivileged process can set
// back. Git's code-running files inside a known repository (config,
// config.worktree, commondir, gitdir, hooks/ and each hook) are compared by
// inode and ctime, since they change in place.
//
// Every host-side operation of the sweep in a tree a sandbox can write goes
// through descriptors it holds: each directory is opened relative to its
// parent's (O_NOFOLLOW), renamed entries are renamed relative to the held
// parent (renameat2 with RENAME_NOREPLACE), and a directory's mode is
// changed through an O_PATH descriptor held on it. It never moves, renames
// or creates anything at, beneath or above a protected path (docs/protected-paths.md,
// "Protected paths and runner state"): a repository planted beside a
// protected file is ended by renaming what is not protected (HEAD; else
// commondir, refs or objects), and one a protected name keeps alive is
// reported, not moved.
//
// One sweeper serves the whole process: every session's spawns count in one
// busy period, the record of what is known is taken again only when no
// sandboxed spawn runs (so nothing a running command planted is taken for
// the user's), and each spawn's end sweeps everything before the count
// drops.

// quarantineSuffix is appended to what the sweep sets aside.
const quarantineSuffix = ".evener-quarantine"

// sweepMaxDepth bounds the walk (one descriptor per level). A deeper tree
// refuses the next spawn: the sweep never skips what it cannot reach.
const sweepMaxDepth = 512

type fileID struct {
	dev, ino uint64
	ctime    unix.Timespec
	mode     uint32
	size     int64
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: st.Dev, ino: st.Ino, ctime: st.Ctim, mode: st.Mode, size: st.Size}
}

func (a fileID) sameInode(b fileID) bool { return a.dev == b.dev && a.ino == b.ino }

// dirFacts is what one listing of a directory said.
type dirFacts struct {
	id      fileID
	subdirs []string
	gitDir  bool // HEAD, and commondir or objects and refs: git's own test
	dotGit  bool // a `.git` entry that is not a directory
}

// surface is one code-running file of a git dir as last seen. inert marks
// the placeholders Inspect pre-creates (an empty file, an empty hooks
// directory, commondir holding "."), whose appearance changes nothing.
type surface struct {
	id    fileID
	inert bool
}

type gitRecord struct {
	dir  fileID
	surf map[string]surface
}

type sweepSnap struct {
	gitDirs map[string]gitRecord
	links   map[string]fileID // `.git` files and symlinks
}

func newSnap() *sweepSnap {
	return &sweepSnap{gitDirs: map[string]gitRecord{}, links: map[string]fileID{}}
}

type gitSweeper struct {
	mu      sync.Mutex // guards every field below
	running int
	roots   []string
	cache   map[string]*dirFacts
	base    *sweepSnap
	// pins is the sorted list of known git dirs and `.git` links as of the
	// last record walk: every spawn of one busy period pins the same ones,
	// so none of them can be swapped by a command that started earlier.
	pinDirs, pinLinks []string
	poison            error
	// commons are the worktrees' own common git dirs. Inspect pins their
	// surfaces (pre-created when absent) in every writing spawn, so a
	// change to them came from outside every sandbox (the user's own `git
	// config` while a command ran): it is recorded, not set aside.
	commons []string
	// protect holds every spelling of every session's protected paths:
	// the sweep never moves, renames or creates anything at, beneath or
	// above one (a rename of an ancestor moves it too). What it cannot
	// set aside for that reason it reports.
	protect []string
}

var theSweeper = &gitSweeper{cache: map[string]*dirFacts{}}

// sweepListed counts directory listings (tests and benchmarks).
var sweepListed atomic.Int64

// sweepTicket is one sandboxed spawn's share of the sweep, and of the
// protected-in-git check (gitprotect.go).
type sweepTicket struct {
	sw      *gitSweeper
	workdir string
	guard   *guardTicket
}

// sweepRoots are the directories a spawn under p can write persistent git
// state in: its write roots and a common git dir outside them.
func sweepRoots(p *Policy) (roots []string, common string) {
	roots = slices.Clone(p.WriteRoots())
	if _, _, c, err := discoverRepo(p.Workdir()); err == nil && c != "" {
		common = c
		if !underAny(common, roots) {
			roots = append(roots, common)
		}
	}
	return roots, common
}

// sweepBegin opens a spawn's share of the sweep (nil when the policy
// writes nothing persistent). It refuses the spawn when an earlier sweep
// could not set something aside.
func (s *Launcher) sweepBegin() (*sweepTicket, error) {
	p := s.p.Load()
	if p.Mode() == ModeOff || !p.writes() {
		return nil, nil
	}
	roots, common := sweepRoots(p)
	protect := p.protectSpellings()
	theSweeper.mu.Lock()
	if common != "" && !slices.Contains(theSweeper.commons, common) {
		theSweeper.commons = append(theSweeper.commons, common)
	}
	theSweeper.addProtected(protect)
	theSweeper.mu.Unlock()
	tk, err := theSweeper.begin(roots, p.Workdir())
	if err != nil {
		return nil, err
	}
	if tk.guard, err = theGuard.begin(p); err != nil {
		tk.end(&Result{})
		return nil, err
	}
	return tk, nil
}

// addProtected adds spellings of protected paths (sw.mu held).
func (sw *gitSweeper) addProtected(paths []string) {
	for _, q := range paths {
		if q = filepath.Clean(q); filepath.IsAbs(q) && !slices.Contains(sw.protect, q) {
			sw.protect = append(sw.protect, q)
		}
	}
}

// touchesProtected: path is a protected path, lies beneath one, or holds
// one (sw.mu held).
func (sw *gitSweeper) touchesProtected(path string) bool {
	return slices.ContainsFunc(sw.protect, func(q string) bool { return Within(path, q) || Within(q, path) })
}

// begin counts a spawn in, first taking a new record of what is known
// when none runs.
func (sw *gitSweeper) begin(roots []string, workdir string) (*sweepTicket, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.poison != nil {
		// Try again: the user may have removed what stood in the way.
		if _, err := sw.walk(sw.roots, true, nil); err != nil {
			sw.poison = err
			return nil, sw.refusal(workdir, err)
		}
		sw.poison = nil
	}
	if sw.running == 0 && sw.base != nil {
		if _, err := sw.walk(sw.roots, false, nil); err != nil {
			return nil, sw.refusal(workdir, err)
		}
	}
	if err := sw.addRoots(roots); err != nil {
		return nil, sw.refusal(workdir, err)
	}
	sw.running++
	return &sweepTicket{sw: sw, workdir: workdir}, nil
}

func (sw *gitSweeper) refusal(workdir string, err error) error {
	return fmt.Errorf("%w: git sweep: %s", ErrUnsafeLayout, displayErr(err, workdir))
}

// end sweeps after the spawn and fills res: what the sweep set aside
// (Quarantined) and what the protected-in-git check set back
// (GitProtected).
func (t *sweepTicket) end(res *Result) {
	if t == nil {
		return
	}
	res.Quarantined = t.sweep()
	res.GitProtected = t.guard.end()
}

// sweep sweeps after the spawn and returns what it set aside, as paths
// relative to the worktree.
func (t *sweepTicket) sweep() []string {
	sw := t.sw
	sw.mu.Lock()
	defer sw.mu.Unlock()
	defer func() { sw.running-- }()
	var found []string
	_, err := sw.walk(sw.roots, true, func(path, what string) {
		found = append(found, sweepDisplay(path, t.workdir)+": "+what)
	})
	if err != nil {
		sw.poison = err
		found = append(found, "the git sweep failed, later commands are refused until this is resolved: "+displayErr(err, t.workdir))
	}
	return found
}

// addRoots adds roots not yet covered and records what is under them.
// A new root that holds known roots is walked without them, so nothing a
// running spawn planted under those is recorded as known.
func (sw *gitSweeper) addRoots(roots []string) error {
	var fresh []string
	for _, r := range roots {
		if !underAny(r, sw.roots) && !slices.Contains(fresh, r) {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if sw.base == nil {
		sw.base = newSnap()
	}
	skip := slices.Clone(sw.roots)
	snap := newSnap()
	if err := sw.walkInto(snap, fresh, skip, false, nil); err != nil {
		return err
	}
	for k, v := range snap.gitDirs {
		sw.base.gitDirs[k] = v
	}
	for k, v := range snap.links {
		sw.base.links[k] = v
	}
	all := append(sw.roots, fresh...)
	sw.roots = sw.roots[:0:0]
	for _, r := range all {
		if !slices.ContainsFunc(all, func(o string) bool { return o != r && Within(r, o) }) {
			sw.roots = append(sw.roots, r)
		}
	}
	sw.setPins()
	return nil
}

func (sw *gitSweeper) setPins() {
	sw.pinDirs, sw.pinLinks = sw.pinDirs[:0:0], sw.pinLinks[:0:0]
	for k := range sw.base.gitDirs {
		sw.pinDirs = append(sw.pinDirs, k)
	}
	for k := range sw.base.links {
		sw.pinLinks = append(sw.pinLinks, k)
	}
	slices.Sort(sw.pinDirs)
	slices.Sort(sw.pinLinks)
}

// walk walks roots. With neutralise it sets aside what the base does not
// account for and reports it; without, it records what it finds as known.
// Either way the base becomes what is there now.
func (sw *gitSweeper) walk(roots []string, neutralise bool, report func(path, what string)) (*sweepSnap, error) {
	snap := newSnap()
	if err := sw.walkInto(snap, roots, nil, neutralise, report); err != nil {
		return nil, err
	}
	sw.base = snap
	if !neutralise {
		sw.setPins()
	}
	return snap, nil
}

func (sw *gitSweeper) walkInto(snap *sweepSnap, roots, skip []string, neutralise bool, report func(path, what string)) error {
	if report == nil {
		report = func(string, string) {}
	}
	w := &sweepWalk{sw: sw, snap: snap, skip: skip, neutralise: neutralise, report: report}
	defer func() {
		if len(w.gone) == 0 {
			return
		}
		sw.roots = slices.DeleteFunc(sw.roots, func(r string) bool { return slices.Contains(w.gone, r) })
		for k := range sw.cache {
			if underAny(k, w.gone) {
				delete(sw.cache, k)
			}
		}
	}()
	for _, r := range roots {
		fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			// Gone, or no longer a directory: no sandbox can do that to a
			// write root (each is a mount point inside), and no spawn
			// binds one that is not a directory (Inspect). Forget it.
			w.gone = append(w.gone, r)
			continue
		}
		if err != nil {
			return &sweepError{path: r, msg: "cannot open a write root", err: err}
		}
		err = w.visit(fd, -1, "", r, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

type sweepError struct {
	path, msg string
	err       error
}

func (e *sweepError) Error() string {
	if e.err == nil {
		return e.path + ": " + e.msg
	}
	return e.path + ": " + e.msg + ": " + e.err.Error()
}

type sweepWalk struct {
	sw         *gitSweeper
	snap       *sweepSnap
	skip       []string
	neutralise bool
	report     func(path, what string)
	gone       []string // roots that no longer exist
}

// visit handles the directory open at fd, named name in parent (parent -1
// for a root), at path.
func (w *sweepWalk) visit(fd, parent int, name, path string, depth int) error {
	if depth > sweepMaxDepth {
		return &sweepError{path: path, msg: fmt.Sprintf("the tree is deeper than %d levels, so the git sweep cannot check it; remove it outside the sandbox", sweepMaxDepth)}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &sweepError{path: path, msg: "stat", err: err}
	}
	f := w.sw.cache[path]
	if f == nil || f.id != idOf(&st) {
		var err error
		if f, err = list(fd, path, &st); err != nil {
			return err
		}
		w.sw.cache[path] = f
	}
	if f.dotGit {
		if err := w.link(fd, path); err != nil {
			return err
		}
	}
	if f.gitDir {
		newPath, err := w.gitDir(fd, parent, name, path)
		if err != nil {
			return err
		}
		path = newPath
	}
	for _, sub := range f.subdirs {
		subPath := filepath.Join(path, sub)
		if slices.Contains(w.skip, subPath) {
			continue
		}
		// An unchanged directory without subdirectories that holds no git
		// shape costs one stat: most of a tree's directories are leaves.
		var cst unix.Stat_t
		if err := unix.Fstatat(fd, sub, &cst, unix.AT_SYMLINK_NOFOLLOW); err == nil && cst.Mode&unix.S_IFMT == unix.S_IFDIR {
			if cf := w.sw.cache[subPath]; cf != nil && cf.id == idOf(&cst) && len(cf.subdirs) == 0 && !cf.gitDir && !cf.dotGit {
				continue
			}
		}
		cfd, restore, err := openDirAt(fd, sub, subPath)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				// Changed since it was listed (by whom the sweep just set
				// aside, or a concurrent command): list it again next time.
				delete(w.sw.cache, path)
				continue
			}
			return err
		}
		err = w.visit(cfd, fd, sub, subPath, depth+1)
		unix.Close(cfd)
		restore()
		if err != nil {
			return err
		}
	}
	return nil
}

// list reads the directory open at fd.
func list(fd int, path string, st *unix.Stat_t) (*dirFacts, error) {
	sweepListed.Add(1)
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &sweepError{path: path, msg: "cannot list", err: err}
	}
	dir := os.NewFile(uintptr(dfd), path)
	ents, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, &sweepError{path: path, msg: "cannot list", err: err}
	}
	f := &dirFacts{id: idOf(st)}
	has := map[string]bool{}
	for _, e := range ents {
		n := e.Name()
		switch n {
		case "HEAD", "commondir", "objects", "refs":
			has[n] = true
		}
		if e.IsDir() {
			f.subdirs = append(f.subdirs, n)
		} else if n == ".git" {
			f.dotGit = true
		}
	}
	f.gitDir = has["HEAD"] && (has["commondir"] || (has["objects"] && has["refs"]))
	return f, nil
}

// openDirAt opens name in dirfd as a directory without following a link.
// A directory this user owns but cannot read (a command may chmod one to
// hide what it holds) is opened for the walk and given its mode back
// afterwards, both through a descriptor held on it (O_PATH), never by name:
// a command that swaps the name for a link meanwhile changes nothing.
// One owned by another user fails the sweep.
func openDirAt(dirfd int, name, path string) (int, func(), error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err == nil {
		return fd, func() {}, nil
	}
	if !errors.Is(err, unix.EACCES) {
		return -1, nil, err
	}
	pfd, e := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if e != nil {
		return -1, nil, &sweepError{path: path, msg: "cannot read", err: e}
	}
	var st unix.Stat_t
	if e := unix.Fstat(pfd, &st); e != nil || int(st.Uid) != os.Geteuid() {
		unix.Close(pfd)
		return -1, nil, &sweepError{path: path, msg: "cannot read a directory another user owns", err: err}
	}
	mode := st.Mode & 0o7777
	if e := chmodFD(pfd, mode|0o700); e != nil {
		unix.Close(pfd)
		return -1, nil, &sweepError{path: path, msg: "cannot read", err: e}
	}
	restore := func() {
		_ = chmodFD(pfd, mode)
		unix.Close(pfd)
	}
	if fd, err = unix.Openat(pfd, ".", flags, 0); err != nil {
		restore()
		return -1, nil, &sweepError{path: path, msg: "cannot read", err: err}
	}
	return fd, restore, nil
}

// chmodFD changes the mode of what the O_PATH descriptor fd holds (fchmod
// refuses such a descriptor; its /proc/self/fd link names the inode, not
// a path).
func chmodFD(fd int, mode uint32) error {
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
}

// link checks the `.git` file or symlink in the directory open at fd.
func (w *sweepWalk) link(fd int, dir string) error {
	path := filepath.Join(dir, ".git")
	var st unix.Stat_t
	if err := unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		delete(w.sw.cache, dir)
		return nil
	}
	id := idOf(&st)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		delete(w.sw.cache, dir)
		return nil
	}
	if w.neutralise {
		if b, ok := w.sw.base.links[path]; !ok || b != id {
			if w.sw.touchesProtected(path) {
				// Never moved (docs/security.md, "Git"): reported, and known from now on.
				w.report(path, "a .git file or link that changed, left in place: it is a protected path; check it outside the sandbox")
				w.snap.links[path] = id
				return nil
			}
			to, err := w.setAside(fd, ".git", path)
			if err != nil {
				return err
			}
			delete(w.sw.cache, dir)
			w.report(path, "a .git file or link the command left or changed, renamed to "+to)
			return nil
		}
	}
	w.snap.links[path] = id
	return nil
}

// gitDir checks the git directory open at fd and returns its path, which
// changes when a `.git` directory is set aside.
func (w *sweepWalk) gitDir(fd, parent int, name, path string) (string, error) {
	rec, err := recordGit(fd, path)
	if err != nil {
		return path, err
	}
	if !w.neutralise {
		w.snap.gitDirs[path] = rec
		return path, nil
	}
	b, known := w.sw.base.gitDirs[path]
	if known && b.dir.sameInode(rec.dir) && (sameSurfaces(b.surf, rec.surf) || slices.Contains(w.sw.commons, path)) {
		w.snap.gitDirs[path] = rec
		return path, nil
	}
	what := "a repository the command created or moved here"
	if known && b.dir.sameInode(rec.dir) {
		what = "a repository whose config or hooks the command changed"
	}
	// Git takes a directory for a repository only with HEAD and either
	// commondir or objects and refs: renaming HEAD ends it, else commondir
	// and one of the others. Nothing at, beneath or above a protected path
	// is moved (docs/security.md, "Git"): such a name is left and reported.
	var renamed, kept []string
	exists := func(n string) bool {
		var st unix.Stat_t
		return unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	}
	aside := func(n string) (bool, error) {
		if !exists(n) {
			return false, nil
		}
		if w.sw.touchesProtected(filepath.Join(path, n)) {
			kept = append(kept, n)
			return false, nil
		}
		to, err := w.setAside(fd, n, filepath.Join(path, n))
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		renamed = append(renamed, n+" -> "+to)
		return true, nil
	}
	for _, n := range []string{"HEAD", "config"} {
		if _, err := aside(n); err != nil {
			return path, err
		}
	}
	if exists("HEAD") {
		if _, err := aside("commondir"); err != nil {
			return path, err
		}
		if !exists("commondir") {
			for _, n := range []string{"refs", "objects"} {
				if ok, err := aside(n); err != nil || ok {
					if err != nil {
						return path, err
					}
					break
				}
			}
		}
	}
	live := func() bool { return exists("HEAD") && (exists("commondir") || (exists("objects") && exists("refs"))) }
	if live() {
		// Protected names keep it a repository: what else runs code goes.
		for _, n := range []string{"hooks", "config.worktree"} {
			if _, err := aside(n); err != nil {
				return path, err
			}
		}
	}
	delete(w.sw.cache, path)
	newPath := path
	if name == ".git" && parent >= 0 && !w.sw.touchesProtected(path) {
		to, err := w.setAside(parent, ".git", path)
		if err != nil {
			return path, err
		}
		delete(w.sw.cache, filepath.Dir(path))
		newPath = filepath.Join(filepath.Dir(path), to)
		renamed = append(renamed, ".git -> "+to)
	} else if live() {
		// Left a repository: only protected paths do that, which no
		// sandbox that protects them can write. Reported, and known from
		// now on (its surfaces as they are now).
		rec, err := recordGit(fd, path)
		if err != nil {
			return path, err
		}
		w.snap.gitDirs[path] = rec
		set := ""
		if len(renamed) > 0 {
			set = "; set aside: " + strings.Join(renamed, ", ")
		}
		w.report(path, what+", left in place: the protected "+strings.Join(kept, ", ")+" keep it a repository"+set+"; check it outside the sandbox")
		return path, nil
	}
	note := ""
	if len(kept) > 0 {
		note = "; left in place, being protected: " + strings.Join(kept, ", ")
	}
	w.report(path, what+", set aside ("+strings.Join(renamed, ", ")+")"+note)
	return newPath, nil
}

// recordGit reads the code-running surfaces of the git dir open at fd.
func recordGit(fd int, path string) (gitRecord, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return gitRecord{}, &sweepError{path: path, msg: "stat", err: err}
	}
	rec := gitRecord{dir: idOf(&st), surf: map[string]surface{}}
	for _, n := range gitSurfaces {
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		s := surface{id: idOf(&st)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			switch n {
			case "commondir":
				s.inert = st.Size == 2 && readAt(fd, n) == ".\n"
			case "config", "config.worktree", "gitdir":
				s.inert = st.Size == 0
			}
		case unix.S_IFDIR:
			if n != "hooks" {
				break
			}
			hfd, restore, err := openDirAt(fd, n, filepath.Join(path, n))
			if err != nil {
				return rec, err
			}
			hooks := os.NewFile(uintptr(hfd), path)
			names, err := hooks.Readdirnames(-1)
			if err != nil {
				hooks.Close()
				restore()
				return rec, &sweepError{path: filepath.Join(path, n), msg: "cannot list", err: err}
			}
			for _, h := range names {
				var hst unix.Stat_t
				if unix.Fstatat(hfd, h, &hst, unix.AT_SYMLINK_NOFOLLOW) == nil {
					rec.surf["hooks/"+h] = surface{id: idOf(&hst)}
				}
			}
			hooks.Close()
			restore()
			s.inert = len(names) == 0
		}
		rec.surf[n] = s
	}
	return rec, nil
}

func readAt(dirfd int, name string) string {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	buf := make([]byte, 8)
	n, _ := unix.Read(fd, buf)
	return string(buf[:max(n, 0)])
}

// sameSurfaces: nothing that runs code changed. A surface that appeared as
// an inert placeholder (Inspect creates those to pin them) is no change.
func sameSurfaces(before, now map[string]surface) bool {
	for k, b := range before {
		n, ok := now[k]
		if !ok || n.id != b.id {
			if ok || !b.inert {
				return false
			}
			// An inert placeholder that went away changes nothing either.
		}
	}
	for k, n := range now {
		if _, ok := before[k]; !ok && !n.inert {
			return false
		}
	}
	return true
}

// setAside renames name (at path) in dirfd to name+quarantineSuffix (then
// .1, .2, ... when taken or protected), relative to the held directory,
// never replacing anything, and returns the new name.
func (w *sweepWalk) setAside(dirfd int, name, path string) (string, error) {
	for i := 0; i < 1000; i++ {
		to := name + quarantineSuffix
		if i > 0 {
			to = fmt.Sprintf("%s.%d", to, i)
		}
		if w.sw.touchesProtected(filepath.Join(filepath.Dir(path), to)) {
			continue
		}
		err := unix.Renameat2(dirfd, name, dirfd, to, unix.RENAME_NOREPLACE)
		if err == nil {
			return to, nil
		}
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if errors.Is(err, unix.ENOENT) {
			return "", err
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			// A directory the command made read-only: give this user its
			// write permission back and try once more.
			var st unix.Stat_t
			if unix.Fstat(dirfd, &st) == nil && int(st.Uid) == os.Geteuid() && unix.Fchmod(dirfd, (st.Mode&0o7777)|0o700) == nil {
				if err = unix.Renameat2(dirfd, name, dirfd, to, unix.RENAME_NOREPLACE); err == nil {
					return to, nil
				}
			}
		}
		return "", &sweepError{path: path, msg: "could not set it aside", err: err}
	}
	return "", &sweepError{path: path, msg: "could not set it aside: every quarantine name is taken"}
}

// displayPath names path for the model and the audit: relative to the
// worktree, or the last two elements of a path outside it (never a whole
// host path).
func sweepDisplay(path, workdir string) string {
	if Within(path, workdir) {
		if r, err := filepath.Rel(workdir, path); err == nil {
			return r
		}
	}
	return "(outside the worktree) .../" + filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
}

func displayErr(err error, workdir string) string {
	var se *sweepError
	if errors.As(err, &se) {
		msg := sweepDisplay(se.path, workdir) + ": " + se.msg
		if se.err != nil {
			var errno unix.Errno
			if errors.As(se.err, &errno) {
				msg += " (" + errno.Error() + ")"
			} else if pe := (*fs.PathError)(nil); errors.As(se.err, &pe) {
				msg += " (" + pe.Err.Error() + ")"
			}
		}
		return msg
	}
	return "internal error"
}

// nestedGitPins returns the user's git dirs and `.git` links under roots
// that a spawn pins (the sweeper's list for this busy period, or a fresh
// walk when no session has swept yet).
func nestedGitPins(roots []string) (dirs, links []string) {
	sw := theSweeper
	sw.mu.Lock()
	covered := sw.base != nil && !slices.ContainsFunc(roots, func(r string) bool { return !underAny(r, sw.roots) })
	if covered {
		dirs, links = slices.Clone(sw.pinDirs), slices.Clone(sw.pinLinks)
		sw.mu.Unlock()
	} else {
		sw.mu.Unlock()
		tmp := &gitSweeper{cache: map[string]*dirFacts{}, base: newSnap()}
		snap := newSnap()
		if tmp.walkInto(snap, roots, nil, false, nil) != nil {
			return nil, nil
		}
		for k := range snap.gitDirs {
			dirs = append(dirs, k)
		}
		for k := range snap.links {
			links = append(links, k)
		}
		slices.Sort(dirs)
		slices.Sort(links)
	}
	keep := func(p string) bool { return underAny(p, roots) }
	return slices.DeleteFunc(dirs, func(p string) bool { return !keep(p) }), slices.DeleteFunc(links, func(p string) bool { return !keep(p) })
}
