//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Staged writes (apply_patch): a Stage collects writes and deletions,
// each checked and its content staged in a temp file when added, and
// Commit makes them visible together (preflight, then rename or unlink in
// order, rolled back on failure), or Abort drops them.

type stageOp struct {
	t   writeTarget
	op  string // "write" or "delete"
	pfd int    // where the temp file lives: the parent, or its deepest existing ancestor
	// missing are the parent components still to be created (at Commit)
	// below pfd, "" when the parent exists.
	missing    string
	parentReal string
	tfd        int // the target's directory once it exists (== pfd unless missing)
	del        bool
	tmp        string // write: the staged temp file
	existed    bool
	orig       []byte
	meta       fileMeta // the original's, for a restore
	done       bool     // committed
}

// Stage collects writes and deletions that become visible together in
// Commit, or not at all.
type Stage struct {
	fa       *FileAccess
	mu       sync.Mutex // guards ops, made and finished
	ops      []*stageOp
	made     []createdDir // directories Commit created
	finished bool
	// beforeOp, when set (tests), runs before the i-th commit step.
	beforeOp func(i int)
}

// NewStage starts an empty set of staged changes.
func (fa *FileAccess) NewStage() *Stage { return &Stage{fa: fa} }

// Write stages data as path's new content (same rules as WriteFile). The
// content sits in a temp file beside the target (or, when its parent is to
// be created, beside the deepest existing ancestor) until Commit; nothing
// else is visible before.
func (s *Stage) Write(path string, data []byte, o WriteOptions) error {
	return s.add("write", path, data, o, false)
}

// Delete stages the removal of the regular file path (same rules as
// Remove).
func (s *Stage) Delete(path string) error {
	return s.add("delete", path, nil, WriteOptions{}, true)
}

func (s *Stage) add(op, path string, data []byte, o WriteOptions, del bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return errors.New("stage already committed or aborted")
	}
	fa := s.fa
	if err := fa.enter(); err != nil {
		return err
	}
	defer fa.leave()
	t, err := fa.writeTarget(op, path)
	if err != nil {
		return err
	}
	if !del && int64(len(data)) > fa.opts.MaxWriteBytes {
		return fa.denial(op, t.display, RuleTooLarge)
	}
	pm := parentExisting
	if o.CreateParents && !del {
		pm = parentAnchor
	}
	pfd, real, missing, _, err := fa.openParent(op, t, pm)
	if err != nil {
		return err
	}
	x := &stageOp{t: t, op: op, pfd: pfd, tfd: -1, missing: missing, parentReal: real, del: del}
	if missing == "" {
		x.tfd = pfd
	}
	fail := func(err error) error {
		unix.Close(pfd)
		return err
	}
	for _, y := range s.ops {
		if y.key() == x.key() {
			return fail(filePathErr(op, t.display, errors.New("staged twice in one change")))
		}
	}
	var st unix.Stat_t
	if missing == "" {
		var exists bool
		if exists, st, err = fa.targetKind(op, t.display, pfd, t.base); err != nil {
			return fail(err)
		}
		if del && !exists {
			return fail(filePathErr(op, t.display, syscall.ENOENT))
		}
		x.existed = exists
	}
	x.meta = metaFor(x.existed, &st, WriteOptions{})
	if x.existed {
		if x.orig, err = fa.readOriginal(op, t.display, pfd, t.base, &st); err != nil {
			return fail(err)
		}
	}
	if !del {
		if x.tmp, err = writeTemp(pfd, t.base, data, metaFor(x.existed, &st, o)); err != nil {
			return fail(filePathErr(op, t.display, err))
		}
	}
	s.ops = append(s.ops, x)
	return nil
}

func (x *stageOp) key() string { return filepath.Join(x.parentReal, x.missing, x.t.base) }

// readOriginal captures the bytes a staged change may have to restore.
func (fa *FileAccess) readOriginal(op, display string, pfd int, base string, pre *unix.Stat_t) ([]byte, error) {
	if pre.Size > fa.opts.MaxReadBytes {
		return nil, fa.denial(op, display, RuleTooLarge)
	}
	fd, err := openat2Retry(pfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, childResolve)
	if err != nil {
		return nil, fa.openErr(op, display, err, true)
	}
	f := os.NewFile(uintptr(fd), display)
	defer f.Close()
	st, err := fstatFD(fd)
	if err != nil || !sameFile(&st, pre) {
		return nil, filePathErr(op, display, errors.New("the file changed while it was staged"))
	}
	data, err := io.ReadAll(io.LimitReader(f, fa.opts.MaxReadBytes+1))
	if err != nil {
		return nil, filePathErr(op, display, err)
	}
	if int64(len(data)) > fa.opts.MaxReadBytes {
		return nil, fa.denial(op, display, RuleTooLarge)
	}
	return data, nil
}

