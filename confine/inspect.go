package confine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// systemSecrets are host files outside any home that are as sensitive as the
// credential denylist and readable by a server started as root.
var systemSecrets = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key", "/root/.ssh"}

// gitSurfaces are the entries of every git dir that make git run code or
// point it at another repository, pinned read-only (docs/security.md, "What is
// enforced", "Git").
var gitSurfaces = []string{"config", "config.worktree", "hooks", "commondir", "gitdir"}

// ErrUnsafeLayout is returned by Inspect when the filesystem holds something
// the plan cannot protect (a git surface that is a symlink, say): the spawn
// is refused rather than run with a protection silently missing.
var ErrUnsafeLayout = errors.New("unsafe layout")

func lstatKind(p string) (PathKind, string) {
	fi, err := os.Lstat(p)
	if err != nil {
		return PathAbsent, ""
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(p)
		return PathSymlink, t
	case fi.IsDir():
		return PathDir, ""
	case fi.Mode().IsRegular():
		return PathFile, ""
	}
	return PathOther, ""
}

// realLocation resolves every link in p; ok is false when nothing exists
// there.
func realLocation(p string) (string, bool) {
	if _, err := os.Stat(p); err != nil {
		return "", false // absent under every spelling: one syscall, not one per component
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	if k, _ := lstatKind(r); k == PathAbsent || k == PathSymlink {
		return "", false
	}
	return r, true
}

// Inspect gathers the Layout for one spawn. It runs at every spawn, so a
// symlink planted by an earlier command is seen before any mount uses it.
func Inspect(p *Policy, scratch, workdir string) (Layout, error) {
	l := Layout{Scratch: scratch, Workdir: workdir}
	if p.Mode() == ModeOff {
		return l, nil
	}
	l.HookDirs = inspectHookDirs(p, scratch)
	visible := func(path string) bool { return true }
	if p.Mode() == ModeRestricted {
		roots := append(p.WriteRoots(), scratch)
		roots = append(roots, p.StateRW()...)
		for _, r := range systemReadRoots {
			if k, _ := lstatKind(r); k == PathDir {
				roots = append(roots, r)
			}
		}
		roots = append(roots, p.GlobalGitConfig()...)
		// A denylisted path inside a hook directory stays masked.
		roots = append(roots, l.HookDirs...)
		visible = func(path string) bool { return underAny(path, roots) }
	}

	// Denylist: every spelling of a path leads to its real location, and a
	// mount there covers them all (bwrap resolves a destination through its
	// links anyway, and cannot create one behind a symlinked parent).
	for _, d := range append(p.Denylist(), systemSecrets...) {
		sp, ok := realLocation(d)
		if !ok || !visible(sp) {
			continue
		}
		k, _ := lstatKind(sp)
		if !reachableWithoutCaps(sp, k == PathDir) {
			continue
		}
		if !slices.ContainsFunc(l.Deny, func(e Entry) bool { return e.Path == sp }) {
			l.Deny = append(l.Deny, Entry{Path: sp, Kind: k})
		}
	}
	// In restricted mode a socket is visible only inside a hook directory.
	for _, s := range daemonSockets {
		if sp, ok := realLocation(s); ok && visible(sp) && !slices.Contains(l.Sockets, sp) {
			l.Sockets = append(l.Sockets, sp)
		}
	}
	inspectHostSockets(&l, visible) // every other host socket (mountplan_sockets.go)
	if p.Host().RunAsRoot {
		// Only kernel uid 0 can write host sysctls or read these entries
		// without capabilities; for anyone else they are the user's own view.
		l.ProcReadOnly = true
		for _, pm := range procMasks {
			if k, _ := lstatKind(pm); k == PathDir || k == PathFile {
				l.Proc = append(l.Proc, Entry{Path: pm, Kind: k})
			}
		}
	}

	if p.Mode() == ModeRestricted {
		for _, r := range systemReadRoots {
			k, t := lstatKind(r)
			if k == PathDir || k == PathSymlink {
				l.SystemRoots = append(l.SystemRoots, Entry{Path: r, Kind: k, Target: t})
			}
		}
		// Every spelling of every denied path: a ~/.gitconfig linked into a
		// masked directory reached through its own symlink is still denied.
		var deny []string
		for _, d := range append(p.Denylist(), systemSecrets...) {
			deny = append(deny, resolvedSpellings(d)...)
		}
		for _, g := range p.GlobalGitConfig() {
			// Re-checked at spawn: still a regular file, and not a spelling of
			// something on the denylist.
			fi, err := os.Stat(g)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			real, err := filepath.EvalSymlinks(g)
			if err != nil || underAny(real, deny) || underAny(g, deny) {
				continue
			}
			l.GitConfig = append(l.GitConfig, g)
		}
	}

	if p.Cache() == CacheOverlay {
		l.CacheRoots = overlayCacheRoots(p, scratch)
	}
	// Every bind source is re-checked here, at each spawn: a write root or
	// the scratch that became a symlink (or vanished) refuses the spawn.
	for _, b := range append(p.WriteRoots(), scratch) {
		if k, _ := lstatKind(b); k != PathDir {
			return l, fmt.Errorf("%w: %s is no longer a directory", ErrUnsafeLayout, b)
		}
	}
	if p.writes() {
		if err := inspectGit(p, &l, workdir); err != nil {
			return l, err
		}
	}
	if err := inspectProtect(p, &l); err != nil {
		return l, err
	}
	return l, nil
}

// inspectHookDirs returns the hook directories to bind read-only at this
// spawn. One already visible through a root the plan binds anyway (the
// worktree, an extra root outside restricted mode, the scratch) is left to
// that root: binding it again would take away a write permission the spawn
// already has (a hook grant adds no write, and removes none), and the
// sandbox could have swapped a directory it can write for a link. The rest
// are re-checked: still a directory, still its own canonical path; one that
// is not is dropped, and its hook fails to start.
func inspectHookDirs(p *Policy, scratch string) []string {
	covered := append([]string{p.Workdir(), scratch}, p.WriteRoots()...)
	if p.Mode() != ModeRestricted {
		covered = append(covered, p.AddDirs()...)
	}
	var out []string
	for _, d := range p.HookDirs() {
		if underAny(d, covered) {
			continue
		}
		if k, _ := lstatKind(d); k != PathDir {
			continue
		}
		if r, err := filepath.EvalSymlinks(d); err != nil || r != d {
			continue
		}
		out = append(out, d)
	}
	return out
}

// discoverRepo finds the git dir the worktree belongs to ("" for none),
// the gitlink file naming it (a linked worktree or submodule) and its
// common dir (commondir followed), which must be a real directory.
func discoverRepo(wt string) (gitDir, gitlink, common string, err error) {
	if gitDir, gitlink, err = discoverGitDir(wt); err != nil || gitDir == "" {
		return gitDir, gitlink, "", err
	}
	common = gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = filepath.Clean(c)
	}
	if k, _ := lstatKind(common); k != PathDir {
		return "", "", "", fmt.Errorf("%w: git common dir %s is not a directory", ErrUnsafeLayout, common)
	}
	return gitDir, gitlink, common, nil
}

