package memory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/evener-dev/evener-mcp/confine"
)

// Entry is one file of a scope.
type Entry struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	FirstLine string `json:"first_line,omitempty"`
}

// Match is one line a search found.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

const (
	firstLineBytes = 120
	matchTextBytes = 300
	// MaxMatches bounds one search's result.
	MaxMatches = 200
)

// ErrNotFound is wrapped when a memory file does not exist.
var ErrNotFound = errors.New("no such memory file")

// openDirOf walks the directories of a clean path from the root, one
// component at a time and never through a symlink, and returns the parent
// directory and the final name.
func (r *Root) openDirOf(p string) (*confine.Dir, string, error) {
	d, err := r.fa.OpenDir(".")
	if err != nil {
		return nil, "", err
	}
	parts := strings.Split(p, "/")
	for _, c := range parts[:len(parts)-1] {
		nd, err := d.OpenDir(c)
		d.Close()
		if err != nil {
			return nil, "", notFound(err, p)
		}
		d = nd
	}
	return d, parts[len(parts)-1], nil
}

func notFound(err error, p string) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, p)
	}
	return err
}

// Read returns a memory file's content (at most the file cap).
func (r *Root) Read(path string) ([]byte, error) {
	p, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	d, name, err := r.openDirOf(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := d.OpenFile(name)
	if err != nil {
		return nil, notFound(err, p)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, r.lim.FileBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > r.lim.FileBytes {
		return nil, fmt.Errorf("%s is over the %d-byte memory file cap", p, r.lim.FileBytes)
	}
	return b, nil
}

// IsDir reports whether path names a directory of the scope (never
// through a symlink).
func (r *Root) IsDir(path string) (bool, error) {
	p, err := CleanPath(path)
	if err != nil {
		return false, err
	}
	d, name, err := r.openDirOf(p)
	if err != nil {
		return false, err
	}
	defer d.Close()
	sub, err := d.OpenDir(name)
	if err != nil {
		return false, nil
	}
	sub.Close()
	return true, nil
}

// List walks the scope (or the directory under, "" for all) and returns
// its regular files, sorted, each with its size and, when first is set,
// its first line. Symlinks and special files are left out (never
// followed); the walk stops after twice the file cap.
func (r *Root) List(under string, first bool) ([]Entry, error) {
	var out []Entry
	err := r.walk(under, func(path string, e confine.DirEntry, d *confine.Dir) error {
		en := Entry{Path: path, Size: e.Size}
		if first {
			en.FirstLine = r.firstLine(d, e.Name)
		}
		out = append(out, en)
		return nil
	})
	sortEntries(out)
	return out, err
}

// Usage is the scope's file count and total bytes.
func (r *Root) Usage() (files int, bytes int64, err error) {
	err = r.walk("", func(path string, e confine.DirEntry, d *confine.Dir) error {
		files++
		bytes += e.Size
		return nil
	})
	return files, bytes, err
}

var errWalkStop = errors.New("stop")

// walkFiles bounds the regular files one walk visits: twice the cap, so
// a scope stuffed past it by hand is refused, not walked without end.
func (l Limits) walkFiles() int { return 2*l.Files + 64 }

// walkDirs bounds the other entries one walk visits (directories, and
// what is planted by hand: symlinks, FIFOs). Directories do not count
// against the file cap: the tools make at most maxDepth-1 of them for
// each file and a delete removes those it leaves empty, so a scope the
// tools filled never comes near this bound.
func (l Limits) walkDirs() int { return maxDepth*l.Files + 64 }

// walk calls fn for every regular file below under.
func (r *Root) walk(under string, fn func(path string, e confine.DirEntry, d *confine.Dir) error) error {
	var d *confine.Dir
	var err error
	prefix := ""
	if under == "" {
		d, err = r.fa.OpenDir(".")
	} else {
		var p, name string
		if p, err = CleanPath(under); err != nil {
			return err
		}
		var parent *confine.Dir
		if parent, name, err = r.openDirOf(p); err == nil {
			d, err = parent.OpenDir(name)
			parent.Close()
		}
		prefix = p + "/"
	}
	if err != nil {
		return notFound(err, under)
	}
	files, others := r.lim.walkFiles(), r.lim.walkDirs()
	var rec func(d *confine.Dir, prefix string, depth int) error
	rec = func(d *confine.Dir, prefix string, depth int) error {
		defer d.Close()
		es, truncated, err := d.Entries(files + others + 1)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Kind == confine.PathFile {
				if files--; files < 0 {
					return fmt.Errorf("the memory scope holds more than %d files; delete some", r.lim.walkFiles())
				}
			} else if others--; others < 0 {
				return fmt.Errorf("the memory scope holds more than %d directories and other entries; delete empty directories (memory_delete removes one)", r.lim.walkDirs())
			}
			switch e.Kind {
			case confine.PathFile:
				if err := fn(prefix+e.Name, e, d); err != nil {
					return err
				}
			case confine.PathDir:
				if depth >= maxDepth {
					continue
				}
				sub, err := d.OpenDir(e.Name)
				if err != nil {
					continue
				}
				if err := rec(sub, prefix+e.Name+"/", depth+1); err != nil {
					return err
				}
			}
		}
		if truncated {
			// Only a directory read short (at MaxDirNames) with masked
			// names left out comes here: a full read fails a bound above.
			return fmt.Errorf("a directory of the memory scope holds more than %d entries; delete some", r.lim.walkFiles()+r.lim.walkDirs())
		}
		return nil
	}
	err = rec(d, prefix, strings.Count(prefix, "/"))
	if errors.Is(err, errWalkStop) {
		return nil
	}
	return err
}

// firstLine is the first non-empty line of a file, shortened.
func (r *Root) firstLine(d *confine.Dir, name string) string {
	f, err := d.OpenFile(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 4096))
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			return shorten(t, firstLineBytes)
		}
	}
	return ""
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// lock serialises a mutation of the root: within this process (mu) and
// between processes (an advisory lock on the root directory).
func (r *Root) lock() (unlock func(), err error) {
	r.mu.Lock()
	r.life.RLock()
	if r.fd < 0 {
		err = errors.New("it is closed")
	} else {
		var u func()
		if u, err = lockHeld(r.fd); err == nil {
			return func() { u(); r.life.RUnlock(); r.mu.Unlock() }, nil
		}
	}
	r.life.RUnlock()
	r.mu.Unlock()
	return nil, fmt.Errorf("lock the %s memory scope: %w", r.scope, err)
}

