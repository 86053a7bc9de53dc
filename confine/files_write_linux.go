//go:build linux

package confine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Writes: WriteFile, Remove and Rename. A target is checked lexically
// (writeTarget), its parent opened relative to a held root with no symlink
// on the way (openParent), and the content written to a temp file beside
// the target, synced and renamed over it, so a reader sees the old file or
// the new one, never a part.

// writeTarget is a write, delete or rename end resolved against its root.
type writeTarget struct {
	abs, display string
	root         *heldRoot
	parentRel    string // relative to root, "." for the root itself
	base         string
}

// writeTarget applies the write rules that need no syscall: path
// validity, the denylist, git metadata and the mode's write roots.
func (fa *FileAccess) writeTarget(op, path string) (writeTarget, error) {
	abs, display, err := fa.resolve(op, path)
	if err != nil {
		return writeTarget{}, err
	}
	t := writeTarget{abs: abs, display: display}
	var roots []*heldRoot
	switch fa.mode {
	case ModeOff:
		roots = []*heldRoot{&fa.slash}
	case ModeWorkspaceWrite:
		roots = []*heldRoot{&fa.wd}
		for i := range fa.adds {
			roots = append(roots, &fa.adds[i])
		}
	case ModeRestricted:
		if !fa.writesBlocked {
			roots = []*heldRoot{&fa.wd}
		}
	}
	if (fa.mode == ModeWorkspaceWrite || fa.mode == ModeRestricted) && !fa.writesBlocked {
		for i := range fa.grants {
			roots = append(roots, &fa.grants[i])
		}
	}
	if fa.scr != nil && fa.mode != ModeOff {
		roots = append(roots, fa.scr)
	}
	if fa.mode != ModeOff {
		// Runner state: writable in every sandboxed mode (protect.go).
		for i := range fa.state {
			roots = append(roots, &fa.state[i])
		}
	}
	if fa.mode != ModeOff {
		if fa.denyNow().deniedPath(abs) {
			return t, fa.denial(op, display, RuleDenylist)
		}
		if fa.denyNow().protectedPath(abs) {
			return t, fa.denial(op, display, RuleProtected)
		}
		if Within(abs, fa.workdir) && hasGitComponent(relToRoot(fa.workdir, abs)) {
			return t, fa.denial(op, display, RuleGitMetadata)
		}
	}
	t.root = pickRoot(abs, roots)
	if t.root == nil {
		if fa.mode == ModeReadOnly || fa.writesBlocked {
			return t, fa.denial(op, display, RuleReadOnly)
		}
		return t, fa.denial(op, display, RuleOutside)
	}
	rel := relToRoot(t.root.path, abs)
	if rel == "." {
		return t, filePathErr(op, display, syscall.EISDIR)
	}
	if fa.mode != ModeOff && hasGitComponent(rel) {
		return t, fa.denial(op, display, RuleGitMetadata)
	}
	t.parentRel, t.base = ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		t.parentRel, t.base = rel[:i], rel[i+1:]
	}
	return t, nil
}

// createdDir is a directory made by CreateParents: a handle on its parent
// and its name, so a failed operation can remove it again.
type createdDir struct {
	parent int
	name   string
}

func undoDirs(dirs []createdDir) {
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = unix.Unlinkat(dirs[i].parent, dirs[i].name, unix.AT_REMOVEDIR)
		unix.Close(dirs[i].parent)
	}
}

func closeDirs(dirs []createdDir) {
	for _, d := range dirs {
		unix.Close(d.parent)
	}
}

// parentMode says what openParent does about missing parent directories.
type parentMode int

const (
	parentExisting parentMode = iota // they must exist
	parentCreate                     // create them now
	parentAnchor                     // return the deepest existing one and what is missing below it
)

const strictResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openParent opens t's parent directory relative to its root, refusing any
// symlink on the way (parentCreate: missing components are made one at a
// time; parentAnchor: the deepest existing ancestor is returned with the
// missing components below it). It returns an O_PATH descriptor, its real
// path, and, after checking it, the real location of the target.
func (fa *FileAccess) openParent(op string, t writeTarget, pm parentMode) (pfd int, real, missing string, made []createdDir, err error) {
	pfd, err = openat2Retry(t.root.fd, t.parentRel, unix.O_PATH|unix.O_DIRECTORY, strictResolve)
	if errors.Is(err, unix.ENOENT) {
		switch pm {
		case parentCreate:
			pfd, made, err = mkParents(t.root.fd, t.parentRel)
		case parentAnchor:
			pfd, missing, err = openAnchor(t.root.fd, t.parentRel)
		}
	}
	if err != nil {
		return -1, "", "", nil, fa.openErr(op, t.display, err, true)
	}
	defer func() {
		if err != nil {
			unix.Close(pfd)
			undoDirs(made)
			made = nil
		}
	}()
	st, err := fstatFD(pfd)
	if err != nil {
		return -1, "", "", nil, filePathErr(op, t.display, err)
	}
	var within []string
	if fa.mode != ModeOff {
		within = []string{t.root.real, t.root.path}
	}
	real, err = fa.checkFD(op, t.display, pfd, &st, within)
	if err != nil {
		return -1, "", "", nil, err
	}
	if fa.mode != ModeOff {
		target := filepath.Join(real, missing, t.base)
		if fa.denyNow().deniedPath(target) {
			return -1, "", "", nil, fa.denial(op, t.display, RuleDenylist)
		}
		if fa.denyNow().protectedPath(target) {
			return -1, "", "", nil, fa.denial(op, t.display, RuleProtected)
		}
		if Within(target, fa.workdir) && hasGitComponent(relToRoot(fa.workdir, target)) {
			return -1, "", "", nil, fa.denial(op, t.display, RuleGitMetadata)
		}
	}
	return pfd, real, missing, made, nil
}

