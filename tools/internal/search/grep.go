package search

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
)

// Grep defaults and bounds.
const (
	DefaultGrepLimit    = 500      // matching lines (content), files (files, count)
	DefaultMaxFileBytes = 10 << 20 // larger files are skipped
	DefaultMaxLineBytes = 500      // longer lines are clipped in results
	MaxContext          = 20       // context lines before and after, at most
)

// Output modes.
const (
	ModeContent = "content" // matching lines, with context
	ModeFiles   = "files"   // paths of files with a match
	ModeCount   = "count"   // matching lines per file
)

// GrepOptions tunes Grep. Zero values take the defaults.
type GrepOptions struct {
	// Pattern is an RE2 regular expression (package regexp syntax), or a
	// literal string when Literal is set. It is only ever a pattern: there
	// is no command line, so "--pre=sh" searches for that text. Matching is
	// line by line: "^" and "\A" match at the start of a line, "$" and "\z"
	// at its end (before "\n" or "\r\n"), character classes and "." never
	// match a newline, and a pattern with a literal newline is
	// ErrBadPattern.
	Pattern    string
	Literal    bool
	IgnoreCase bool
	// Context is the number of lines shown before and after each match in
	// content mode, clamped to MaxContext. Overlapping context is merged:
	// no line appears twice in a file's output.
	Context int
	// Include restricts the walk to files matching at least one of these
	// globs (Glob syntax, hidden names allowed), tried against the
	// root-relative path, the path relative to Path and the base name, so
	// "*.go" and "cmd/**/*.go" both work. A glob starting with "!" excludes
	// instead. A file given directly as Path is searched regardless.
	Include []string
	// Path is the file or directory to search ("" is the root). A
	// directory given here is searched even if ignore rules exclude it;
	// the rules still apply to what is inside.
	Path string
	// OutputMode is ModeContent (the default), ModeFiles or ModeCount.
	OutputMode string
	// Limit caps the matching lines (content mode) or files (files and
	// count modes) returned; default 500.
	Limit int
	// MaxFileBytes skips larger files (default 10 MiB).
	MaxFileBytes int64
	// MaxLineBytes clips matched and context lines to about this many bytes
	// (default 500): a window around the match, with "…" where text was cut.
	MaxLineBytes int
	// NoIgnore turns the ignore rules off, .git included.
	NoIgnore bool
	// MaxDirs and MaxEntries bound the walk as in GlobOptions.
	MaxDirs    int
	MaxEntries int
	// Workers is the number of files searched in parallel (default
	// GOMAXPROCS).
	Workers int
}

// Match is one matching line.
type Match struct {
	Path   string   // root-relative
	Line   int      // 1-based
	Column int      // 1-based byte offset of the first match in the line
	Text   string   // the line without its "\n" (or "\r\n"), clipped to MaxLineBytes around the match
	Before []string // context lines before the match, in file order
	After  []string // context lines after the match
}

// FileCount is the number of matching lines in one file.
type FileCount struct {
	Path  string
	Count int
}

// SkipCounts counts what Grep did not search.
type SkipCounts struct {
	Binary     int // a NUL byte in the first 8 KiB
	TooLarge   int // larger than MaxFileBytes
	Unreadable int // could not be opened or read (a denial, a race)
	Dirs       int // directories that could not be read, or only in part
}

// GrepResult is what Grep found. Exactly one of Matches, Files and Counts
// is non-nil, by output mode. Files are in tree order (see the package
// documentation), matches in line order within a file.
type GrepResult struct {
	Matches []Match
	Files   []string
	Counts  []FileCount
	// Truncated: more matches may exist, because the limit or a walk cap
	// was reached or the context was cancelled.
	Truncated     bool
	FilesSearched int64
	BytesSearched int64
	Skipped       SkipCounts
}

