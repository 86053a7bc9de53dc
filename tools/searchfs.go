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
// follows a symlink and never leaves the tree. Opened directories are kept
// for the length of one search, at most dirFSCache of them idle; a handle
// in use by one of the search's goroutines is never evicted.
type dirFS struct {
	root  *confine.Dir
	mu    sync.Mutex // guards cache and each entry's refs: the search engines walk and read from several goroutines
	cache map[string]*cachedDir
}

type cachedDir struct {
	d    *confine.Dir
	refs int
}

const dirFSCache = 256

func newDirFS(root *confine.Dir) *dirFS {
	return &dirFS{root: root, cache: map[string]*cachedDir{}}
}

func (f *dirFS) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.cache {
		c.d.Close()
	}
	f.root.Close()
}

// acquire returns the handle for rel, pinned until release.
func (f *dirFS) acquire(rel string) (*confine.Dir, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rel = path.Clean(rel)
	if rel == "." || rel == "" {
		return f.root, func() {}, nil
	}
	c, err := f.lookupLocked(rel)
	if err != nil {
		return nil, nil, err
	}
	c.refs++
	return c.d, func() {
		f.mu.Lock()
		c.refs--
		f.mu.Unlock()
	}, nil
}

func (f *dirFS) lookupLocked(rel string) (*cachedDir, error) {
	if c, ok := f.cache[rel]; ok {
		return c, nil
	}
	parent := f.root
	if pr := path.Dir(rel); pr != "." {
		pc, err := f.lookupLocked(pr)
		if err != nil {
			return nil, err
		}
		parent = pc.d
	}
	d, err := parent.OpenDir(path.Base(rel))
	if err != nil {
		return nil, err
	}
	if len(f.cache) >= dirFSCache {
		for k, v := range f.cache {
			if v.refs == 0 && !strings.HasPrefix(rel, k+"/") {
				v.d.Close()
				delete(f.cache, k)
			}
		}
	}
	c := &cachedDir{d: d}
	f.cache[rel] = c
	return c, nil
}

func (f *dirFS) ReadDir(rel string, max int) ([]search.Entry, bool, error) {
	d, release, err := f.acquire(rel)
	if err != nil {
		return nil, false, err
	}
	defer release()
	ents, truncated, err := d.Names(max)
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
	d, release, err := f.acquire(path.Dir(path.Clean(rel)))
	if err != nil {
		return nil, err
	}
	defer release()
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