// inspectGit finds the repository the worktree belongs to and every git dir
// under its common dir, pre-creating absent surfaces so they can be pinned.
func inspectGit(p *Policy, l *Layout, workdir string) error {
	wt := p.Workdir()
	gitDir, gitlink, common, err := discoverRepo(wt)
	if err != nil {
		return err
	}
	if gitDir == "" {
		// No repository at or above the worktree: pin an empty read-only
		// .git so a `git init` with planted hooks cannot appear where the
		// user's own git will later run them. A worktree this user cannot
		// write needs no pin (nothing can be planted there), and bwrap
		// could not create the mount point in it.
		if canWrite(wt) {
			l.PinAbsentGit = filepath.Join(wt, ".git")
		}
		pinNested(p, l, "", "", "")
		return nil
	}
	if gitlink != "" {
		l.GitLinks = append(l.GitLinks, gitlink)
	}
	writeRoots := p.WriteRoots()
	g := GitDir{Dir: common, BindWritable: !underAny(common, writeRoots)}
	anchors := heldAnchors(p, l.Scratch)
	if g.BindWritable {
		// Bound writable outside the write roots: a command writes below it,
		// not above it.
		anchors = append(anchors, common)
	}
	dirs := []string{common}
	for _, sub := range []string{"worktrees", "modules"} {
		found, err := findGitDirs(filepath.Join(common, sub), 0)
		if err != nil {
			return err
		}
		dirs = append(dirs, found...)
	}
	if !slices.Contains(dirs, gitDir) {
		// A git dir outside the common dir's tree (unusual): pin it too.
		surf, err := surfaces(gitDir, anchors)
		if err != nil {
			return err
		}
		l.Git = append(l.Git, GitDir{Dir: gitDir, BindWritable: !underAny(gitDir, writeRoots), Surfaces: surf})
	}
	for _, d := range dirs {
		// Every directory between the common dir and d becomes a mount point.
		for c := d; c != common && Within(c, common); c = filepath.Dir(c) {
			if !slices.Contains(g.Chain, c) {
				g.Chain = append(g.Chain, c)
			}
		}
		surf, err := surfaces(d, anchors)
		if err != nil {
			return err
		}
		g.Surfaces = append(g.Surfaces, surf...)
	}
	slices.SortFunc(g.Chain, func(a, b string) int { return strings.Compare(a, b) }) // parents first
	l.Git = append([]GitDir{g}, l.Git...)
	pinNested(p, l, common, gitDir, gitlink)
	return nil
}

