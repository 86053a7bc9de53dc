package search

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// maxIgnoreFileBytes bounds how much of one ignore file is read; the rest
// is not parsed.
const maxIgnoreFileBytes = 1 << 20

// ignoreFiles are the per-directory ignore files, in increasing precedence:
// a rule in .ignore beats one in the .gitignore next to it.
var ignoreFiles = [...]string{".gitignore", ".ignore"}

// ignoreRule is one parsed line of an ignore file.
type ignoreRule struct {
	negate   bool // "!pattern": re-include
	dirOnly  bool // "pattern/": directories only
	basename bool // no "/" in the pattern: match the name at any depth
	seg      segment
	m        *matcher // anchored patterns: the path relative to the file's directory
}

func (r *ignoreRule) match(sub, base string, isDir bool) bool {
	if r.dirOnly && !isDir {
		return false
	}
	if r.basename {
		return r.seg.match(base)
	}
	return r.m.matchPath(sub, isDir)
}

// parseIgnore parses the contents of a gitignore(5) file. Lines that cannot
// be compiled (an unterminated "[", a trailing backslash) are dropped, as
// git drops patterns it cannot match.
func parseIgnore(data []byte) []ignoreRule {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var rules []ignoreRule
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if r, ok := parseIgnoreLine(string(line)); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

// parseIgnoreLine parses one line of gitignore(5): "#" comments, "!"
// negation, "\#" and "\!" escapes, trailing spaces dropped unless escaped, a
// trailing "/" for directories only, a "/" at the start or in the middle
// anchoring the pattern to the file's directory, and "**" components.
func parseIgnoreLine(line string) (ignoreRule, bool) {
	var r ignoreRule
	if line == "" || len(line) > maxIgnoreLineBytes || line[0] == '#' || strings.IndexByte(line, 0) >= 0 {
		return r, false
	}
	line = trimTrailingSpaces(line)
	if strings.HasPrefix(line, "!") {
		r.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = line[:len(line)-1]
	}
	if line == "" {
		return r, false
	}
	if !strings.Contains(line, "/") {
		seg, err := compileSegment(line)
		if err != nil {
			return r, false
		}
		if seg.kind == segGlobstar {
			seg.kind = segAny // a lone "**" is "*"
		}
		r.basename, r.seg = true, seg
		return r, true
	}
	line = strings.TrimPrefix(line, "/")
	a, err := compileAlternative(line, false)
	if err != nil || len(a.segs) == 0 {
		return r, false
	}
	r.m = newMatcher([]alternative{a}, true)
	return r, true
}

// trimTrailingSpaces drops trailing spaces unless the last one is escaped
// with a backslash (git's trim_trailing_spaces).
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

// Ignorer decides which paths the ignore rules of a tree exclude. It loads
// each directory's ignore files through the FS the first time it needs
// them (a walk hands it the listing so it opens only files that exist).
// It is safe for concurrent use.
type Ignorer struct {
	fsys FS
	mu   sync.Mutex // guards dirs (exclude is set once, by NewIgnorer)
	// dirs maps every loaded directory to the nearest directory at or
	// above it that has rules (nil: none), so deciding an entry costs one
	// lookup plus the directories that actually have rules, not its depth.
	dirs    map[string]*ignoreDir
	exclude []ignoreRule // .git/info/exclude, lowest precedence
}

// ignoreDir is a directory with ignore rules.
type ignoreDir struct {
	path  string
	rules []ignoreRule
	up    *ignoreDir // the nearest directory above with rules
}

// NewIgnorer returns an Ignorer for the tree fsys roots, with the rules of
// .git/info/exclude loaded (when the FS lets it be read).
func NewIgnorer(fsys FS) *Ignorer {
	ig := &Ignorer{fsys: fsys, dirs: make(map[string]*ignoreDir)}
	if data, ok := readSmall(fsys, ".git/info/exclude"); ok {
		ig.exclude = parseIgnore(data)
	}
	return ig
}

// Ignored reports whether rel (root-relative, "/"-separated) is excluded by
// the ignore rules: itself, or because a directory above it is (a file
// under an excluded directory cannot be re-included, as in git). .git
// entries are always ignored; the root never is.
func (ig *Ignorer) Ignored(rel string, isDir bool) bool {
	rel, err := cleanRel(rel)
	if err != nil || rel == "" {
		return false
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			if dir, name := splitDir(rel[:i]); ig.ignoredEntry(dir, name, true) {
				return true
			}
		}
	}
	dir, name := splitDir(rel)
	return ig.ignoredEntry(dir, name, isDir)
}

// enter loads the ignore files of dir from its listing, if not yet loaded.
func (ig *Ignorer) enter(dir string, entries []Entry) {
	ig.mu.Lock()
	defer ig.mu.Unlock()
	if _, ok := ig.dirs[dir]; ok {
		return
	}
	var rules []ignoreRule
	for _, name := range ignoreFiles {
		for _, e := range entries {
			if e.Name == name && e.Kind == File {
				if data, ok := readSmall(ig.fsys, join(dir, name)); ok {
					rules = append(rules, parseIgnore(data)...)
				}
			}
		}
	}
	ig.store(dir, rules)
}

// nearestLocked returns the nearest directory with rules at or above dir,
// loading the ignore files of directories a walk did not list (ancestors
// of the search path, paths given to Ignored).
func (ig *Ignorer) nearestLocked(dir string) *ignoreDir {
	if n, ok := ig.dirs[dir]; ok {
		return n
	}
	var rules []ignoreRule
	for _, name := range ignoreFiles {
		if data, ok := readSmall(ig.fsys, join(dir, name)); ok {
			rules = append(rules, parseIgnore(data)...)
		}
	}
	return ig.store(dir, rules)
}

func (ig *Ignorer) store(dir string, rules []ignoreRule) *ignoreDir {
	var up *ignoreDir
	if dir != "" {
		parent, _ := splitDir(dir)
		up = ig.nearestLocked(parent)
	}
	n := up
	if len(rules) > 0 {
		n = &ignoreDir{path: dir, rules: rules, up: up}
	}
	ig.dirs[dir] = n
	return n
}

// ignoredEntry decides the entry name of dir on its own rules, assuming no
// directory above it is ignored (a walk never enters an ignored
// directory). The deepest ignore file with a matching rule decides, its
// last matching rule winning.
func (ig *Ignorer) ignoredEntry(dir, name string, isDir bool) bool {
	if name == ".git" {
		return true
	}
	ig.mu.Lock()
	defer ig.mu.Unlock()
	rel := "" // built only for rules that need the path
	relTo := func(base string) string {
		if rel == "" {
			rel = join(dir, name)
		}
		if base == "" {
			return rel
		}
		return rel[len(base)+1:]
	}
	for n := ig.nearestLocked(dir); n != nil; n = n.up {
		for i := len(n.rules) - 1; i >= 0; i-- {
			r := &n.rules[i]
			if r.dirOnly && !isDir {
				continue
			}
			if r.basename && r.seg.match(name) || !r.basename && r.m.matchPath(relTo(n.path), isDir) {
				return !r.negate
			}
		}
	}
	for i := len(ig.exclude) - 1; i >= 0; i-- {
		r := &ig.exclude[i]
		if r.match(relTo(""), name, isDir) {
			return !r.negate
		}
	}
	return false
}

// readSmall reads at most maxIgnoreFileBytes of a file; ok is false when it
// cannot be opened.
func readSmall(fsys FS, rel string) ([]byte, bool) {
	f, err := fsys.Open(rel)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFileBytes))
	if err != nil {
		return nil, false
	}
	return data, true
}
