package confine

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The macOS backend (docs/macos.md, "macOS (Seatbelt)"): a Seatbelt profile (SBPL)
// generated from the same Policy as the bubblewrap mount plan, run by
// /usr/bin/sandbox-exec. SeatbeltProfile is a pure function like Plan; the
// facts it needs are gathered at each spawn by InspectSeatbelt. It builds on
// every OS so the golden and parity tests run in CI on Linux.
//
// The profile is permissive by default ("allow default": an interactive
// shell needs too many dyld, XPC and Mach calls to enumerate), and carves
// the boundary out of it. In SBPL the last matching rule wins, so the order
// of the sections is part of the boundary:
//
//  1. reach beyond the filesystem: signals and process info only inside
//     the sandbox, no LaunchServices, Apple Events or launchd jobs (each
//     would run something outside the sandbox), no keychain or pasteboard
//     service, no exec of the always-dangerous launchers;
//  2. reads (restricted only): deny all, then the system read roots, the
//     developer toolchain, the global git config files, the hook
//     directories, the worktree and the scratch;
//  3. writes: deny all, then the write roots, the scratch, the runner state
//     directories and the git metadata outside them (by name where it is
//     shared); no hard link or clone anywhere;
//  4. other sessions' scratch hidden, the session's own shown again;
//  5. git config and hook surfaces, gitlinks and the named files
//     (seatbeltWriteDenyNames) denied even inside a write root;
//  6. the protected paths (write), then the denylist (read and write), last
//     of the path rules;
//  7. renames: file-write-unlink denied on every protected path and its
//     ancestors, so moving a directory cannot carry a surface out from
//     under its rule;
//  8. the network: none, or the session's two loopback proxy ports.
//
// Every path is emitted under each spelling it has: as given, resolved
// (InspectSeatbelt adds that), and with /tmp, /var and /etc mapped to and
// from /private (the kernel judges the resolved path, a process may name
// either). Denials also name the /System/Volumes/Data firmlink alias.

// SeatbeltExec is the only sandbox-exec the launcher runs: a hard-coded
// path, so a PATH entry cannot substitute another.
const SeatbeltExec = "/usr/bin/sandbox-exec"

// seatbeltSystemReadRoots are restricted mode's system read roots on macOS:
// systemReadRoots, plus what a macOS process needs to start and run a
// shell (/System holds the frameworks and the dyld cache, /private/var/select
// the /bin/sh selector, /private/var/db/timezone what /etc/localtime names,
// /private/var/db/xcode_select_link the link the /usr/bin/git shim follows
// to the selected toolchain) and /dev (the terminal, /dev/null,
// /dev/urandom, /dev/fd).
var seatbeltSystemReadRoots = append(slices.Clone(systemReadRoots),
	"/System", "/private/var/select", "/private/var/db/timezone", "/private/var/db/xcode_select_link", "/dev")

// seatbeltCommandLineTools is the second developer-toolchain candidate
// (docs/macos.md, "macOS (Seatbelt)"), beside what `xcode-select -p` reports.
const seatbeltCommandLineTools = "/Library/Developer/CommandLineTools"

// seatbeltDangerousExec are launchers whose only purpose is to start
// something outside the sandbox, so their exec is denied outright. A copy
// under another name is not stopped by this rule; the operation denials
// (lsopen, appleevent-send, job-creation) are what hold.
var seatbeltDangerousExec = []string{
	"/bin/launchctl", "/usr/bin/automator", "/usr/bin/open", "/usr/bin/osacompile",
	"/usr/bin/osascript", "/usr/bin/shortcuts",
}

// seatbeltDeniedServices are Mach services that hand out what the Linux
// sandbox hides: the keychain (a git-credential-osxkeychain token; Linux
// masks the keyrings and the session bus) and the pasteboard.
var seatbeltDeniedServices = []string{
	"com.apple.SecurityServer", "com.apple.pasteboard.1", "com.apple.securityd.xpc",
}

// seatbeltWriteDenyNames are home-relative files denied for writing even
// inside a write root: shell startup files and the configuration an
// unsandboxed program later runs. Only an --add-dir holding one of them
// (~/.config, say) could grant it; bubblewrap would leave it writable there.
var seatbeltWriteDenyNames = []string{
	".bash_login", ".bash_logout", ".bash_profile", ".bashrc", ".config/fish/config.fish",
	".config/git/config", ".gitconfig", ".profile", ".zlogin", ".zlogout", ".zprofile",
	".zshenv", ".zshrc",
}