// pinNested pins the user's other repositories inside the write roots (an
// untracked clone's `.git`, a submodule's gitlink file, a bare repository):
// their existing config and hook surfaces and `.git` files are bound
// read-only. Their git dirs are not made mount points: a writable bind of a
// path below a directory a running command can rename could be redirected
// by a link planted in between, whereas a read-only bind redirected that
// way only makes something else read-only. Moving such a repository aside
// is caught by the git sweep, which sets aside a repository that moved or
// whose surfaces changed, pinned or not; so absent surfaces are not
// created in the user's nested repositories, and a surface that is a
// symlink is left unpinned rather than refusing the spawn. At most
// nestedPinDirs and nestedPinLinks bound how many of the user's nested
// repositories a spawn pins read-only (each git dir costs up to five
// mounts). The others are still checked by the git sweep (Linux), which
// sets aside a repository whose config or hooks changed.
const (
	nestedPinDirs  = 10
	nestedPinLinks = 16
)

// nestedPinDirs git dirs and nestedPinLinks files are pinned, the same ones
// for every spawn until no command runs (gitsweep.go).
func pinNested(p *Policy, l *Layout, common, gitDir, gitlink string) {
	dirs, links := nestedGitPins(p.WriteRoots())
	n := 0
	for _, d := range dirs {
		if (common != "" && Within(d, common)) || d == gitDir {
			continue
		}
		if n++; n > nestedPinDirs {
			break
		}
		if k, _ := lstatKind(d); k != PathDir {
			continue
		}
		for _, name := range gitSurfaces {
			path := filepath.Join(d, name)
			if k, _ := lstatKind(path); k == PathFile || k == PathDir {
				l.GitLinks = append(l.GitLinks, path)
			}
		}
	}
	n = 0
	for _, gl := range links {
		if gl == gitlink || (common != "" && Within(gl, common)) {
			continue
		}
		if n++; n > nestedPinLinks {
			break
		}
		if k, _ := lstatKind(gl); k == PathFile {
			l.GitLinks = append(l.GitLinks, gl)
		}
	}
}

