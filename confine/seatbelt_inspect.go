package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// InspectSeatbelt gathers the SeatbeltLayout for one spawn, as Inspect does
// for bubblewrap: at every spawn, with lstat, so what an earlier command
// planted is seen before the profile relies on it. Unlike Inspect it creates
// nothing: Seatbelt denies a surface by name whether it exists or not, so no
// protected name is materialised (bubblewrap needs an existing path to mount
// on, so on Linux an absent surface is created empty: docs/residuals.md, "Known
// residuals"). toolchain are the developer directories DeveloperToolchain
// admitted; proxy the loopback ports of the session's proxies (nil with the
// network off); exe the egress connect helper ("" when none).
func InspectSeatbelt(p *Policy, scratch string, toolchain []string, proxy *SeatbeltProxy, exe string) (SeatbeltLayout, error) {
	l := SeatbeltLayout{Scratch: scratch, Proxy: proxy}
	if p.Mode() == ModeOff {
		return l, nil
	}
	for _, b := range append(p.WriteRoots(), scratch) {
		if k, _ := lstatKind(b); k != PathDir {
			return l, fmt.Errorf("%w: %s is no longer a directory", ErrUnsafeLayout, b)
		}
	}
	// Every denylisted path under every spelling, present or not: one
	// created later is denied as well.
	deny := map[string]bool{}
	for _, d := range append(p.Denylist(), systemSecrets...) {
		for _, s := range resolvedSpellings(d) {
			deny[s] = true
		}
	}
	l.Deny = sortedKeys(deny)
	// Protected paths under every spelling, present or not (protect.go).
	prot := map[string]bool{}
	for _, d := range p.protectSpellings() {
		for _, s := range resolvedSpellings(d) {
			prot[s] = true
		}
	}
	l.Protect = sortedKeys(prot)
	for _, pr := range l.Protect {
		if err := checkHardLinks(pr); err != nil {
			return l, err
		}
	}
	for _, d := range p.StateRW() {
		if k, _ := lstatKind(d); k != PathDir {
			return l, fmt.Errorf("%w: runner state directory %s is no longer a directory", ErrUnsafeLayout, d)
		}
		l.StateRW = append(l.StateRW, d)
	}
	l.HookDirs = inspectHookDirs(p, scratch)
	if p.Mode() == ModeRestricted {
		l.Toolchain = slices.Clone(toolchain)
		for _, g := range p.GlobalGitConfig() {
			// As Inspect: still a regular file, no spelling of it masked;
			// granted as named and as resolved (a dotfile-managed link).
			fi, err := os.Stat(g)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			real, err := filepath.EvalSymlinks(g)
			if err != nil || underAny(real, l.Deny) || underAny(g, l.Deny) {
				continue
			}
			l.GitConfig = append(l.GitConfig, g)
			if real != g {
				l.GitConfig = append(l.GitConfig, real)
			}
		}
		l.Exe = exe
	}
	if len(p.WriteRoots()) > 0 {
		if err := inspectSeatbeltGit(p, &l); err != nil {
			return l, err
		}
	}
	return l, nil
}