// seatbeltDevWrite are the device files every process writes.
var seatbeltDevWrite = []string{"/dev/dtracehelper", "/dev/null", "/dev/ptmx", "/dev/tty", "/dev/zero"}

// gitSharedEntries are the entries of a shared common git dir a linked
// worktree writes: Seatbelt names the granted entries, where bubblewrap
// binds the shared dir whole (docs/macos.md, "macOS (Seatbelt)").
var gitSharedEntries = []struct {
	name string
	dir  bool
}{
	{"logs", true}, {"objects", true}, {"packed-refs", false}, {"packed-refs.lock", false},
	{"packed-refs.new", false}, {"refs", true}, {"rr-cache", true},
}

// GitGrant is how a git directory's metadata becomes writable.
type GitGrant int

const (
	// GitCovered: it lies inside a write root, which grants it.
	GitCovered GitGrant = iota
	// GitWhole: outside every write root and the worktree's own git dir
	// (a submodule's): granted whole, surfaces excepted.
	GitWhole
	// GitNamed: a linked worktree's shared common dir: only the entries
	// gitSharedEntries names, and the worktree's own git dir inside it.
	GitNamed
)

// SeatbeltGitDir is one git directory whose config and hook surfaces must
// stay read-only.
type SeatbeltGitDir struct {
	Dir   string
	Grant GitGrant
	// Own is the worktree's own git dir inside Dir (worktrees/<id>), granted
	// whole under GitNamed.
	Own string
	// Sub are the git dirs found below Dir (worktrees/*, modules/**) at
	// spawn; those created later are covered by a pattern.
	Sub []string
}

// SeatbeltLayout is what a Seatbelt profile needs beyond the policy,
// gathered by InspectSeatbelt at each spawn. SeatbeltProfile does no I/O.
type SeatbeltLayout struct {
	Scratch string
	// ScratchParent, when set, holds every session's scratch: it is hidden
	// but for Scratch.
	ScratchParent string
	// Deny are the denylisted paths, each under every spelling found.
	Deny []string
	// Toolchain are the developer toolchain directories that passed the
	// shared-tree guard (restricted reads them).
	Toolchain []string
	// GitConfig are the global git config files, file-exact (restricted).
	GitConfig []string
	// HookDirs are the hook command directories (read/exec in restricted).
	HookDirs []string
	// Git are the git directories to protect.
	Git []SeatbeltGitDir
	// GitLinks are worktree .git files, kept read-only.
	GitLinks []string
	// PinAbsentGit is a worktree-root .git that does not exist: it may not
	// be created.
	PinAbsentGit string
	// Proxy are the loopback ports of the session's proxies (network on).
	Proxy *SeatbeltProxy
	// Exe is the program GIT_SSH_COMMAND runs (the egress connect helper);
	// restricted reads it, file-exact.
	Exe string
	// Protect are the protected paths, each under every spelling found
	// (protect.go): never written, never renamed, nor any ancestor.
	Protect []string
	// StateRW are the runner state directories: written in every mode
	// (and read in restricted).
	StateRW []string
	// Network, when NetworkHost or NetworkOff, replaces the policy's
	// network for this one spawn (Command.Network: an MCP server behind
	// this one, docs/gateway.md, "MCP servers behind evener-mcp"): NetworkHost
	// allows every network operation, NetworkOff none. "" is the policy's.
	Network Network
}

// SeatbeltProxy are the loopback ports the sandbox may connect to.
type SeatbeltProxy struct {
	HTTPPort, SOCKSPort int
}

// errSeatbeltPath is returned for a path no SBPL string can carry safely.
var errSeatbeltPath = errors.New("path cannot be written into a Seatbelt profile")