func (o *GrepOptions) withDefaults() error {
	if o.Context < 0 || o.Limit < 0 || o.MaxFileBytes < 0 || o.MaxLineBytes < 0 ||
		o.MaxDirs < 0 || o.MaxEntries < 0 || o.Workers < 0 {
		return fmt.Errorf("%w: negative value", ErrBadOption)
	}
	switch o.OutputMode {
	case "":
		o.OutputMode = ModeContent
	case ModeContent, ModeFiles, ModeCount:
	default:
		return fmt.Errorf("%w: output mode %q (want %q, %q or %q)", ErrBadOption, o.OutputMode, ModeContent, ModeFiles, ModeCount)
	}
	o.Context = min(o.Context, MaxContext)
	if o.Limit == 0 {
		o.Limit = DefaultGrepLimit
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.MaxDirs == 0 {
		o.MaxDirs = DefaultMaxDirs
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

// job is one file to search.
type job struct {
	path string
	size int64 // from the listing; -1 when unknown
}

// batch is a run of consecutive files (in tree order) for one worker;
// seq is its place among batches. Handing files over in batches keeps the
// channel and scheduler traffic per file low.
type batch struct {
	seq  int
	jobs []job
}

// batchResult holds the results of a batch's files, in order.
type batchResult struct {
	seq     int
	results []fileResult
}

// Batches close at maxBatchFiles files or about maxBatchBytes of listed
// file size (unknown sizes count as unknownSize), whichever comes first.
const (
	maxBatchFiles = 32
	maxBatchBytes = 1 << 20
	unknownSize   = 16 << 10
)

// fileResult is what searching one file produced.
type fileResult struct {
	path       string
	canceled   bool
	searched   bool
	bytes      int64
	binary     bool
	tooLarge   bool
	unreadable bool
	count      int
	matches    []Match
	partial    bool // matches stopped at maxFileOutput: the search must stop after them
}

// Grep searches the files under o.Path for o.Pattern.
//
// Files are searched in parallel by a small pool of workers, but results
// are assembled in tree order, so the output is the same whatever the
// scheduling. Hidden files and directories are searched (the ignore rules
// still skip .git). Files with a NUL byte in their first 8 KiB are skipped
// as binary; symlinks are neither followed nor searched. The context is
// checked between files; when it is cancelled Grep returns what it had,
// marked Truncated, with the context's error.
func Grep(ctx context.Context, fsys FS, o GrepOptions) (GrepResult, error) {
	var res GrepResult
	if err := o.withDefaults(); err != nil {
		return res, err
	}
	lm, err := compileLineMatcher(o.Pattern, o.Literal, o.IgnoreCase)
	if err != nil {
		return res, fmt.Errorf("grep pattern %q: %w", clipForError(o.Pattern), err)
	}
	inc, err := compileIncludes(o.Include)
	if err != nil {
		return res, err
	}
	base, err := cleanRel(o.Path)
	if err != nil {
		return res, fmt.Errorf("grep path %q: %w", clipForError(o.Path), err)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	w := newWalker(fsys, !o.NoIgnore, o.MaxDirs, o.MaxEntries)
	defer w.close()
	var single *job
	ents, err := w.list(base)
	if err != nil {
		// Not a directory: a regular file named directly is searched.
		e, found, truncated := lookup(fsys, base, o.MaxEntries)
		switch {
		case found && e.Kind == File:
			single = &job{path: base, size: e.Size}
		case !found && truncated:
			single = &job{path: base, size: -1}
		default:
			return res, fmt.Errorf("grep path %q: %w", displayRel(base), err)
		}
	}

	s := &searcher{
		fsys:    fsys,
		lm:      lm,
		mode:    o.OutputMode,
		need:    o.Limit + 1,
		context: o.Context,
		maxFile: o.MaxFileBytes,
		maxLine: o.MaxLineBytes,
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan batch, o.Workers)
	results := make(chan batchResult, o.Workers)
	// window bounds how far the workers may run ahead of the batch the
	// collector waits for, and so the results held out of order.
	window := make(chan struct{}, 2*o.Workers+2)
	go func() {
		defer close(batches)
		if single != nil {
			window <- struct{}{}
			batches <- batch{jobs: []job{*single}}
			return
		}
		gw := grepWalker{ctx: wctx, w: w, inc: inc, base: base, batches: batches, window: window}
		gw.dir(base, ents)
		gw.flush()
	}()
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				br := batchResult{seq: b.seq, results: make([]fileResult, len(b.jobs))}
				for i, j := range b.jobs {
					br.results[i] = s.file(wctx, j)
				}
				results <- br
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	c := collector{mode: o.OutputMode, limit: o.Limit, res: &res}
	switch o.OutputMode {
	case ModeContent:
		res.Matches = []Match{}
	case ModeFiles:
		res.Files = []string{}
	case ModeCount:
		res.Counts = []FileCount{}
	}
	pending := make(map[int]batchResult)
	next, stopped := 0, false
	for br := range results {
		if stopped {
			continue // drain: the workers skip what is left
		}
		pending[br.seq] = br
		for !stopped {
			br, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-window
			for _, r := range br.results {
				if c.add(r) {
					stopped = true
					cancel()
					break
				}
			}
		}
	}
	// The walker goroutine has finished: it closed jobs before the
	// workers could finish and close results.
	res.Truncated = res.Truncated || w.truncated
	res.Skipped.Dirs = w.unreadable + w.partial
	if err := ctx.Err(); err != nil {
		res.Truncated = true
		return res, err
	}
	return res, nil
}

// lookup finds the entry for rel in its parent's listing.
func lookup(fsys FS, rel string, max int) (e Entry, found, truncated bool) {
	if rel == "" {
		return e, false, false
	}
	dir, name := splitDir(rel)
	ents, truncated, err := fsys.ReadDir(dir, max)
	if err != nil {
		return e, false, false
	}
	for _, e := range ents {
		if e.Name == name {
			return e, true, truncated
		}
	}
	return e, false, truncated
}

// collector assembles results in tree order and applies the limit.
type collector struct {
	mode  string
	limit int
	res   *GrepResult
}

// add takes the next file's result; it returns true when the search should
// stop.
func (c *collector) add(r fileResult) bool {
	res := c.res
	switch {
	case r.canceled:
		res.Truncated = true
		return true
	case r.binary:
		res.Skipped.Binary++
	case r.tooLarge:
		res.Skipped.TooLarge++
	case r.unreadable:
		res.Skipped.Unreadable++
	}
	if r.searched {
		res.FilesSearched++
		res.BytesSearched += r.bytes
	}
	if r.count == 0 {
		return false
	}
	switch c.mode {
	case ModeContent:
		for _, m := range r.matches {
			if len(res.Matches) == c.limit {
				res.Truncated = true
				return true
			}
			res.Matches = append(res.Matches, m)
		}
		if r.partial {
			res.Truncated = true
			return true
		}
	case ModeFiles:
		if len(res.Files) == c.limit {
			res.Truncated = true
			return true
		}
		res.Files = append(res.Files, r.path)
	case ModeCount:
		if len(res.Counts) == c.limit {
			res.Truncated = true
			return true
		}
		res.Counts = append(res.Counts, FileCount{Path: r.path, Count: r.count})
	}
	return false
}

// grepWalker walks the tree in order and hands files to the workers.
type grepWalker struct {
	ctx     context.Context
	w       *walker
	inc     *includeSet
	base    string
	batches chan<- batch
	window  chan<- struct{}
	seq     int
	stop    bool
	pending []job // the batch being filled
	bytes   int64 // its listed size
}

// flush hands the pending batch to the workers.
func (g *grepWalker) flush() {
	if len(g.pending) == 0 || g.stop {
		return
	}
	select {
	case g.window <- struct{}{}:
	case <-g.ctx.Done():
		g.stop = true
		return
	}
	select {
	case g.batches <- batch{seq: g.seq, jobs: g.pending}:
		g.seq++
		g.pending, g.bytes = nil, 0
	case <-g.ctx.Done():
		g.stop = true
	}
}

func (g *grepWalker) dir(dir string, ents []Entry) {
	var enter []string
	for _, e := range ents {
		if e.Kind == Dir {
			enter = append(enter, join(dir, e.Name))
		}
	}
	g.w.readAhead(enter)
	for _, e := range ents {
		if g.stop {
			return
		}
		rel := join(dir, e.Name)
		switch e.Kind {
		case Dir:
			if g.ctx.Err() != nil {
				g.stop = true
				return
			}
			sub, err := g.w.list(rel)
			if err == errDirCap {
				g.stop = true
				return
			}
			if err != nil {
				g.w.skip(err)
				continue
			}
			g.dir(rel, sub)
		case File:
			if g.inc != nil && !g.inc.match(rel, g.base) {
				continue
			}
			g.pending = append(g.pending, job{path: rel, size: e.Size})
			if e.Size >= 0 {
				g.bytes += e.Size
			} else {
				g.bytes += unknownSize
			}
			if len(g.pending) >= maxBatchFiles || g.bytes >= maxBatchBytes {
				g.flush()
			}
		}
	}
}

// includeSet is the compiled GrepOptions.Include.
type includeSet struct {
	pos, neg []*matcher
}

func compileIncludes(globs []string) (*includeSet, error) {
	if len(globs) == 0 {
		return nil, nil
	}
	s := &includeSet{}
	for _, g := range globs {
		neg := strings.HasPrefix(g, "!")
		m, err := compileGlob(strings.TrimPrefix(g, "!"), true)
		if err != nil {
			return nil, fmt.Errorf("grep include glob %q: %w", clipForError(g), err)
		}
		if neg {
			s.neg = append(s.neg, m)
		} else {
			s.pos = append(s.pos, m)
		}
	}
	return s, nil
}

func (s *includeSet) match(rel, base string) bool {
	_, name := splitDir(rel)
	inBase := rel
	if base != "" {
		inBase = strings.TrimPrefix(rel, base+"/")
	}
	try := func(m *matcher) bool {
		return m.matchPath(rel, false) || m.matchPath(name, false) || (inBase != rel && m.matchPath(inBase, false))
	}
	for _, m := range s.neg {
		if try(m) {
			return false
		}
	}
	if len(s.pos) == 0 {
		return true
	}
	for _, m := range s.pos {
		if try(m) {
			return true
		}
	}
	return false
}

// clipForError keeps error messages small when the model sends a huge
// argument.
func clipForError(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return clipUTF8(s, max) + "…"
}

// clipUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