// inspectSeatbeltGit finds the repository the worktree belongs to, as
// inspectGit does, and how its metadata is granted.
func inspectSeatbeltGit(p *Policy, l *SeatbeltLayout) error {
	wt := p.Workdir()
	gitDir, gitlink, common, err := discoverRepo(wt)
	if err != nil {
		return err
	}
	if gitDir == "" {
		l.PinAbsentGit = filepath.Join(wt, ".git")
		return nil
	}
	if gitlink != "" {
		l.GitLinks = append(l.GitLinks, gitlink)
	}
	roots := p.WriteRoots()
	grant := func(dir string) GitGrant {
		if underAny(dir, roots) {
			return GitCovered
		}
		return GitWhole
	}
	g := SeatbeltGitDir{Dir: common, Grant: grant(common)}
	for _, sub := range []string{"worktrees", "modules"} {
		found, err := findGitDirs(filepath.Join(common, sub), 0)
		if err != nil {
			return err
		}
		g.Sub = append(g.Sub, found...)
	}
	if g.Grant == GitWhole && gitDir != common {
		// A linked worktree's common dir is shared with the main worktree:
		// only what git writes from here is granted.
		g.Grant = GitNamed
		if Within(gitDir, common) {
			g.Own = gitDir
		}
	}
	dirs := append([]string{common}, g.Sub...)
	l.Git = append(l.Git, g)
	if !Within(gitDir, common) {
		// A git dir outside the common dir's tree (unusual).
		l.Git = append(l.Git, SeatbeltGitDir{Dir: gitDir, Grant: grant(gitDir)})
		dirs = append(dirs, gitDir)
	}
	// A surface that is a symlink would carry writes past its rule to
	// wherever it points (the kernel judges the resolved path): refused, as
	// on Linux.
	for _, d := range dirs {
		for _, name := range gitSurfaces {
			switch k, _ := lstatKind(filepath.Join(d, name)); k {
			case PathSymlink:
				return fmt.Errorf("%w: git surface %s is a symlink; remove it outside the sandbox", ErrUnsafeLayout, filepath.Join(d, name))
			case PathOther:
				return fmt.Errorf("%w: git surface %s is not a file or directory", ErrUnsafeLayout, filepath.Join(d, name))
			}
		}
	}
	return nil
}

// DeveloperToolchain judges the candidate developer-toolchain directories
// restricted mode grants on macOS (docs/macos.md, "macOS (Seatbelt)") for policy p:
// selected is what `xcode-select -p` printed (untrusted: it honours
// $DEVELOPER_DIR), widened to its enclosing .app bundle, plus
// /Library/Developer/CommandLineTools. A candidate that does not exist
// contributes nothing; one the shared-tree guard refuses, or that lies at or
// under a masked path, is dropped. Each admitted directory is returned under
// its literal and its resolved spelling.
func DeveloperToolchain(p *Policy, selected string) []string {
	var cands []string
	if s := strings.TrimSpace(selected); filepath.IsAbs(s) {
		cands = append(cands, widenToApp(filepath.Clean(s)))
	}
	cands = append(cands, seatbeltCommandLineTools)
	var out []string
	for _, c := range cands {
		fi, err := os.Stat(c)
		if err != nil || !fi.IsDir() {
			continue
		}
		if sharedTreeGuard(c, p.home, p.workdir, tempRoots(p.env)) != nil {
			continue
		}
		sp := resolvedSpellings(c)
		if p.maskedAt(sp...) != "" {
			continue
		}
		for _, s := range sp {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// widenToApp returns the application bundle enclosing p (the outermost
// component ending in .app), or p.
func widenToApp(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if i > 0 && strings.HasSuffix(part, ".app") && len(part) > len(".app") {
			return strings.Join(parts[:i+1], "/")
		}
	}
	return p
}

// DeveloperPath inserts the active developer directory's usr/bin before the
// first system directory on path (/usr/bin, /bin, /usr/sbin, /sbin), or
// appends it, so git runs from the readable developer toolchain directly,
// without the xcrun shim (docs/macos.md, "macOS (Seatbelt)"). devDir is what
// `xcode-select -p` printed, and the caller has checked it lies inside a
// directory DeveloperToolchain admitted; "" leaves path as it is.
func DeveloperPath(path, devDir string) string {
	if devDir == "" {
		return path
	}
	bin := filepath.Join(devDir, "usr", "bin")
	parts := filepath.SplitList(path)
	if slices.Contains(parts, bin) {
		return path
	}
	i := slices.IndexFunc(parts, func(d string) bool {
		return slices.Contains([]string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"}, filepath.Clean(d))
	})
	if i < 0 {
		parts = append(parts, bin)
	} else {
		parts = slices.Insert(parts, i, bin)
	}
	return strings.Join(parts, string(filepath.ListSeparator))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
