package search

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// osFS is an os-based FS for tests only: production code gets its FS from
// the confinement layer. It never follows a symlink: every directory on a
// path is checked with Lstat (once, then cached), entries are typed from
// the directory listing (d_type, which is what Lstat would say), and files
// are opened with O_NOFOLLOW and must be regular. File sizes are reported
// as -1 (unknown): a stat per file would cost the walk as much as reading
// most source files, and Grep enforces its size cap while reading. It does
// not defend against a tree changing under it (the confinement layer
// does).
type osFS struct {
	root string
	mu   sync.Mutex      // guards dirs
	dirs map[string]bool // directories verified to be reached without a symlink
}

// NewOSFS returns an FS rooted at the host directory root.
func NewOSFS(root string) FS { return &osFS{root: root, dirs: map[string]bool{}} }

var (
	errSymlinkOnPath = errors.New("symlink on path")
	errNotDir        = errors.New("not a directory")
	errNotRegular    = errors.New("not a regular file")
)

func osClean(rel string) (string, error) {
	rel = strings.TrimPrefix(rel, "./")
	if rel == "." {
		rel = ""
	}
	for r := rel; r != ""; {
		c, rest, _ := strings.Cut(r, "/")
		if c == "" || c == "." || c == ".." {
			return "", fs.ErrInvalid
		}
		r = rest
	}
	return rel, nil
}

// dir returns the host path of the directory rel after checking that it
// and every directory above it is a real directory, not a symlink.
func (o *osFS) dir(rel string) (string, error) {
	host := filepath.Join(o.root, filepath.FromSlash(rel))
	o.mu.Lock()
	ok := o.dirs[rel]
	o.mu.Unlock()
	if ok {
		return host, nil
	}
	if rel != "" {
		parent, _ := splitDir(rel)
		if _, err := o.dir(parent); err != nil {
			return "", err
		}
	}
	fi, err := os.Lstat(host)
	switch {
	case err != nil:
		return "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", errSymlinkOnPath
	case !fi.IsDir():
		return "", errNotDir
	}
	o.mu.Lock()
	o.dirs[rel] = true
	o.mu.Unlock()
	return host, nil
}

func (o *osFS) ReadDir(rel string, max int) ([]Entry, bool, error) {
	rel, err := osClean(rel)
	if err != nil {
		return nil, false, err
	}
	host, err := o.dir(rel)
	if err != nil {
		return nil, false, err
	}
	f, err := os.Open(host)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	des, err := f.ReadDir(max + 1)
	if err != nil && err != io.EOF {
		return nil, false, err
	}
	truncated := len(des) > max
	if truncated {
		des = des[:max]
	}
	out := make([]Entry, 0, len(des))
	for _, d := range des {
		e := Entry{Name: d.Name()}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			e.Kind = Symlink
		case t.IsDir():
			e.Kind = Dir
		case t.IsRegular():
			e.Kind, e.Size = File, -1
		default:
			e.Kind = Other
		}
		out = append(out, e)
	}
	return out, truncated, nil
}

func (o *osFS) Open(rel string) (io.ReadCloser, error) {
	rel, err := osClean(rel)
	if err != nil || rel == "" {
		return nil, fs.ErrInvalid
	}
	parent, name := splitDir(rel)
	host, err := o.dir(parent)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK so a FIFO swapped in cannot block the open.
	fd, err := syscall.Open(host+string(filepath.Separator)+name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, errNotRegular
	}
	return fdReader(fd), nil
}

// fdReader reads a file descriptor without the poller (regular files never
// block).
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(f), p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f fdReader) Close() error { return syscall.Close(int(f)) }