// openAnchor walks rel from dirfd and returns the deepest directory that
// exists and the components missing below it.
func openAnchor(dirfd int, rel string) (int, string, error) {
	cur, err := openat2Retry(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY, strictResolve)
	if err != nil {
		return -1, "", err
	}
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		next, err := openat2Retry(cur, c, unix.O_PATH|unix.O_DIRECTORY, strictResolve)
		if errors.Is(err, unix.ENOENT) {
			return cur, strings.Join(comps[i:], "/"), nil
		}
		unix.Close(cur)
		if err != nil {
			return -1, "", err
		}
		cur = next
	}
	return cur, "", nil
}

// mkParents walks rel one component at a time from dirfd, creating what is
// missing, never following a symlink.
func mkParents(dirfd int, rel string) (int, []createdDir, error) {
	const resolve = strictResolve
	cur, err := openat2Retry(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY, resolve)
	if err != nil {
		return -1, nil, err
	}
	var made []createdDir
	fail := func(err error) (int, []createdDir, error) {
		unix.Close(cur)
		undoDirs(made)
		return -1, nil, err
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := openat2Retry(cur, c, unix.O_PATH|unix.O_DIRECTORY, resolve)
		if errors.Is(err, unix.ENOENT) {
			switch merr := unix.Mkdirat(cur, c, 0o755); {
			case merr == nil:
				keep, derr := unix.FcntlInt(uintptr(cur), unix.F_DUPFD_CLOEXEC, 0)
				if derr != nil {
					return fail(derr)
				}
				made = append(made, createdDir{parent: keep, name: c})
			case !errors.Is(merr, unix.EEXIST):
				return fail(merr)
			}
			next, err = openat2Retry(cur, c, unix.O_PATH|unix.O_DIRECTORY, resolve)
		}
		if err != nil {
			return fail(err)
		}
		unix.Close(cur)
		cur = next
	}
	return cur, made, nil
}

// targetKind inspects the final name in the held parent without following
// it: absent, or a regular file (its stat), else a denial.
func (fa *FileAccess) targetKind(op, display string, pfd int, base string) (exists bool, st unix.Stat_t, err error) {
	err = unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return false, st, nil
	}
	if err != nil {
		return false, st, filePathErr(op, display, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return true, st, nil
	case unix.S_IFLNK:
		return true, st, fa.denial(op, display, RuleSymlink)
	case unix.S_IFDIR:
		return true, st, filePathErr(op, display, syscall.EISDIR)
	}
	return true, st, fa.denial(op, display, RuleNotRegular)
}

func stageTempName(base string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	const suffix = 1 + 8 + 16 // ".evener-" + hex
	if max := 255 - 1 - suffix; len(base) > max {
		base = base[:max]
	}
	return "." + base + ".evener-" + hex.EncodeToString(b[:])
}

// fileMeta is what a replacement keeps of the file it replaces.
type fileMeta struct {
	perm     uint32
	uid, gid int
	chown    bool
}

func metaFor(exists bool, st *unix.Stat_t, o WriteOptions) fileMeta {
	m := fileMeta{perm: 0o644}
	if exists {
		m.perm = st.Mode & 0o777
		// Running as root, keep the owner of the file being replaced (a
		// new inode would otherwise belong to root).
		if os.Geteuid() == 0 && (int(st.Uid) != 0 || int(st.Gid) != os.Getegid()) {
			m.uid, m.gid, m.chown = int(st.Uid), int(st.Gid), true
		}
	}
	if o.Mode != 0 {
		m.perm = uint32(o.Mode.Perm())
	}
	return m
}

