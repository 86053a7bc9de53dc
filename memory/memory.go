// Package memory keeps what an agent chooses to remember between sessions
// (docs/memory.md, "Memory"): one root per project and one per user, under the
// server's state directory, each reached only through its own confined file
// layer. It holds no MCP; the tools that expose it are in package tools.
//
// # Layout
//
//	<state>/memory/personal/              the user's personal scope
//	<state>/memory/projects/<key>/         one project's scope
//	<state>/memory/projects/<key>.path     the worktree that project is (for people)
//
// key is the worktree's base name (sanitised) and a hash of its real path,
// so two worktrees never share a root and the same worktree always finds
// its own. The .path file lies beside the root, never inside it, so no
// tool reaches it.
//
// # Confinement
//
// Each root is a confine.FileAccess over a policy of its own: mode
// restricted, the root as its only worktree, the session's denylist
// (minus the state directory the root lies in), no scratch. Its rules do
// not depend on the session's mode: with the session's sandbox off the
// memory roots are confined all the same. Every path is a relative path,
// checked lexically here (CleanPath) and then resolved by the kernel
// beneath the held root with no symlink on the way; the file layer judges
// what it opened (a hard link to a masked file is refused by identity, a
// device or FIFO by type). A root that is itself a symlink is refused when
// it is opened.
//
// What this package does itself, outside the file layer (making the
// layout under the state directory, the project records, a root's lock,
// removing the directories a delete leaves empty), goes through held
// directory handles, one component at a time (dirs_linux.go), never a
// path string below the state directory.
package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/evener-dev/evener-mcp/confine"
)

// Scope names a memory root.
type Scope string

const (
	Project  Scope = "project"
	Personal Scope = "personal"
)

// ParseScope accepts "" (project), "project" and "personal".
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case "", Project:
		return Project, nil
	case Personal:
		return Personal, nil
	}
	return "", fmt.Errorf("unknown memory scope %q (want project or personal)", s)
}

// Limits bound one scope.
type Limits struct {
	FileBytes  int64 // one file's content
	ScopeBytes int64 // all files of a scope together
	Files      int   // files in a scope
}

// DefaultLimits are sized for notes, not for data.
var DefaultLimits = Limits{FileBytes: 100 << 10, ScopeBytes: 2 << 20, Files: 200}

// Path rules checked before the kernel sees a path.
const (
	maxPathBytes = 512
	maxDepth     = 8
	maxNameBytes = 255
)

// ErrInvalidPath is wrapped by every refusal of CleanPath.
var ErrInvalidPath = errors.New("invalid memory path")

// CleanPath validates a model-supplied memory path: relative, clean, valid
// UTF-8 with no control character, no "..", no "." component, no leading
// "~", no empty component, at most 8 components and 512 bytes. It returns
// the path as the file layer is given it. It touches no filesystem.
func CleanPath(p string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w %q: %s", ErrInvalidPath, printable(p), why)
	}
	switch {
	case p == "":
		return bad("empty (name a file relative to the scope's root)")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case len(p) > maxPathBytes:
		return bad(fmt.Sprintf("longer than %d bytes", maxPathBytes))
	case strings.HasPrefix(p, "/"):
		return bad("absolute (paths are relative to the scope's root)")
	case strings.HasPrefix(p, "~"):
		return bad("a home-relative path (paths are relative to the scope's root)")
	case strings.ContainsRune(p, '\\'):
		return bad("contains a backslash")
	}
	for _, r := range p {
		if r == 0 || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return bad("contains a control or format character")
		}
	}
	parts := strings.Split(p, "/")
	if len(parts) > maxDepth {
		return bad(fmt.Sprintf("deeper than %d components", maxDepth))
	}
	for _, c := range parts {
		switch {
		case c == "":
			return bad("an empty component")
		case c == "." || c == "..":
			return bad("a . or .. component")
		case len(c) > maxNameBytes:
			return bad(fmt.Sprintf("a component longer than %d bytes", maxNameBytes))
		}
	}
	return p, nil
}