// Commit makes every staged change visible, in order. If one fails, every
// change already made is undone from the bytes captured at staging (created
// files and directories removed, deleted files recreated), the remaining
// temp files are removed, and the error is returned: the files are as they
// were.
func (s *Stage) Commit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return errors.New("stage already committed or aborted")
	}
	fa := s.fa
	if err := fa.enter(); err != nil {
		s.abortLocked()
		return err
	}
	defer fa.leave()
	// Preflight: every directory is still where it was staged and still
	// allowed, every temp file is in place, every target is as found.
	for _, x := range s.ops {
		if err := s.preflight(x); err != nil {
			s.abortLocked()
			return err
		}
	}
	for i, x := range s.ops {
		if s.beforeOp != nil {
			s.beforeOp(i)
		}
		if err := s.commitOp(x); err != nil {
			err = filePathErr(x.op, x.t.display, err)
			if rerr := s.rollback(i); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restoring the files already changed: %w", rerr))
			}
			s.abortLocked()
			return err
		}
		x.done = true
	}
	for _, x := range s.ops {
		syncDirFD(x.tfd)
	}
	s.finished = true
	s.release()
	closeDirs(s.made)
	s.made = nil
	return nil
}

func (s *Stage) commitOp(x *stageOp) error {
	if x.del {
		return unix.Unlinkat(x.tfd, x.t.base, 0)
	}
	if x.tfd < 0 {
		tfd, made, err := mkParents(x.pfd, x.missing)
		s.made = append(s.made, made...)
		if err != nil {
			return err
		}
		x.tfd = tfd
		// The new directories were made beneath a checked directory
		// without following a link; the target must still be free.
		if exists, _, err := s.fa.targetKind(x.op, x.t.display, tfd, x.t.base); err != nil || exists {
			if err == nil {
				err = syscall.EEXIST
			}
			return err
		}
	}
	return unix.Renameat(x.pfd, x.tmp, x.tfd, x.t.base)
}

func (s *Stage) preflight(x *stageOp) error {
	real, err := fdPath(x.pfd)
	if err != nil || real != x.parentReal {
		return filePathErr(x.op, x.t.display, errors.New("the directory moved since the change was staged"))
	}
	st, err := fstatFD(x.pfd)
	if err != nil {
		return filePathErr(x.op, x.t.display, err)
	}
	var within []string
	if s.fa.mode != ModeOff {
		within = []string{x.t.root.real, x.t.root.path}
	}
	if _, err := s.fa.checkFD(x.op, x.t.display, x.pfd, &st, within); err != nil {
		return err
	}
	if !x.del {
		var tst unix.Stat_t
		if err := unix.Fstatat(x.pfd, x.tmp, &tst, unix.AT_SYMLINK_NOFOLLOW); err != nil || tst.Mode&unix.S_IFMT != unix.S_IFREG {
			return filePathErr(x.op, x.t.display, errors.New("the staged content is gone"))
		}
	}
	dir := x.pfd
	if x.missing != "" {
		// The parent did not exist; if it does now, it holds no link and
		// not the target.
		fd, err := openat2Retry(x.pfd, x.missing, unix.O_PATH|unix.O_DIRECTORY, strictResolve)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return s.fa.openErr(x.op, x.t.display, err, true)
		}
		defer unix.Close(fd)
		dir = fd
	}
	exists, _, err := s.fa.targetKind(x.op, x.t.display, dir, x.t.base)
	if err != nil {
		return err
	}
	if exists != x.existed {
		return filePathErr(x.op, x.t.display, errors.New("the file changed since the change was staged"))
	}
	return nil
}

// rollback undoes the committed steps before step n, newest first.
func (s *Stage) rollback(n int) error {
	var errs []error
	for j := n - 1; j >= 0; j-- {
		x := s.ops[j]
		if !x.done {
			continue
		}
		var err error
		if x.existed {
			err = replaceAt(x.tfd, x.t.base, x.orig, x.meta)
		} else {
			err = unix.Unlinkat(x.tfd, x.t.base, 0)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", x.t.display, err))
		}
		x.done = false
	}
	return errors.Join(errs...)
}

// Abort discards every staged change: temp files are removed. It is a
// no-op after Commit.
func (s *Stage) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.abortLocked()
}

func (s *Stage) abortLocked() {
	for _, x := range s.ops {
		if x.tmp != "" && !x.done {
			_ = unix.Unlinkat(x.pfd, x.tmp, 0)
		}
	}
	s.release()
	undoDirs(s.made)
	s.made = nil
	s.finished = true
}

func (s *Stage) release() {
	for _, x := range s.ops {
		if x.tfd >= 0 && x.tfd != x.pfd {
			unix.Close(x.tfd)
		}
		if x.pfd >= 0 {
			unix.Close(x.pfd)
		}
		x.pfd, x.tfd = -1, -1
	}
}
