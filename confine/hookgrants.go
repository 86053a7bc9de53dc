package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Hook grants (docs/hooks.md, "Hooks", "Where it runs"): the commands a trusted
// configuration layer names (hooks) run under the session's sandbox, and the
// directory holding each one joins the spawned layer's read/exec surface in
// every sandboxed mode, restricted included.
//
// The grant is derived from the configuration, never a glob; it adds read
// and exec, never write (a directory already under a write root stays as
// writable as it was, no more); it is refused for a shared tree (the
// sharedTreeGuard: at or above HOME, the worktree or a temp root, fewer
// than two components deep, or the same directory as an entry directly
// under /) and for anything at or under a masked path; and masks come last
// in the mount plan, so a denylisted subtree inside a granted directory
// stays masked. A command the sandbox cannot serve fails that command (its
// hook), never the session.

// errHookRefused wraps every reason a configured infrastructure command is
// not run under the sandbox.
var errHookRefused = errors.New("not granted to the sandbox")

// HookGrant is the resolved grant of one configured infrastructure command.
type HookGrant struct {
	// Command is the path as configured (absolute).
	Command string
	// Path is Command with every symlink resolved: what is executed.
	Path string
	// Dir is the directory holding Path, granted read/exec; "" when refused.
	Dir string
	// Refused says, without naming any host path, why the sandbox cannot
	// serve the command ("" when granted). It may reach the model.
	Refused string
	// Detail is the operator's version of Refused, with the paths.
	Detail string
}

// The refusals a model may read (no host path in them).
const (
	sharedTreeRefusal = "its directory is a shared tree the sandbox never grants (at or above HOME, the worktree or a temp root, or fewer than two components deep)"
	maskedRefusal     = "it lies at or under a masked path"
)

// infraDenied are the pseudo-filesystem and device trees no grant may reach
// into, beyond the credential denylist and PseudoDenylist.
var infraDenied = []string{"/proc", "/sys", "/dev"}

// resolveHookGrants judges each configured command against the guard and the
// denylist of p (home, worktree, temp roots and deny must be set).
func (p *Policy) resolveHookGrants(commands []string) []HookGrant {
	var out []HookGrant
	for _, c := range commands {
		if slices.ContainsFunc(out, func(g HookGrant) bool { return g.Command == c }) {
			continue
		}
		out = append(out, p.judgeHook(c))
	}
	return out
}

func (p *Policy) judgeHook(command string) HookGrant {
	g := HookGrant{Command: command}
	refuse := func(why, detail string) HookGrant {
		g.Refused, g.Detail, g.Dir = why, detail, ""
		return g
	}
	if !filepath.IsAbs(command) {
		return refuse("its command is not an absolute path", command+" is not an absolute path")
	}
	real, err := filepath.EvalSymlinks(command)
	if err != nil {
		return refuse("its command does not exist", fmt.Sprintf("%s: %v", command, err))
	}
	g.Path = real
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return refuse("its command is not an executable regular file", real+" is not an executable regular file")
	}
	dir := filepath.Dir(real)
	if why, detail := p.guardHookDir(dir, command, real); why != "" {
		return refuse(why, detail)
	}
	g.Dir = dir
	return g
}

// guardHookDir judges a candidate directory (symlink-resolved) holding a
// command (as configured and resolved): the shared-tree guard, then the
// denylist. It returns the model's and the operator's reasons, or "".
func (p *Policy) guardHookDir(dir string, command ...string) (why, detail string) {
	if err := sharedTreeGuard(dir, p.home, p.workdir, tempRoots(p.env)); err != nil {
		return sharedTreeRefusal, fmt.Sprintf("%s: %v", dir, err)
	}
	paths := []string{dir}
	for _, c := range command {
		paths = append(paths, c, filepath.Dir(c))
	}
	if d := p.maskedAt(paths...); d != "" {
		return maskedRefusal, fmt.Sprintf("%s lies at or under the masked %s", dir, d)
	}
	return "", ""
}

// maskedAt returns the denylisted path one of paths lies at or under, or "".
// Every spelling of every entry counts (literal and symlink-resolved).
func (p *Policy) maskedAt(paths ...string) string {
	for _, d := range slices.Concat(p.deny, systemSecrets, PseudoDenylist, infraDenied) {
		for _, sp := range resolvedSpellings(d) {
			for _, c := range paths {
				if Within(c, sp) {
					return d
				}
			}
		}
	}
	return ""
}

// renarrowHookGrants re-judges the grants of from against the narrowed policy p
// (more deny paths, a narrower worktree) and drops those it refuses; it
// never grants what from refused.
func (p *Policy) renarrowHookGrants(from []HookGrant) []HookGrant {
	out := slices.Clone(from)
	for i, g := range out {
		if g.Dir == "" {
			continue
		}
		if why, detail := p.guardHookDir(g.Dir, g.Command, g.Path); why != "" {
			out[i].Refused, out[i].Detail, out[i].Dir = why, detail, ""
		}
	}
	return out
}

// HookGrants returns the resolved grant of every configured infrastructure
// command, in configuration order.
func (p *Policy) HookGrants() []HookGrant { return slices.Clone(p.hookGrants) }

// HookDirs returns the directories granted read/exec, without duplicates.
func (p *Policy) HookDirs() []string {
	var out []string
	for _, g := range p.hookGrants {
		if g.Dir != "" && !slices.Contains(out, g.Dir) {
			out = append(out, g.Dir)
		}
	}
	return out
}

// HookCommand returns the program to execute for a configured
// infrastructure command, or an error wrapping ErrInfraRefused saying
// (without host paths) why the sandbox cannot serve it. With the sandbox
// off nothing is granted or refused: the command runs as configured.
func (p *Policy) HookCommand(command string) (string, error) {
	if p.mode == ModeOff {
		return command, nil
	}
	i := slices.IndexFunc(p.hookGrants, func(g HookGrant) bool { return g.Command == command })
	switch {
	case i < 0:
		return "", fmt.Errorf("%w: it is not in the trusted configuration", errHookRefused)
	case p.hookGrants[i].Dir == "":
		return "", fmt.Errorf("%w: %s", errHookRefused, p.hookGrants[i].Refused)
	}
	return p.hookGrants[i].Path, nil
}

// resolveGrantDirs judges each directory a trusted layer grants an MCP
// server's program (docs/gateway.md, "MCP servers behind evener-mcp") as a hook's
// directory is judged: symlinks resolved, a directory, then the shared-tree
// guard and the denylist. It adds read and exec, never write.
func (p *Policy) resolveGrantDirs(dirs []string) []HookGrant {
	var out []HookGrant
	for _, d := range dirs {
		if slices.ContainsFunc(out, func(g HookGrant) bool { return g.Command == d }) {
			continue
		}
		g := HookGrant{Command: d}
		real, err := filepath.EvalSymlinks(d)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(real); err == nil && !fi.IsDir() {
				err = errors.New("not a directory")
			}
		}
		switch why, detail := p.guardHookDir(real, d); {
		case !filepath.IsAbs(d):
			g.Refused, g.Detail = "the grant is not an absolute path", d+" is not an absolute path"
		case err != nil:
			g.Refused, g.Detail = "the grant is not a directory", fmt.Sprintf("%s: %v", d, err)
		case why != "":
			g.Refused, g.Detail = why, detail
		default:
			g.Path, g.Dir = real, real
		}
		out = append(out, g)
	}
	return out
}