// SeatbeltProfile renders the profile for policy p and facts l. Mode off
// has no profile (""). The same inputs give the same text.
func SeatbeltProfile(p *Policy, l SeatbeltLayout) (string, error) {
	if p.Mode() == ModeOff {
		return "", nil
	}
	b := &sbBuilder{}
	b.line("(version 1)")
	b.comment(fmt.Sprintf("evener-mcp: %s, network %s. Generated; the last matching rule wins.", p.Mode(), p.Network()))
	b.line("(allow default)")

	b.section("reach beyond the filesystem: nothing outside this sandbox")
	b.line("(deny signal)")
	b.line("(allow signal (target same-sandbox))")
	b.line("(deny process-info* (target others))")
	b.line("(allow process-info* (target same-sandbox))")
	b.line(`(deny sysctl-read (sysctl-name "kern.procargs") (sysctl-name "kern.procargs2"))`)
	b.line("(deny lsopen)")
	b.line("(deny appleevent-send)")
	b.line("(deny job-creation)")
	b.rule("deny", "mach-lookup", globalNames(seatbeltDeniedServices)...)
	b.rule("deny", "process-exec", literals(seatbeltDangerousExec)...)

	writes := len(p.WriteRoots()) > 0
	restricted := p.Mode() == ModeRestricted
	if restricted {
		b.section("reads: the system roots, the toolchain, the global git config, hooks, the worktree, the scratch")
		b.line("(deny file-read*)")
		var grants []string // subpaths
		grants = append(grants, seatbeltSystemReadRoots...)
		grants = append(grants, l.Toolchain...)
		grants = append(grants, l.HookDirs...)
		grants = append(grants, p.Workdir())
		if l.Scratch != "" {
			grants = append(grants, l.Scratch)
		}
		grants = append(grants, l.StateRW...)
		files := slices.Clone(l.GitConfig)
		if l.Exe != "" {
			files = append(files, l.Exe)
		}
		// realpath and getcwd stat every component on the way: the
		// ancestors of a grant are readable as metadata, never listed.
		var anc []string
		for _, g := range append(slices.Clone(grants), files...) {
			for _, s := range twins(g) {
				anc = append(anc, ancestors(s)...)
			}
		}
		b.rule("allow", "file-read-metadata", b.filters("literal", anc)...)
		b.rule("allow", "file-read*", b.filters("subpath", spellAll(grants))...)
		b.rule("allow", "file-read*", b.filters("literal", spellAll(files))...)
	}

	b.section("writes: the write roots, the scratch, the devices")
	b.line("(deny file-write*)")
	var wroots []string
	wroots = append(wroots, p.WriteRoots()...)
	if l.Scratch != "" {
		wroots = append(wroots, l.Scratch)
	}
	b.rule("allow", "file-write*", b.filters("subpath", spellAll(wroots))...)
	if len(l.StateRW) > 0 {
		b.comment("runner state directories: written in every mode")
		b.rule("allow", "file-write*", b.filters("subpath", spellAll(l.StateRW))...)
	}
	b.rule("allow", "file-write*", append(b.filters("literal", seatbeltDevWrite), b.filters("subpath", []string{"/dev/fd"})...)...)
	b.rule("allow", "file-write*", `(regex "^/dev/ttys[0-9]+$")`)
	// A hard link carries writes past a path rule to the inode it shares (a
	// link to .git/config in the worktree), and a clone copies a file
	// without reading it: neither is allowed anywhere. bubblewrap refuses
	// the first across its mounts with EXDEV.
	b.line("(deny file-link file-clone)")
	if writes {
		var sub, lit []string
		for _, g := range l.Git {
			switch g.Grant {
			case GitWhole:
				sub = append(sub, g.Dir)
			case GitNamed:
				for _, e := range gitSharedEntries {
					if e.dir {
						sub = append(sub, filepath.Join(g.Dir, e.name))
					} else {
						lit = append(lit, filepath.Join(g.Dir, e.name))
					}
				}
				if g.Own != "" {
					sub = append(sub, g.Own)
				}
			}
		}
		if len(sub)+len(lit) > 0 {
			b.section("git metadata outside the write roots (a shared common dir: by name)")
			b.rule("allow", "file-write*", b.filters("subpath", spellAll(sub))...)
			b.rule("allow", "file-write*", b.filters("literal", spellAll(lit))...)
		}
	}

	if l.ScratchParent != "" && l.Scratch != "" {
		b.section("other sessions' scratch hidden")
		b.rule("deny", "file-read* file-write*", b.filters("subpath", denySpellAll([]string{l.ScratchParent}))...)
		b.rule("allow", "file-read* file-write*", b.filters("subpath", spellAll([]string{l.Scratch}))...)
	}

	// Everything below is denied even where a rule above granted it; every
	// path here and its ancestors also refuse to be renamed (section 7).
	var pinned []string
	if writes {
		var surf, lit, regs []string
		for _, g := range l.Git {
			dirs := append([]string{g.Dir}, g.Sub...)
			if g.Own != "" {
				dirs = append(dirs, g.Own)
			}
			for _, d := range dirs {
				for _, s := range gitSurfaces {
					surf = append(surf, filepath.Join(d, s))
				}
				pinned = append(pinned, d)
			}
			// Git dirs created later (a new submodule or linked worktree)
			// have their surfaces denied by pattern, and the two parents
			// that hold them cannot be swapped.
			for _, d := range denySpellAll([]string{g.Dir}) {
				q, err := sbRegexQuote(d)
				if err != nil {
					return "", err
				}
				regs = append(regs, "^"+q+"/(worktrees/[^/]+|modules/.+)/("+surfaceAlternation+")(/|$)")
			}
			lit = append(lit, filepath.Join(g.Dir, "modules"), filepath.Join(g.Dir, "worktrees"))
		}
		lit = append(lit, l.GitLinks...)
		if l.PinAbsentGit != "" {
			surf = append(surf, l.PinAbsentGit)
		}
		b.section("git config and hooks read-only, also where they do not exist yet")
		b.rule("deny", "file-write*", b.filters("subpath", denySpellAll(surf))...)
		b.rule("deny", "file-write*", b.filters("regex", regs)...)
		b.rule("deny", "file-write*", b.filters("literal", denySpellAll(lit))...)
		pinned = append(pinned, surf...)
		pinned = append(pinned, lit...)
	}
	var named []string
	for _, n := range seatbeltWriteDenyNames {
		named = append(named, filepath.Join(p.Home(), n))
	}
	if x := p.xdgConf; x != "" {
		named = append(named, filepath.Join(x, "git", "config"), filepath.Join(x, "fish", "config.fish"))
	}
	b.section("written by name nowhere: shell startup files, the global git config")
	b.rule("deny", "file-write*", b.filters("literal", denySpellAll(named))...)
	pinned = append(pinned, named...)

	if len(l.Protect) > 0 {
		b.section("protected paths: never written, under every spelling")
		b.rule("deny", "file-write*", b.filters("literal", denySpellAll(l.Protect))...)
		b.rule("deny", "file-write*", b.filters("subpath", denySpellAll(l.Protect))...)
		pinned = append(pinned, l.Protect...)
	}

	b.section("denylist: credentials and system secrets, neither read nor written")
	b.rule("deny", "file-read* file-write*", b.filters("subpath", denySpellAll(l.Deny))...)
	pinned = append(pinned, l.Deny...)

	b.section("renames: no protected path or ancestor of one moves")
	var unlink []string
	for _, s := range denySpellAll(pinned) {
		unlink = append(unlink, s)
		unlink = append(unlink, ancestors(s)...)
	}
	b.rule("deny", "file-write-unlink", b.filters("literal", unlink)...)

	b.section("network")
	network := p.Network()
	if l.Network == NetworkHost || l.Network == NetworkOff {
		network = l.Network
	}
	if network == NetworkHost {
		b.comment("this spawn keeps the host's network (an MCP server configured with network = \"host\")")
		b.line("(allow network*)")
		if b.err != nil {
			return "", b.err
		}
		return b.String(), nil
	}
	b.line("(deny network*)")
	if network == NetworkOn {
		if l.Proxy == nil {
			return "", fmt.Errorf("%w: the network is on but no proxy ports were given", ErrSandboxSetup)
		}
		var f []string
		for _, port := range []int{l.Proxy.HTTPPort, l.Proxy.SOCKSPort} {
			if port < 1 || port > 65535 {
				return "", fmt.Errorf("%w: proxy port %d", ErrSandboxSetup, port)
			}
			f = append(f, `(remote ip "localhost:`+strconv.Itoa(port)+`")`)
		}
		b.comment("the session's HTTP and SOCKS5 proxies on loopback, nothing else")
		b.rule("allow", "network-outbound", f...)
	}
	if l.Scratch != "" {
		b.comment("Unix sockets inside the scratch (an agent, a test server)")
		var bind, out []string
		for _, s := range spellAll([]string{l.Scratch}) {
			q, err := sbString(s)
			if err != nil {
				return "", err
			}
			bind = append(bind, "(local unix-socket (subpath "+q+"))")
			out = append(out, "(remote unix-socket (subpath "+q+"))")
		}
		b.rule("allow", "network-bind", bind...)
		b.rule("allow", "network-outbound", out...)
	}
	if b.err != nil {
		return "", b.err
	}
	return b.String(), nil
}

