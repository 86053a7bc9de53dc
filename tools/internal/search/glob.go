package search

import (
	"fmt"
)

// DefaultGlobLimit is the number of paths Glob returns when GlobOptions.Limit
// is zero.
const DefaultGlobLimit = 1000

// GlobOptions tunes Glob. Zero values take the defaults.
type GlobOptions struct {
	// Path is the directory the pattern is relative to ("" is the root).
	// Results stay relative to the root.
	Path string
	// Hidden lets wildcards match names beginning with "."; otherwise, as in
	// most shells, only a pattern component that itself begins with "."
	// matches them (".github/**", "**/.env"), and "**" does not descend
	// into hidden directories.
	Hidden bool
	// NoIgnore turns the ignore rules off, .git included.
	NoIgnore bool
	// Limit caps the number of paths returned (default 1000).
	Limit int
	// MaxDirs caps the directories read (default 100000).
	MaxDirs int
	// MaxEntries caps the entries read from one directory (default 10000).
	MaxEntries int
}

// GlobResult is what Glob found.
type GlobResult struct {
	// Paths are root-relative, in tree order (see the package
	// documentation): each directory's entries sorted by name, a directory
	// before its contents.
	Paths []string
	// Truncated: more paths may match than Paths holds, because the limit,
	// the directory cap or a per-directory entry cap was reached.
	Truncated bool
	// Skipped counts directories that could not be read, or were read only
	// up to the per-directory cap.
	Skipped int
}

func (o *GlobOptions) withDefaults() error {
	if o.Limit < 0 || o.MaxDirs < 0 || o.MaxEntries < 0 {
		return fmt.Errorf("%w: negative limit", ErrBadOption)
	}
	if o.Limit == 0 {
		o.Limit = DefaultGlobLimit
	}
	if o.MaxDirs == 0 {
		o.MaxDirs = DefaultMaxDirs
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	return nil
}

// Glob returns the paths under o.Path that match pattern.
//
// Pattern syntax: "*" matches any run of characters within a component,
// "?" one character, "[...]" a class ("[!...]" or "[^...]" negates), "{a,b}"
// either alternative (groups nest, at most 256 alternatives in all), "**" as
// a whole component any number of directories (zero or more; a final "**"
// one or more), and "\" escapes the next character. A pattern ending in "/"
// matches directories only; otherwise directories are not returned, while
// files, symlinks and other non-directories are. Symlinks are never
// followed: a symlinked directory is a leaf. A leading "./" is accepted; an
// absolute pattern or one with a ".." component is ErrBadPath.
func Glob(fsys FS, pattern string, o GlobOptions) (GlobResult, error) {
	var res GlobResult
	if err := o.withDefaults(); err != nil {
		return res, err
	}
	base, err := cleanRel(o.Path)
	if err != nil {
		return res, fmt.Errorf("glob path %q: %w", o.Path, err)
	}
	m, err := compileGlob(pattern, o.Hidden)
	if err != nil {
		return res, fmt.Errorf("glob %q: %w", pattern, err)
	}
	w := newWalker(fsys, !o.NoIgnore, o.MaxDirs, o.MaxEntries)
	defer w.close()
	ents, err := w.list(base)
	if err != nil {
		return res, fmt.Errorf("glob path %q: %w", displayRel(base), err)
	}
	g := globber{w: w, m: m, limit: o.Limit, res: &res}
	g.dir(base, ents, m.start())
	res.Truncated = res.Truncated || w.truncated
	res.Skipped = w.unreadable + w.partial
	if res.Paths == nil {
		res.Paths = []string{}
	}
	return res, nil
}

type globber struct {
	w     *walker
	m     *matcher
	limit int
	res   *GlobResult
	done  bool
}

func (g *globber) dir(dir string, ents []Entry, states stateSet) {
	// Step every entry first, so the subdirectories the walk will enter
	// can be read ahead.
	nexts := make([]stateSet, len(ents))
	var enter []string
	for i, e := range ents {
		nexts[i] = g.m.step(states, e.Name)
		if e.Kind == Dir && nexts[i] != nil && g.m.live(nexts[i]) {
			enter = append(enter, join(dir, e.Name))
		}
	}
	g.w.readAhead(enter)
	for i, e := range ents {
		if g.done {
			return
		}
		next := nexts[i]
		if next == nil {
			continue
		}
		isDir := e.Kind == Dir
		if g.m.acceptsResult(next, isDir) {
			if len(g.res.Paths) == g.limit {
				g.res.Truncated = true
				g.done = true
				return
			}
			g.res.Paths = append(g.res.Paths, join(dir, e.Name))
		}
		if !isDir || !g.m.live(next) {
			continue
		}
		rel := join(dir, e.Name)
		sub, err := g.w.list(rel)
		if err == errDirCap {
			g.done = true
			return
		}
		if err != nil {
			g.w.skip(err)
			continue
		}
		g.dir(rel, sub, next)
	}
}

// displayRel shows the root as ".".
func displayRel(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
