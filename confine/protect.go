package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Protected paths and runner state (docs/protected-paths.md, "Protected paths and runner
// state").
//
// A protected path is never writable in a sandboxed mode, by the file
// tools or by any spawned process, under its literal spelling and its
// symlink-resolved one (resolved once at start, so a symlink swapped later
// cannot move the protection off the file it named, and again at each
// spawn). The mount plan read-only binds every spelling and makes every
// directory between the outermost writable bind holding it and the path a
// mount point of its own, so no ancestor can be renamed (rename(2) of a
// mount point fails with EBUSY) and the path cannot be carried out from
// under its bind. The file layer refuses a write, delete or rename of the
// path, of anything in it and of any of its ancestors.
//
// A runner state directory (an agent host's own state) is writable in every
// sandboxed mode, read-only included, by both layers; it may not overlap
// the denylist, a protected path or the server's state directory.

// protectedPath is one protected path: as configured and as it resolved at
// start (equal when no symlink was on the way).
type protectedPath struct {
	lit, real string
}

// errOverlap is wrapped by Resolve for a runner state directory that
// overlaps what must stay masked or read-only.
var errOverlap = errors.New("overlaps")

// resolveBeyond resolves every symlink of the absolute path p that exists,
// keeping the components after the deepest existing ancestor as written.
func resolveBeyond(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for d := p; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{r}, rest...)...)
		}
		if d == "/" || d == "." {
			return p
		}
		rest = append(rest, filepath.Base(d))
	}
}

// overlapping reports whether a and b are equal or one lies inside the
// other.
func overlapping(a, b string) bool { return Within(a, b) || Within(b, a) }

// resolveProtect fills p.protect and p.stateRW from spec and refuses every
// overlap a runner state directory may not have, and a write root inside a
// protected path.
func (p *Policy) resolveProtect(spec Spec) error {
	for _, d := range spec.Protected {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--protect %s: not an absolute path", d)
		}
		pp := protectedPath{lit: filepath.Clean(d), real: resolveBeyond(d)}
		if !slices.Contains(p.protect, pp) {
			p.protect = append(p.protect, pp)
		}
	}
	if p.mode != ModeOff {
		roots := append([]string{p.workdir}, p.addDirs...)
		for _, pp := range p.protect {
			for _, r := range roots {
				if Within(r, pp.lit) || Within(r, pp.real) {
					return fmt.Errorf("--protect %s: the write root %s lies inside it (protect paths inside the worktree, or leave the root out)", pp.lit, r)
				}
			}
		}
	}
	for _, d := range spec.StateRW {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--state-rw %s: not an absolute path", d)
		}
		cd, err := canonicalDir(d)
		if err != nil {
			return fmt.Errorf("--state-rw %s: %w", d, err)
		}
		spell := []string{filepath.Clean(d), cd}
		for _, s := range spell {
			if s == "/" {
				return fmt.Errorf("--state-rw %s: %w the whole filesystem", d, errOverlap)
			}
		}
		// The server's own state directory first: it is on the denylist too,
		// and this names it better.
		if spec.StateDir != "" {
			for _, sd := range []string{filepath.Clean(spec.StateDir), resolveBeyond(spec.StateDir)} {
				for _, s := range spell {
					if overlapping(s, sd) {
						return fmt.Errorf("--state-rw %s %w the server's own state directory (--state-dir)", d, errOverlap)
					}
				}
			}
		}
		for _, den := range append(append(p.Denylist(), systemSecrets...), PseudoDenylist...) {
			for _, ds := range resolvedSpellings(den) {
				for _, s := range spell {
					if overlapping(s, ds) {
						return fmt.Errorf("--state-rw %s %w the denylisted %s", d, errOverlap, den)
					}
				}
			}
		}
		for _, pp := range p.protect {
			for _, s := range spell {
				if overlapping(s, pp.lit) || overlapping(s, pp.real) {
					return fmt.Errorf("--state-rw %s %w the protected %s (--protect)", d, errOverlap, pp.lit)
				}
			}
		}
		if err := sharedTreeGuard(cd, p.home, "", tempRoots(p.env)); err != nil {
			return fmt.Errorf("--state-rw %s: %w", d, err)
		}
		if !slices.Contains(p.stateRW, cd) {
			p.stateRW = append(p.stateRW, cd)
		}
	}
	return nil
}

