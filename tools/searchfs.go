package tools

import (
	"io"
	"path"
	"strings"
	"sync"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools/internal/search"
)

// dirFS presents a confine.Dir tree to the search engines. Every step goes
// through the held root handle one component at a time, so a walk never
// follows a symlink and never leaves the tree; opened directories are kept
// (bounded) for the length of one search.
type dirFS struct {
	root  *confine.Dir
	mu    sync.Mutex // the search engines walk and read from several goroutines
	cache map[string]*confine.Dir
}

const dirFSCache = 256

func newDirFS(root *confine.Dir) *dirFS {
	return &dirFS{root: root, cache: map[string]*confine.Dir{}}
}

func (f *dirFS) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.cache {
		d.Close()
	}
	f.root.Close()
}

func (f *dirFS) dirLocked(rel string) (*confine.Dir, error) {
	rel = path.Clean(rel)
	if rel == "." || rel == "" {
		return f.root, nil
	}
	if d, ok := f.cache[rel]; ok {
		return d, nil
	}
	parent, err := f.dirLocked(path.Dir(rel))
	if err != nil {
		return nil, err
	}
	d, err := parent.OpenDir(path.Base(rel))
	if err != nil {
		return nil, err
	}
	if len(f.cache) >= dirFSCache {
		for k, v := range f.cache {
			if !strings.HasPrefix(rel, k+"/") {
				v.Close()
				delete(f.cache, k)
			}
		}
	}
	f.cache[rel] = d
	return d, nil
}

func (f *dirFS) ReadDir(rel string, max int) ([]search.Entry, bool, error) {
	// Held while the handle is used: eviction must never close a handle
	// another goroutine is reading through.
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dirLocked(rel)
	if err != nil {
		return nil, false, err
	}
	ents, truncated, err := d.Entries(max)
	if err != nil {
		return nil, false, err
	}
	out := make([]search.Entry, 0, len(ents))
	for _, e := range ents {
		k := search.Other
		switch e.Kind {
		case confine.PathFile:
			k = search.File
		case confine.PathDir:
			k = search.Dir
		case confine.PathSymlink:
			k = search.Symlink
		}
		out = append(out, search.Entry{Name: e.Name, Kind: k, Size: e.Size})
	}
	return out, truncated, nil
}

func (f *dirFS) Open(rel string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dirLocked(path.Dir(path.Clean(rel)))
	if err != nil {
		return nil, err
	}
	return d.OpenFile(path.Base(rel))
}

// searchRoot opens the directory a glob or grep walks from. A path inside
// the workdir is searched from the workdir itself, so every .gitignore on
// the way applies and results come back workdir-relative; the returned sub
// path names what to search within that root. A path elsewhere (the read-
// anywhere modes) is its own root, or its parent when it is a file.
func searchRoot(d Deps, p string) (fsys *dirFS, sub string, isFile bool, err error) {
	if p == "" {
		p = "."
	}
	info, err := d.Files.Stat(p)
	if err != nil {
		return nil, "", false, err
	}
	abs, _, err := d.Files.Resolve(p)
	if err != nil {
		return nil, "", false, err
	}
	root, sub := abs, ""
	if !info.IsDir {
		root, sub = path.Dir(abs), path.Base(abs)
	}
	if wd := d.Policy.Workdir(); abs == wd || strings.HasPrefix(abs, wd+"/") {
		root = wd
		sub = strings.TrimPrefix(strings.TrimPrefix(abs, wd), "/")
	}
	dir, err := d.Files.OpenDir(root)
	if err != nil {
		return nil, "", false, err
	}
	return newDirFS(dir), sub, !info.IsDir, nil
}

// joinDisplay joins a root's display path and a relative result path.
func joinDisplay(root, rel string) string {
	if root == "" || root == "." {
		return rel
	}
	return path.Join(root, rel)
}