// surfaces returns the protected surfaces of git dir d, creating absent ones
// (an empty file, an empty hooks directory, commondir holding "."). d may
// lie in a tree a running command writes (.git/modules/x is writable by
// design), so it is reached as a HeldDir beneath anchors and every surface
// is created relative to it, exclusively and never through a link: a name
// flipped between absent and a symlink fails the spawn instead of making
// the server write where the link points.
func surfaces(d string, anchors []string) ([]Entry, error) {
	hd, err := OpenHeld(d, anchors)
	if err != nil {
		return nil, fmt.Errorf("%w: git dir %s: %w", ErrUnsafeLayout, d, err)
	}
	defer hd.Close()
	var out []Entry
	for _, name := range gitSurfaces {
		path := filepath.Join(d, name)
		k := hd.Kind(name)
		switch k {
		case PathSymlink:
			return nil, fmt.Errorf("%w: git surface %s is a symlink; remove it outside the sandbox", ErrUnsafeLayout, path)
		case PathOther:
			return nil, fmt.Errorf("%w: git surface %s is not a file or directory", ErrUnsafeLayout, path)
		case PathAbsent:
			var err error
			switch name {
			case "hooks":
				err = hd.Mkdir(name, 0o755)
				k = PathDir
			case "commondir":
				err = hd.CreateFile(name, []byte(".\n"), 0o644)
				k = PathFile
			default:
				err = hd.CreateFile(name, nil, 0o644)
				k = PathFile
			}
			if err != nil && !errors.Is(err, fs.ErrExist) {
				// Not creatable by us means not creatable by the sandbox
				// either (same user, fewer privileges).
				continue
			}
			if k2 := hd.Kind(name); k2 != k {
				return nil, fmt.Errorf("%w: git surface %s changed while it was created", ErrUnsafeLayout, path)
			}
		}
		out = append(out, Entry{Path: path, Kind: k})
	}
	return out, nil
}

// heldAnchors are the roots below which a sandbox of p may write, from
// which the server reaches what it creates there (HeldDir).
func heldAnchors(p *Policy, scratch string, more ...string) []string {
	a := append(p.WriteRoots(), p.StateRW()...)
	if scratch != "" {
		a = append(a, scratch)
	}
	return append(a, more...)
}

// findGitDirs lists git directories (holding HEAD) below dir, including
// nested modules/ and worktrees/, refusing symlinked components.
func findGitDirs(dir string, depth int) ([]string, error) {
	if depth > 8 {
		return nil, nil
	}
	k, _ := lstatKind(dir)
	switch k {
	case PathAbsent:
		return nil, nil
	case PathSymlink:
		return nil, fmt.Errorf("%w: %s is a symlink inside git metadata", ErrUnsafeLayout, dir)
	case PathDir:
	default:
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	var out []string
	for _, e := range ents {
		sub := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: %s is a symlink inside git metadata", ErrUnsafeLayout, sub)
		}
		if !e.IsDir() {
			continue
		}
		if k, _ := lstatKind(filepath.Join(sub, "HEAD")); k == PathFile {
			out = append(out, sub)
			for _, n := range []string{"modules", "worktrees"} {
				more, err := findGitDirs(filepath.Join(sub, n), depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
			}
			continue
		}
		// A module name with a slash nests plain directories.
		more, err := findGitDirs(sub, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// discoverGitDir walks up from wt as git does and returns the git dir and,
// when .git is a gitlink file, that file's path.
func discoverGitDir(wt string) (gitDir, gitlink string, err error) {
	for d := wt; ; d = filepath.Dir(d) {
		dot := filepath.Join(d, ".git")
		k, _ := lstatKind(dot)
		switch k {
		case PathDir:
			// As git does, a .git without HEAD is not a repository (the empty
			// one this package pins where none exists, say): keep looking.
			if hk, _ := lstatKind(filepath.Join(dot, "HEAD")); hk == PathFile {
				return dot, "", nil
			}
		case PathSymlink:
			return "", "", fmt.Errorf("%w: %s is a symlink; refusing to guess which repository it protects", ErrUnsafeLayout, dot)
		case PathFile:
			b, err := os.ReadFile(dot)
			if err != nil {
				return "", "", fmt.Errorf("read gitlink %s: %w", dot, err)
			}
			line, _, _ := bytes.Cut(b, []byte("\n"))
			target, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir:")
			if !ok {
				return "", "", fmt.Errorf("%w: %s is a file but not a gitlink", ErrUnsafeLayout, dot)
			}
			target = strings.TrimSpace(target)
			if !filepath.IsAbs(target) {
				target = filepath.Join(d, target)
			}
			target = filepath.Clean(target)
			if k, _ := lstatKind(target); k != PathDir {
				return "", "", fmt.Errorf("%w: gitlink %s names %s, which is not a directory", ErrUnsafeLayout, dot, target)
			}
			return target, dot, nil
		}
		if d == "/" {
			return "", "", nil
		}
	}
}
