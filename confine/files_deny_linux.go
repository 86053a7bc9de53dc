//go:build linux

package confine

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The denylist's real locations: the masked paths' literal and resolved
// spellings, the inodes in them (so a hard link or a bind mount of a
// masked file elsewhere is known by identity), the other sessions' scratch
// in the server-private directory (HideBeside) and other servers' scratch
// in the temporary directories; re-resolved at most every
// FileAccessOptions.DenyRefresh.

type devIno struct{ dev, ino uint64 }

// denyState is the denylist's real locations at one moment.
type denyState struct {
	spellings []string            // literal and resolved spellings, absolute
	hide      string              // FileAccessOptions.HideBeside, real path
	own       string              // the scratch, the one thing under hide that is not hidden
	inodes    map[devIno]struct{} // the masked entries and what lies in them (bounded)
	at        time.Time
	// tempRoots are the real temporary directories where servers make
	// their scratch (scratchPrefixes): every such entry in them but own
	// and those holding a root of this access is refused.
	tempRoots []string
	keep      []string // real paths of the held roots (workdir, add-dirs)
	// protect are every spelling of every protected path (protect.go): a
	// write, delete or rename of one, of anything in one or of an
	// ancestor of one is refused.
	protect []string
}

// maxDenyInodes bounds the walk of the masked directories that records
// their inodes (so a hard link or a bind mount of a masked file elsewhere
// is recognised by identity, not only by path).
const maxDenyInodes = 4096

func (fa *FileAccess) computeDeny() *denyState {
	st := &denyState{inodes: map[devIno]struct{}{}, at: time.Now(), hide: fa.hide}
	if fa.scr != nil {
		st.own = fa.scr.real
	}
	if fa.mode != ModeOff {
		st.protect = fa.pol.protectSpellings()
		st.tempRoots = scratchTempRoots(fa.pol)
		st.keep = append(st.keep, fa.wd.real)
		for _, r := range fa.adds {
			st.keep = append(st.keep, r.real)
		}
	}
	add := func(s string) {
		if !slices.Contains(st.spellings, s) {
			st.spellings = append(st.spellings, s)
		}
	}
	for _, d := range PseudoDenylist {
		for _, s := range resolvedSpellings(d) {
			add(s)
		}
	}
	budget := maxDenyInodes
	for _, d := range fa.deny {
		for _, s := range resolvedSpellings(d) {
			add(s)
			var sst unix.Stat_t
			if unix.Stat(s, &sst) != nil {
				continue
			}
			st.inodes[devIno{uint64(sst.Dev), sst.Ino}] = struct{}{}
			if sst.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			_ = filepath.WalkDir(s, func(p string, e fs.DirEntry, err error) error {
				if err != nil || budget <= 0 {
					return filepath.SkipDir
				}
				if depth(p)-depth(s) > 4 {
					return filepath.SkipDir
				}
				if e.Type()&fs.ModeSymlink != 0 {
					return nil
				}
				var est unix.Stat_t
				if unix.Lstat(p, &est) == nil {
					st.inodes[devIno{uint64(est.Dev), est.Ino}] = struct{}{}
					budget--
				}
				return nil
			})
		}
	}
	return st
}

// denyNow is the current denylist state, re-resolved at most every
// DenyRefresh (by one caller at a time; the others use the previous one).
func (fa *FileAccess) denyNow() *denyState {
	st := fa.denyCur.Load()
	if fa.opts.DenyRefresh > 0 && time.Since(st.at) > fa.opts.DenyRefresh && fa.denyRefresh.TryLock() {
		defer fa.denyRefresh.Unlock()
		st = fa.computeDeny()
		fa.denyCur.Store(st)
	}
	return st
}

// RefreshDenylist re-resolves the denylist's real locations now.
func (fa *FileAccess) RefreshDenylist() {
	fa.denyRefresh.Lock()
	defer fa.denyRefresh.Unlock()
	fa.denyCur.Store(fa.computeDeny())
}

func (st *denyState) deniedPath(p string) bool {
	return st.deniedClean(filepath.Clean(p)) // once, not once per spelling
}

// deniedClean is deniedPath for a path already clean (a verified
// directory's real path joined with one validated name).
func (st *denyState) deniedClean(p string) bool {
	if st.hide != "" && withinClean(p, st.hide) && (st.own == "" || !withinClean(p, st.own)) {
		return true
	}
	if st.otherScratch(p) {
		return true
	}
	for _, s := range st.spellings {
		if withinClean(p, s) {
			return true
		}
	}
	return false
}

// scratchPrefixes name what evener-mcp servers create directly in a
// temporary directory: a stdio session's scratch, an HTTP server's parent
// of its sessions' scratch, a session's egress bridge sockets (see
// NewLauncherUnder and docs/security.md, "What is enforced").
var scratchPrefixes = []string{"evener-mcp-", "evs-", "evener-egress-"}

// scratchTempRoots are the real temporary directories a server on this
// host may make its scratch in: the system ones, the policy's TMPDIR and
// scratch root, and this process's TMPDIR.
func scratchTempRoots(p *Policy) []string {
	var out []string
	cands := append(tempRoots(p.env), p.ScratchRoot(), os.TempDir())
	for _, c := range cands {
		if c == "" || !filepath.IsAbs(c) {
			continue
		}
		for _, sp := range resolvedSpellings(c) {
			if !slices.Contains(out, sp) {
				out = append(out, sp)
			}
		}
	}
	return out
}

// otherScratch reports whether p lies in another session's or another
// server's scratch (a directory named by scratchPrefixes directly in a
// temp root): the shell never sees them (a private /tmp, the server's own
// parent covered), and the file layer must not either. The access's own
// scratch, and an entry holding the worktree or an add-dir, stay visible.
func (st *denyState) otherScratch(p string) bool {
	for _, r := range st.tempRoots {
		if len(p) <= len(r)+1 || p[len(r)] != '/' || p[:len(r)] != r {
			continue
		}
		name, _, _ := strings.Cut(p[len(r)+1:], "/")
		if !slices.ContainsFunc(scratchPrefixes, func(pre string) bool { return strings.HasPrefix(name, pre) }) {
			continue
		}
		entry := p[:len(r)+1+len(name)]
		if st.own != "" && withinClean(p, st.own) {
			return false
		}
		if slices.ContainsFunc(st.keep, func(k string) bool { return withinClean(k, entry) }) {
			return false
		}
		return true
	}
	return false
}

// protectedPath reports whether a write, delete or rename of p would change
// a protected path: p is one, lies in one, or is an ancestor of one.
func (st *denyState) protectedPath(p string) bool {
	p = filepath.Clean(p)
	for _, s := range st.protect {
		if withinClean(p, s) || withinClean(s, p) {
			return true
		}
	}
	return false
}

func (st *denyState) deniedStat(s *unix.Stat_t) bool {
	if s == nil {
		return false
	}
	_, ok := st.inodes[devIno{uint64(s.Dev), s.Ino}]
	return ok
}