// Protected lists the protected paths, each under its literal and its
// start-resolved spelling.
func (p *Policy) Protected() []string {
	var out []string
	for _, pp := range p.protect {
		for _, s := range []string{pp.lit, pp.real} {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// ProtectedConfigured lists the protected paths as configured.
func (p *Policy) ProtectedConfigured() []string {
	var out []string
	for _, pp := range p.protect {
		out = append(out, pp.lit)
	}
	return out
}

// ProtectedInWorktree returns the protected paths inside the worktree,
// worktree-relative (as the model should see them), and how many others
// there are.
func (p *Policy) ProtectedInWorktree() (in []string, outside int) {
	for _, pp := range p.protect {
		found := false
		for _, s := range []string{pp.real, pp.lit} {
			if Within(s, p.workdir) {
				rel, err := filepath.Rel(p.workdir, s)
				if err == nil {
					in = append(in, rel)
					found = true
					break
				}
			}
		}
		if !found {
			outside++
		}
	}
	return in, outside
}

// StateRW lists the runner state directories (canonical), writable in
// every sandboxed mode.
func (p *Policy) StateRW() []string { return slices.Clone(p.stateRW) }

// protectSpellings are every spelling of every protected path now: the
// literal one, the one resolved at start and the literal one resolved
// again (a symlink on the way may have changed since).
func (p *Policy) protectSpellings() []string {
	out := p.Protected()
	for _, pp := range p.protect {
		if r := resolveBeyond(pp.lit); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// inspectProtect fills l.Protect: every spelling of every protected path
// that exists. The spelling resolved at start is marked Real after checking
// that no component of it is a symlink: Plan makes its ancestors mount
// points with writable binds, which must never follow a link, and every
// sandbox since the first spawn has had those ancestors pinned, so no
// running command can have swapped one for a link. The literal spelling
// resolved again now (a symlink on the way may point elsewhere since) is
// bound read-only only: a running command may have chosen where it leads,
// and a read-only bind redirected by a link it plants only makes something
// else read-only. A start spelling that does not exist and lies inside a
// write root is created as an empty directory first (bubblewrap needs
// something to bind over), one component at a time, never through a
// symlink; the spawn is refused if that cannot be done safely.
func inspectProtect(p *Policy, l *Layout) error {
	if p.Mode() == ModeOff || len(p.protect) == 0 {
		return nil
	}
	roots := append(p.WriteRoots(), p.StateRW()...)
	type spelling struct {
		path  string
		start bool
	}
	var reals []spelling
	for _, pp := range p.protect {
		reals = append(reals, spelling{pp.real, true})
		if r := resolveBeyond(pp.lit); r != pp.real {
			reals = append(reals, spelling{r, false})
		}
	}
	for _, sp := range reals {
		r := sp.path
		if k, _ := lstatKind(r); k == PathAbsent && p.writes() && sp.start {
			if underAny(r, roots) && !slices.Contains(roots, r) {
				if err := mkdirBeneath(roots, r); err != nil {
					return fmt.Errorf("%w: protected path %s: %w", ErrUnsafeLayout, r, err)
				}
			}
		}
		if ev, err := filepath.EvalSymlinks(r); err != nil || ev != r {
			continue // absent or not real (yet): only its read-only binds apply
		}
		k, _ := lstatKind(r)
		if k == PathAbsent || k == PathSymlink {
			continue
		}
		if err := checkHardLinks(r); err != nil {
			return err
		}
		if i := slices.IndexFunc(l.Protect, func(e ProtectEntry) bool { return e.Path == r }); i >= 0 {
			l.Protect[i].Real = l.Protect[i].Real || sp.start
			continue
		}
		l.Protect = append(l.Protect, ProtectEntry{Path: r, Real: sp.start})
	}
	for _, pp := range p.protect {
		if slices.ContainsFunc(l.Protect, func(e ProtectEntry) bool { return e.Path == pp.lit }) {
			continue
		}
		if _, err := os.Stat(pp.lit); err == nil {
			l.Protect = append(l.Protect, ProtectEntry{Path: pp.lit})
		}
	}
	for _, d := range p.StateRW() {
		if k, _ := lstatKind(d); k != PathDir {
			return fmt.Errorf("%w: runner state directory %s is no longer a directory", ErrUnsafeLayout, d)
		}
		if r, err := filepath.EvalSymlinks(d); err != nil || r != d {
			return fmt.Errorf("%w: runner state directory %s is no longer its own canonical path", ErrUnsafeLayout, d)
		}
	}
	return nil
}

// maxProtectWalk bounds the walk of a protected directory for hard links
// at each spawn.
const maxProtectWalk = 1024

// checkHardLinks refuses the spawn when a regular file at or (within
// maxProtectWalk entries) in the protected path r has another name: a read-only
// bind covers the protected name, not another link to the same inode that
// lies in a write root. A sandboxed process cannot make a new one (link(2)
// across mounts fails with EXDEV); one made outside the sandbox would be a
// way around the protection, so the spawn fails closed with the reason.
func checkHardLinks(r string) error {
	n := 0
	return filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil || n >= maxProtectWalk {
			return filepath.SkipDir
		}
		n++
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if nl := fileNlink(fi); nl > 1 {
			return fmt.Errorf("%w: protected file %s has %d hard links; another name of it would stay writable (remove the extra links)", ErrUnsafeLayout, p, nl)
		}
		return nil
	})
}

// mkdirBeneath creates the directories down to target from the outermost
// of roots holding it, relative to held descriptors (HeldDir.MkdirAll): a
// component that exists as anything but a directory (a symlink included)
// refuses, and nothing is ever created through a link.
func mkdirBeneath(roots []string, target string) error {
	root := ""
	for _, w := range roots {
		if Within(target, w) && (root == "" || len(w) < len(root)) {
			root = w
		}
	}
	rel, err := filepath.Rel(root, target)
	if root == "" || err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("not below a write root")
	}
	hd, err := OpenHeld(root, roots)
	if err != nil {
		return err
	}
	defer hd.Close()
	made, err := hd.MkdirAll(rel, 0o755)
	if err != nil {
		return err
	}
	return made.Close()
}

// ProtectEntry is one spelling of a protected path found at spawn. Real
// spellings have no symlink component: Plan pins their ancestors.
type ProtectEntry struct {
	Path string
	Real bool
}

// planProtect appends the runner state binds' counterpart for protected
// paths: for every spelling a write in mp could reach, the directories
// between the outermost writable bind holding it and the path become mount
// points (Real spellings only), then every such spelling is bound
// read-only.
func planProtect(mp MountPlan, l Layout) MountPlan {
	var chain, ro []string
	for _, e := range l.Protect {
		if !planWrites(mp, e.Path) {
			continue
		}
		ro = append(ro, e.Path)
		if !e.Real {
			continue
		}
		outer := ""
		for _, m := range mp {
			if m.Kind == MountBind && m.Src == m.Dst && Within(e.Path, m.Dst) && (outer == "" || len(m.Dst) < len(outer)) {
				outer = m.Dst
			}
		}
		if outer == "" {
			continue
		}
		for d := filepath.Dir(e.Path); d != outer && Within(d, outer); d = filepath.Dir(d) {
			chain = append(chain, d)
		}
	}
	slices.Sort(chain) // parents first
	chain = slices.Compact(chain)
	isDst := func(d string) bool { return slices.ContainsFunc(mp, func(m Mount) bool { return m.Dst == d }) }
	for _, d := range chain {
		// A directory inside a protected path or already read-only cannot
		// be renamed (EROFS); one already a mount point needs nothing.
		if underAny(d, ro) || isDst(d) || !planWrites(mp, d) {
			continue
		}
		mp = append(mp, Mount{Kind: MountBind, Src: d, Dst: d, Why: "protected path's ancestor pinned: renaming it fails"})
	}
	slices.Sort(ro)
	for _, r := range slices.Compact(ro) {
		mp = append(mp, Mount{Kind: MountROBind, Src: r, Dst: r, Why: "protected path, read-only"})
	}
	return mp
}

// planWrites reports whether a write to the host's file at path reaches it
// under mp so far: the last mount covering path is a bind of itself.
func planWrites(mp MountPlan, path string) bool {
	w := false
	for _, m := range mp {
		if !Within(path, m.Dst) {
			continue
		}
		w = m.Kind == MountBind && m.Src == m.Dst
	}
	return w
}