// printable is p with anything unprintable escaped, for messages.
func printable(p string) string {
	q := fmt.Sprintf("%q", p)
	return q[1 : len(q)-1]
}

// ProjectKey is the directory name of a worktree's project root: its base
// name, sanitised, and the first 16 bytes of the SHA-256 of its real path.
func ProjectKey(realWorktree string) string {
	sum := sha256.Sum256([]byte(realWorktree))
	base := strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '_'
	}, filepath.Base(realWorktree))
	base = strings.Trim(base, "._")
	if len(base) > 32 {
		base = base[:32]
	}
	if base == "" {
		base = "root"
	}
	return base + "-" + hex.EncodeToString(sum[:16])
}

// Store is one session's memory: a root per scope. A scope whose root
// could not be opened is kept with the reason, so a call naming it says
// why.
type Store struct {
	roots map[Scope]*Root
	errs  map[Scope]error
}

// Open opens the personal root and worktree's project root under stateDir,
// creating them (0700) when missing. base is the session's policy: the
// memory roots inherit its denylist (minus the state directory itself).
// An error is returned only when neither scope can be used.
func Open(stateDir, worktree string, base *confine.Policy, lim Limits) (*Store, error) {
	if stateDir == "" || !filepath.IsAbs(stateDir) {
		return nil, errors.New("memory needs an absolute state directory")
	}
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	s := &Store{roots: map[Scope]*Root{}, errs: map[Scope]error{}}
	realWT, err := filepath.EvalSymlinks(worktree)
	if err != nil {
		return nil, fmt.Errorf("memory: worktree: %w", err)
	}
	key := ProjectKey(realWT)
	for _, sc := range []Scope{Personal, Project} {
		rel, record := []string{"memory", "personal"}, ""
		if sc == Project {
			rel, record = []string{"memory", "projects", key}, realWT
		}
		r, err := openRoot(stateDir, rel, base, lim, record)
		if err != nil {
			s.errs[sc] = fmt.Errorf("memory scope %s is unavailable: %w", sc, err)
			continue
		}
		r.scope = sc
		s.roots[sc] = r
	}
	if len(s.roots) == 0 {
		return nil, errors.Join(s.errs[Personal], s.errs[Project])
	}
	return s, nil
}

// Root returns the scope's root, or why it is unavailable.
func (s *Store) Root(sc Scope) (*Root, error) {
	if r := s.roots[sc]; r != nil {
		return r, nil
	}
	if err := s.errs[sc]; err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("unknown memory scope %q", sc)
}

// Unavailable lists why scopes could not be opened.
func (s *Store) Unavailable() []error {
	var out []error
	for _, sc := range []Scope{Project, Personal} {
		if s.errs[sc] != nil {
			out = append(out, s.errs[sc])
		}
	}
	return out
}

// Close releases every root.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, r := range s.roots {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// Root is one scope's confined directory.
type Root struct {
	scope Scope
	dir   string // real absolute path, no symlink in it when opened
	// fd is the root, held (O_PATH): the lock and the removal of emptied
	// directories go through it; -1 once closed.
	fd int
	// life guards fd: read-held by every mutation (lock to unlock),
	// write-held by Close, so a closed descriptor's number (perhaps
	// reused by another open) is never used.
	life sync.RWMutex
	fa   *confine.FileAccess
	lim  Limits
	// mu serialises this root's mutations within the process; lockOf
	// shares it between the sessions of one server that open the same
	// root (the atomic replace keeps other processes from tearing a file).
	mu *sync.Mutex
}

var (
	locksMu sync.Mutex // guards locks
	locks   = map[string]*sync.Mutex{}
)

func lockOf(dir string) *sync.Mutex {
	locksMu.Lock()
	defer locksMu.Unlock()
	if m := locks[dir]; m != nil {
		return m
	}
	m := &sync.Mutex{}
	locks[dir] = m
	return m
}