// surfaceAlternation matches one of gitSurfaces in a regular expression.
var surfaceAlternation = func() string {
	var q []string
	for _, s := range gitSurfaces {
		r, _ := sbRegexQuote(s)
		q = append(q, r)
	}
	return strings.Join(q, "|")
}()

// sbBuilder accumulates the profile text and the first error.
type sbBuilder struct {
	b   strings.Builder
	err error
}

func (b *sbBuilder) String() string { return b.b.String() }

func (b *sbBuilder) line(s string) { b.b.WriteString(s + "\n") }

func (b *sbBuilder) comment(s string) { b.line("; " + s) }

func (b *sbBuilder) section(s string) {
	b.b.WriteString("\n")
	b.comment(s)
}

// rule writes one rule with its filters (any one matches), one per line;
// a rule with no filter is left out (it would match everything).
func (b *sbBuilder) rule(action, ops string, filters ...string) {
	if len(filters) == 0 {
		return
	}
	if len(filters) == 1 {
		b.line("(" + action + " " + ops + " " + filters[0] + ")")
		return
	}
	b.line("(" + action + " " + ops)
	for _, f := range filters {
		b.line("  " + f)
	}
	b.line(")")
}

// filters renders paths as sorted, distinct filters of one kind; a path
// no SBPL string can carry fails the whole profile.
func (b *sbBuilder) filters(kind string, paths []string) []string {
	var out []string
	for _, p := range paths {
		q, err := sbString(p)
		if err != nil {
			if b.err == nil {
				b.err = err
			}
			continue
		}
		out = append(out, "("+kind+" "+q+")")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sbString quotes s as an SBPL string literal. Only a backslash and a
// double quote need escaping; a control character, invalid UTF-8 or a
// relative path is refused rather than guessed at.
func sbString(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: %q is not valid UTF-8", errSeatbeltPath, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%w: %q holds a control character", errSeatbeltPath, s)
		}
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}

