package search

import (
	"errors"
	"io"
	"path"
	"strings"
	"sync"
)

// Kind is the type of a directory entry as reported by an FS, which never
// follows symlinks to find it. The zero value is not a valid kind and is
// treated like Other.
type Kind int

const (
	File    Kind = iota + 1 // a regular file
	Dir                     // a directory
	Symlink                 // a symbolic link, never followed
	Other                   // FIFO, socket, device: never opened
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	case Other:
		return "other"
	}
	return "unknown"
}

// Entry is one child of a directory.
type Entry struct {
	Name string // a plain name: no "/", never "." or ".."
	Kind Kind
	// Size is the size in bytes of a regular file, or -1 when the FS would
	// need an extra stat to know it. It is a hint: Grep enforces
	// MaxFileBytes while reading either way.
	Size int64
}

// FS is the view of the search root the engines walk through. The
// confinement layer implements it; symlinks are reported (Kind Symlink),
// never followed, and denied entries never appear. Its methods are called
// from several goroutines at once (Grep reads files in parallel, and walks
// read directory listings ahead), but never after Glob or Grep returns.
type FS interface {
	// ReadDir lists the directory at rel ("" or "." is the search root), at
	// most max entries; truncated says more existed. The order is
	// unspecified; callers sort.
	ReadDir(rel string, max int) (entries []Entry, truncated bool, err error)
	// Open opens the regular file at rel for reading.
	Open(rel string) (io.ReadCloser, error)
}

// Errors callers can test for with errors.Is. Their messages are meant for
// the model: they name the offending pattern or path as given, never a host
// path.
var (
	// ErrBadPattern marks a glob or regular expression that cannot be
	// compiled, is too long or expands to too many alternatives.
	ErrBadPattern = errors.New("invalid pattern")
	// ErrBadPath marks an absolute path, a ".." component or a NUL byte in a
	// path or pattern (paths are relative to the search root).
	ErrBadPath = errors.New("invalid path")
	// ErrBadOption marks an option value out of range.
	ErrBadOption = errors.New("invalid option")
	// ErrNotFound is returned when the requested search path does not exist
	// (or is not visible through the FS).
	ErrNotFound = errors.New("no such file or directory")
	// ErrNotDir is returned by Glob when its base path is not a directory.
	ErrNotDir = errors.New("not a directory")
)

// cleanRel validates a caller-supplied relative path and returns it in
// canonical form ("" for the root). Absolute paths, ".." components and NUL
// bytes are refused: confinement is the caller's job, but a relative search
// path that climbs out is always a mistake.
func cleanRel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", ErrBadPath
	}
	if strings.HasPrefix(p, "/") {
		return "", ErrBadPath
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", ErrBadPath
		}
	}
	p = path.Clean("/" + p)[1:]
	return p, nil
}

// validName reports whether an FS-supplied entry name is a plain name.
func validName(n string) bool {
	return n != "" && n != "." && n != ".." && strings.IndexByte(n, '/') < 0 && strings.IndexByte(n, 0) < 0
}

// join joins a root-relative directory and a name.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// splitDir splits a root-relative path into its parent and base name.
func splitDir(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// Serialized wraps an FS that is not safe for concurrent use so that its
// ReadDir and Open calls are made one at a time. Reading an opened file is
// not serialized: the ReadCloser is used by one goroutine.
func Serialized(fsys FS) FS { return &serialFS{fsys: fsys} }

type serialFS struct {
	mu   sync.Mutex // held around every call into fsys
	fsys FS
}

func (s *serialFS) ReadDir(rel string, max int) ([]Entry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fsys.ReadDir(rel, max)
}

func (s *serialFS) Open(rel string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fsys.Open(rel)
}