// Scope is the root's scope.
func (r *Root) Scope() Scope { return r.scope }

// Dir is the root's absolute path (for the server's own messages; never
// shown to the model).
func (r *Root) Dir() string { return r.dir }

// Limits are the root's caps.
func (r *Root) Limits() Limits { return r.lim }

// Close releases the root.
func (r *Root) Close() error {
	r.life.Lock()
	defer r.life.Unlock()
	err := errors.Join(r.fa.Close(), closeHeld(r.fd))
	r.fd = -1
	return err
}

// placeholderHome is the home the memory policy is resolved with: the
// policy's own default denylist would otherwise mask the default state
// directory, where the roots lie. It only adds entries (under a path that
// does not exist); the real denylist is the session's, passed whole.
const placeholderHome = "/nonexistent/evener-mcp-memory-home"

// openRoot makes stateDir/rel... (each component a real directory, never
// a symlink, made and opened relative to the one before it) and opens a
// file layer confined to it. worktree, when set, is recorded beside the
// root (rel's last component + ".path").
func openRoot(stateDir string, rel []string, base *confine.Policy, lim Limits, worktree string) (_ *Root, err error) {
	// The state directory itself is made by path: it is the server's own
	// (masked from every sandbox, docs/memory.md, "Memory"), and what lies above it
	// is the user's; everything below it is made through held handles.
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	stateReal, err := filepath.EvalSymlinks(stateDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(append([]string{stateReal}, rel...)...)
	fd, parent, err := layout(stateReal, rel)
	if err != nil {
		return nil, err
	}
	defer closeHeld(parent)
	defer func() {
		if err != nil {
			closeHeld(fd)
		}
	}()
	if worktree != "" {
		if err := recordProjectAt(parent, rel[len(rel)-1]+".path", worktree); err != nil {
			return nil, err
		}
	}
	// The session's denylist, but for the entries that hold the state
	// directory (it, or a parent a deny_paths entry names): the root lies
	// there, and nothing above the root is reachable from it anyway.
	var deny []string
	for _, d := range base.Denylist() {
		holds := confine.Within(stateReal, d) || confine.Within(stateDir, d)
		if r, err := filepath.EvalSymlinks(d); err == nil && confine.Within(stateReal, r) {
			holds = true
		}
		if !holds {
			deny = append(deny, d)
		}
	}
	// RunAsRoot stays false: for a root server Resolve would add every
	// person's credential paths, root's default state directory among
	// them, which holds this root. Those masks are in the session's
	// denylist, passed above, all but the ones that hold the root.
	host := confine.HostReport{OS: "linux", Bwrap: "(the memory file layer starts no process)", UserNS: true, Seccomp: true}
	pol, err := confine.Resolve(confine.Spec{
		Mode: confine.ModeRestricted, ModeExplicit: true, Network: confine.NetworkOff,
		Workdir: dir, Home: placeholderHome, ExtraDeny: deny,
	}, host)
	if err != nil {
		return nil, err
	}
	if pol.Workdir() != dir {
		// Resolve follows symlinks: a component swapped for one since the
		// check above.
		return nil, fmt.Errorf("%s moved while it was opened (a symlink on its path)", filepath.Base(dir))
	}
	// NewFileAccess opens the root by this exact spelling with
	// RESOLVE_NO_SYMLINKS: a symlink anywhere on it now fails the open.
	fa, err := confine.NewFileAccessWith(pol, "", confine.FileAccessOptions{MaxReadBytes: lim.FileBytes, MaxWriteBytes: lim.FileBytes,
		MaxDirNames: lim.walkFiles() + lim.walkDirs() + 1})
	if err != nil {
		return nil, err
	}
	return &Root{dir: dir, fd: fd, fa: fa, lim: lim, mu: lockOf(dir)}, nil
}

// sortEntries orders a listing by path.
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
}
