package search

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Walk bounds shared by Glob and Grep.
const (
	DefaultMaxDirs    = 100000 // directories read per call
	DefaultMaxEntries = 10000  // entries read per directory
)

var errDirCap = errors.New("directory cap reached")

// walker reads directories for a walk, applying the caps and ignore rules.
// The walk itself is sequential (its order is the output order), but the
// walker reads ahead: the listings of subdirectories the walk will enter
// are fetched by a few goroutines while it is busy elsewhere.
type walker struct {
	fsys       FS
	ig         *Ignorer // nil: no ignore rules (and .git is walked like any directory)
	maxDirs    int
	maxEntries int

	dirs       int  // directories read
	truncated  bool // a cap was hit: the walk saw only part of the tree
	unreadable int  // directories whose listing failed
	partial    int  // directories listed only up to maxEntries

	sem      chan struct{}         // bounds the read-ahead goroutines
	inflight sync.WaitGroup        // read-ahead goroutines still running
	futures  map[string]*dirFuture // listings read ahead and not yet used
}

// dirFuture is a directory listing being read ahead.
type dirFuture struct {
	done  chan struct{}
	ents  []Entry
	trunc bool
	err   error
}

func newWalker(fsys FS, ignore bool, maxDirs, maxEntries int) *walker {
	w := &walker{
		fsys:       fsys,
		maxDirs:    maxDirs,
		maxEntries: maxEntries,
		sem:        make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		futures:    make(map[string]*dirFuture),
	}
	if ignore {
		w.ig = NewIgnorer(fsys)
	}
	return w
}

// readAhead starts reading the listings of dirs, which the walk will enter
// in this order, as far as free read-ahead slots and the directory cap
// allow.
func (w *walker) readAhead(dirs []string) {
	for _, dir := range dirs {
		if w.dirs+len(w.futures) >= w.maxDirs {
			return
		}
		if _, ok := w.futures[dir]; ok {
			continue
		}
		select {
		case w.sem <- struct{}{}:
		default:
			return
		}
		f := &dirFuture{done: make(chan struct{})}
		w.futures[dir] = f
		w.inflight.Add(1)
		go func() {
			defer w.inflight.Done()
			f.ents, f.trunc, f.err = w.fsys.ReadDir(dir, w.maxEntries)
			close(f.done)
			<-w.sem
		}()
	}
}

// close waits for the read-ahead goroutines, so none touches the FS after
// the walk's caller has returned.
func (w *walker) close() { w.inflight.Wait() }

// list reads dir and returns its entries sorted by name, without invalid
// names and without what the ignore rules exclude. Once maxDirs
// directories have been read it returns errDirCap and marks the walk
// truncated.
func (w *walker) list(dir string) ([]Entry, error) {
	if w.dirs >= w.maxDirs {
		w.truncated = true
		return nil, errDirCap
	}
	w.dirs++
	var ents []Entry
	var trunc bool
	var err error
	if f, ok := w.futures[dir]; ok {
		delete(w.futures, dir)
		<-f.done
		ents, trunc, err = f.ents, f.trunc, f.err
	} else {
		ents, trunc, err = w.fsys.ReadDir(dir, w.maxEntries)
	}
	if err != nil {
		return nil, err
	}
	if trunc || len(ents) > w.maxEntries {
		w.truncated = true
		w.partial++
		ents = ents[:min(len(ents), w.maxEntries)]
	}
	if w.ig != nil {
		w.ig.enter(dir, ents)
	}
	out := make([]Entry, 0, len(ents))
	for _, e := range ents {
		if !validName(e.Name) {
			continue
		}
		if w.ig != nil && w.ig.ignoredEntry(dir, e.Name, e.Kind == Dir) {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	// A well-behaved FS never lists a name twice; drop duplicates so a
	// broken one cannot make a walk visit a subtree twice.
	out = slices.CompactFunc(out, func(a, b Entry) bool { return a.Name == b.Name })
	return out, nil
}

// skip records a subdirectory the walk could not read.
func (w *walker) skip(err error) {
	if err != errDirCap {
		w.unreadable++
	}
}