// writeTemp creates a temp file beside base in pfd with data and meta, and
// returns its name. Nothing is left behind on failure.
func writeTemp(pfd int, base string, data []byte, m fileMeta) (string, error) {
	var name string
	var fd int
	var err error
	for range 16 {
		name = stageTempName(base)
		fd, err = unix.Openat(pfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		unix.Close(fd)
		_ = unix.Unlinkat(pfd, name, 0)
		return "", err
	}
	for off := 0; off < len(data); {
		n, err := unix.Write(fd, data[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail(err)
		}
		off += n
	}
	if err := unix.Fsync(fd); err != nil {
		return fail(err)
	}
	if m.chown {
		_ = unix.Fchown(fd, m.uid, m.gid) // best effort: a foreign owner is not worth failing a write
	}
	if err := unix.Fchmod(fd, m.perm); err != nil {
		return fail(err)
	}
	if err := unix.Close(fd); err != nil {
		_ = unix.Unlinkat(pfd, name, 0)
		return "", err
	}
	return name, nil
}

func syncDirFD(pfd int) {
	if fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Fsync(fd)
		unix.Close(fd)
	}
}

// replaceAt atomically makes base in pfd hold data: temp file, fsync,
// rename over. A hard link in base's place is replaced, not written
// through.
func replaceAt(pfd int, base string, data []byte, m fileMeta) error {
	tmp, err := writeTemp(pfd, base, data, m)
	if err != nil {
		return err
	}
	if err := unix.Renameat(pfd, tmp, pfd, base); err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return err
	}
	syncDirFD(pfd)
	return nil
}

// WriteFile creates or replaces path atomically under the write rules:
// off anywhere; read-only the scratch only; workspace-write the workdir,
// the add-dirs and the scratch; restricted the workdir and the scratch.
// The denylist, .git components and symlinks are always refused (off
// refuses only symlinks). created reports a new file.
func (fa *FileAccess) WriteFile(path string, data []byte, o WriteOptions) (created bool, err error) {
	if err := fa.enter(); err != nil {
		return false, err
	}
	defer fa.leave()
	const op = "write"
	t, err := fa.writeTarget(op, path)
	if err != nil {
		return false, err
	}
	if int64(len(data)) > fa.opts.MaxWriteBytes {
		return false, fa.denial(op, t.display, RuleTooLarge)
	}
	pm := parentExisting
	if o.CreateParents {
		pm = parentCreate
	}
	pfd, _, _, made, err := fa.openParent(op, t, pm)
	if err != nil {
		return false, err
	}
	defer unix.Close(pfd)
	exists, st, err := fa.targetKind(op, t.display, pfd, t.base)
	if err == nil {
		err = replaceAt(pfd, t.base, data, metaFor(exists, &st, o))
		if err != nil {
			err = filePathErr(op, t.display, err)
		}
	}
	if err != nil {
		undoDirs(made)
		return false, err
	}
	closeDirs(made)
	return !exists, nil
}

// existingTarget resolves path under the write rules and opens its parent;
// the target must exist. The caller closes the returned descriptor.
func (fa *FileAccess) existingTarget(op, path string) (writeTarget, int, error) {
	t, err := fa.writeTarget(op, path)
	if err != nil {
		return t, -1, err
	}
	pfd, _, _, _, err := fa.openParent(op, t, parentExisting)
	if err != nil {
		return t, -1, err
	}
	exists, _, err := fa.targetKind(op, t.display, pfd, t.base)
	if err == nil && !exists {
		err = filePathErr(op, t.display, syscall.ENOENT)
	}
	if err != nil {
		unix.Close(pfd)
		return t, -1, err
	}
	return t, pfd, nil
}

// Remove deletes a regular file under the write rules.
func (fa *FileAccess) Remove(path string) error {
	if err := fa.enter(); err != nil {
		return err
	}
	defer fa.leave()
	const op = "delete"
	t, pfd, err := fa.existingTarget(op, path)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Unlinkat(pfd, t.base, 0); err != nil {
		return filePathErr(op, t.display, err)
	}
	return nil
}

// Rename moves a regular file; both ends follow the write rules, and an
// existing destination is never replaced (RENAME_NOREPLACE).
func (fa *FileAccess) Rename(from, to string) error {
	if err := fa.enter(); err != nil {
		return err
	}
	defer fa.leave()
	const op = "rename"
	ft, fpfd, err := fa.existingTarget(op, from)
	if err != nil {
		return err
	}
	defer unix.Close(fpfd)
	tt, err := fa.writeTarget(op, to)
	if err != nil {
		return err
	}
	tpfd, _, _, _, err := fa.openParent(op, tt, parentExisting)
	if err != nil {
		return err
	}
	defer unix.Close(tpfd)
	if exists, _, err := fa.targetKind(op, tt.display, tpfd, tt.base); err != nil || exists {
		if err == nil {
			err = filePathErr(op, tt.display, syscall.EEXIST)
		}
		return err
	}
	err = unix.Renameat2(fpfd, ft.base, tpfd, tt.base, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: link (which never
		// replaces) then unlink.
		if err = unix.Linkat(fpfd, ft.base, tpfd, tt.base, 0); err == nil {
			err = unix.Unlinkat(fpfd, ft.base, 0)
		}
	}
	if err != nil {
		return filePathErr(op, tt.display, err)
	}
	return nil
}