// sbRegexQuote escapes every POSIX extended regular expression
// metacharacter of a path, for use inside a regex filter (which sbString
// then quotes as a string).
func sbRegexQuote(s string) (string, error) {
	if _, err := sbString(s); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String(), nil
}

func literals(paths []string) []string {
	var out []string
	for _, p := range paths {
		q, _ := sbString(p) // constants
		out = append(out, "(literal "+q+")")
	}
	return out
}

func globalNames(names []string) []string {
	var out []string
	for _, n := range names {
		q, _ := sbString(n)
		out = append(out, "(global-name "+q+")")
	}
	return out
}

// privateAliases are the top-level symlinks of macOS into /private.
var privateAliases = []string{"/etc", "/tmp", "/var"}

// twins returns p with /tmp, /var and /etc mapped to and from /private
// (lexically: the kernel judges the resolved spelling, a process names
// either).
func twins(p string) []string {
	p = filepath.Clean(p)
	out := []string{p}
	for _, a := range privateAliases {
		switch {
		case Within(p, a):
			out = append(out, "/private"+p)
		case Within(p, "/private"+a):
			out = append(out, strings.TrimPrefix(p, "/private"))
		}
	}
	return out
}

// spellAll is every twin of every path, for grants.
func spellAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, twins(p)...)
	}
	return out
}

// dataVolume is the firmlink alias of the system volume's user data.
const dataVolume = "/System/Volumes/Data"

// denySpellAll is spellAll plus the /System/Volumes/Data alias of each
// spelling, for denials: a rule must hold however the path is named.
func denySpellAll(paths []string) []string {
	var out []string
	for _, s := range spellAll(paths) {
		out = append(out, s)
		if !Within(s, "/System") && !Within(s, "/dev") && s != "/" {
			out = append(out, dataVolume+s)
		}
	}
	return out
}

// ancestors returns every proper ancestor of the absolute path p, "/"
// included.
func ancestors(p string) []string {
	var out []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == "/" || d == "." {
			return out
		}
	}
}