// Write creates or replaces a memory file atomically (a temp file renamed
// over it: a reader, or another session, sees the old file or the new
// one, never a part). created reports a new file.
func (r *Root) Write(path string, content []byte) (created bool, err error) {
	p, err := CleanPath(path)
	if err != nil {
		return false, err
	}
	unlock, err := r.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	return r.writeLocked(p, content)
}

func (r *Root) writeLocked(p string, content []byte) (bool, error) {
	if int64(len(content)) > r.lim.FileBytes {
		return false, fmt.Errorf("content is %d bytes, over the %d-byte memory file cap", len(content), r.lim.FileBytes)
	}
	files, total, err := r.Usage()
	if err != nil {
		return false, err
	}
	var old int64 = -1
	if fi, err := r.fa.Lstat(p); err == nil && fi.Mode.IsRegular() {
		old = fi.Size
	}
	if old < 0 && files+1 > r.lim.Files {
		return false, fmt.Errorf("the %s memory scope already holds %d files, its cap; delete or merge some first", r.scope, files)
	}
	if after := total - max(old, 0) + int64(len(content)); after > r.lim.ScopeBytes {
		return false, fmt.Errorf("this write would make the %s memory scope %d bytes, over its %d-byte cap; delete or shorten some files first", r.scope, after, r.lim.ScopeBytes)
	}
	return r.fa.WriteFile(p, content, confine.WriteOptions{CreateParents: true, Mode: 0o600})
}

// Edit replaces the one occurrence of oldText with newText. Zero or
// several occurrences are an error naming the count. The root is locked
// (every server process on the host) from the read to the replace, and
// the file is read again just before it is replaced: an edit whose
// oldText another session changed meanwhile fails instead of undoing that
// change.
func (r *Root) Edit(path, oldText, newText string) error {
	p, err := CleanPath(path)
	if err != nil {
		return err
	}
	if oldText == "" {
		return errors.New("old_text is empty; give the exact text to replace")
	}
	unlock, err := r.lock()
	if err != nil {
		return err
	}
	defer unlock()
	b, err := r.Read(p)
	if err != nil {
		return err
	}
	switch n := bytes.Count(b, []byte(oldText)); n {
	case 1:
	case 0:
		return fmt.Errorf("old_text was found 0 times in %s; it must match exactly once (read the file again: it may have changed)", p)
	default:
		return fmt.Errorf("old_text was found %d times in %s; it must match exactly once (include more context)", n, p)
	}
	out := bytes.Replace(b, []byte(oldText), []byte(newText), 1)
	again, err := r.Read(p)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, b) {
		return fmt.Errorf("%s changed while it was edited; read it again", p)
	}
	_, err = r.writeLocked(p, out)
	return err
}

// Delete removes a memory file, or an empty directory, and then every
// parent directory that leaves empty (the root itself stays). Directories
// are removed through held handles (dirs_linux.go), never by path.
func (r *Root) Delete(path string) error {
	p, err := CleanPath(path)
	if err != nil {
		return err
	}
	unlock, err := r.lock()
	if err != nil {
		return err
	}
	defer unlock()
	parts := strings.Split(p, "/")
	// The file layer judges the target by its write rules (the denylist,
	// git metadata, no symlink) and removes it if it is a file; a
	// directory passes those rules and comes back as EISDIR.
	err = r.fa.Remove(p)
	if errors.Is(err, syscall.EISDIR) {
		return r.removeDirectory(p, parts)
	}
	if err != nil {
		return notFound(err, p)
	}
	r.pruneParents(parts)
	return nil
}

// Search finds the lines matching pattern (a regular expression, RE2
// syntax, or literal text) in every file of the scope, at most MaxMatches.
func (r *Root) Search(pattern string, literal bool) (ms []Match, truncated bool, err error) {
	if pattern == "" {
		return nil, false, errors.New("pattern is empty")
	}
	if literal {
		pattern = regexp.QuoteMeta(pattern)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, false, fmt.Errorf("pattern: %w (set literal to search for the text as is)", err)
	}
	err = r.walk("", func(path string, e confine.DirEntry, d *confine.Dir) error {
		f, err := d.OpenFile(e.Name)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(io.LimitReader(f, r.lim.FileBytes))
		sc.Buffer(make([]byte, 0, 64<<10), int(r.lim.FileBytes)+1)
		for n := 1; sc.Scan(); n++ {
			if re.Match(sc.Bytes()) {
				if len(ms) >= MaxMatches {
					truncated = true
					return errWalkStop
				}
				ms = append(ms, Match{Path: path, Line: n, Text: shorten(sc.Text(), matchTextBytes)})
			}
		}
		return nil
	})
	return ms, truncated, err
}
