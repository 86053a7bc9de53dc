package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode is one of the four confinement modes (docs/security.md, "What is enforced",
// the table of modes).
type Mode string

const (
	ModeOff            Mode = "off"
	ModeReadOnly       Mode = "read-only"
	ModeWorkspaceWrite Mode = "workspace-write"
	ModeRestricted     Mode = "restricted"
)

// Modes lists every mode in the order the documentation uses.
var Modes = []Mode{ModeOff, ModeReadOnly, ModeWorkspaceWrite, ModeRestricted}

// ParseMode accepts exactly the four spellings of Modes.
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if slices.Contains(Modes, m) {
		return m, nil
	}
	return "", fmt.Errorf("unknown sandbox mode %q (want off, read-only, workspace-write or restricted)", s)
}

// Writes reports whether the mode grants any persistent write surface.
func (m Mode) Writes() bool { return m == ModeWorkspaceWrite || m == ModeRestricted || m == ModeOff }

// NoWiderThan reports whether m grants nothing that base does not, so a
// session or the untrusted project layer may switch from base to m. The
// modes form a partial order: off > workspace-write > {read-only,
// restricted}; read-only and restricted are incomparable (one reads more,
// the other writes more).
func (m Mode) NoWiderThan(base Mode) bool {
	if m == base {
		return true
	}
	switch base {
	case ModeOff:
		return true
	case ModeWorkspaceWrite:
		return m == ModeReadOnly || m == ModeRestricted
	}
	return false
}

// Network is the --sandbox-net decision.
type Network string

const (
	NetworkOn  Network = "on"
	NetworkOff Network = "off"
)

// ParseNetwork accepts "on" and "off".
func ParseNetwork(s string) (Network, error) {
	switch Network(s) {
	case NetworkOn, NetworkOff:
		return Network(s), nil
	}
	return "", fmt.Errorf("unknown --sandbox-net value %q (want on or off)", s)
}

// CacheStrategy is how the language caches are served to spawned processes.
type CacheStrategy string

const (
	// CacheOverlay reads the real host caches and keeps writes in a private
	// per-spawn upper layer ("shared-read/private-write").
	CacheOverlay CacheStrategy = "shared-read/private-write"
	// CachePrivate redirects every cache variable into the session scratch.
	CachePrivate CacheStrategy = "private"
	// CacheNone is used by modes that never write caches (read-only).
	CacheNone CacheStrategy = "none"
	// CacheHost leaves caches alone (mode off).
	CacheHost CacheStrategy = "host"
)

// Limits bounds every spawned process tree.
type Limits struct {
	// TmpfsBytes is the size of the private /tmp tmpfs.
	TmpfsBytes int64
	// FileBytes is RLIMIT_FSIZE: the largest file a process may write.
	FileBytes int64
	// DataBytes is RLIMIT_DATA: the memory a process may allocate.
	DataBytes int64
	// Procs bounds the processes (and threads) of one session's sandboxes
	// together: RLIMIT_NPROC in the session's user namespace, a pids
	// cgroup for a root server (HostReport.ProcessLimit says which).
	Procs int64
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int64
}

// DefaultLimits are sized for a developer workstation running builds.
// Procs binds one session as a whole (every call of it, every terminal and
// MCP server behind it): 1024 keeps a session far under a typical pid_max
// (32768).
var DefaultLimits = Limits{
	TmpfsBytes: 2 << 30,
	FileBytes:  8 << 30,
	DataBytes:  8 << 30,
	Procs:      1024,
	OpenFiles:  65536,
}

// Spec is what the configuration layer hands to Resolve: every input the
// policy is derived from, already merged from the trusted layers.
type Spec struct {
	Mode Mode
	// ModeExplicit is true when the user asked for Mode; only an unset mode
	// may degrade to off when the host cannot enforce it.
	ModeExplicit bool
	Network      Network
	Workdir      string
	AddDirs      []string
	// ExtraDeny are further paths to mask (narrowing only).
	ExtraDeny []string
	Limits    Limits
	// Env is the server's environment (os.Environ form); the environment
	// floor of spawned processes is derived from it.
	Env []string
	// Home is the user's home directory.
	Home string
	// ScratchRoot is where per-session scratch directories are created.
	ScratchRoot string
	// StateDir is the server's state directory (audit logs, session
	// records), masked for both layers wherever it is.
	StateDir string
	// HookPaths are the absolute paths of the commands trusted layers
	// configure as session infrastructure (hooks); the directory holding
	// each is granted read/exec to spawned processes (see hookgrants.go).
	HookPaths []string
	// GrantDirs are directories trusted layers grant read/exec to the
	// programs of the MCP servers they configure (docs/gateway.md, "MCP servers
	// behind evener-mcp"), judged as a hook's directory is.
	GrantDirs []string
	// Protected are paths never writable in a sandboxed mode (docs/protected-paths.md,
	// "Protected paths and runner state"); absolute.
	Protected []string
	// StateRW are runner state directories, writable in every sandboxed
	// mode; absolute.
	StateRW []string
	// Backend is the --sandbox-backend request ("" is BackendAuto):
	// landlock_backend.go picks between native and landlock.
	Backend Backend
}

// Policy is the resolved, immutable confinement policy of one server. It is
// built once by Resolve and then only read; Narrow returns a new value.
type Policy struct {
	mode     Mode
	explicit bool
	network  Network
	backend  string // "bwrap" or "none"
	workdir  string // absolute, symlink-resolved
	addDirs  []string
	home     string
	xdgConf  string
	deny     []string // literal spellings, absolute
	limits   Limits
	cache    CacheStrategy
	env      []string
	scratchR string
	degraded string // why an unset default fell back to off, if it did
	// fellBack is why the landlock backend runs instead of bubblewrap
	// when the default picked it (landlock_backend.go), "" otherwise.
	fellBack string
	// noLandlock is why the default did not fall back to the landlock
	// backend when it degraded to off, "" otherwise.
	noLandlock string
	// writesBlocked is the delegate floor's write block under a
	// restricted server (BlockWrites): restricted's read scope, no
	// persistent write.
	writesBlocked bool
	gitConf       []string
	hookGrants    []HookGrant // hook commands and their read/exec grants
	host          HostReport
	protect       []protectedPath // never writable (protect.go)
	stateRW       []string        // runner state: writable in every mode (protect.go)
}

// ErrUnenforceable is wrapped by Resolve when an explicitly requested mode
// cannot be enforced on this host.
var ErrUnenforceable = errors.New("sandbox mode cannot be enforced on this host")

// Resolve derives the policy from spec and the host report. An explicit mode
// the host cannot enforce is refused; an unset one degrades to off and the
// policy says why (Degraded).
func Resolve(spec Spec, host HostReport) (*Policy, error) {
	if spec.Mode == "" {
		spec.Mode = ModeWorkspaceWrite
	}
	if _, err := ParseMode(string(spec.Mode)); err != nil {
		return nil, err
	}
	if spec.Network == "" {
		spec.Network = NetworkOn
	}
	if _, err := ParseNetwork(string(spec.Network)); err != nil {
		return nil, err
	}
	if spec.Limits == (Limits{}) {
		spec.Limits = DefaultLimits
	}
	p := &Policy{
		mode:     spec.Mode,
		explicit: spec.ModeExplicit,
		network:  spec.Network,
		limits:   spec.Limits,
		env:      slices.Clone(spec.Env),
		host:     host,
		backend:  "bwrap",
	}
	home := spec.Home
	if home == "" {
		home = envLookup(spec.Env, "HOME")
	}
	if home == "" || !filepath.IsAbs(home) {
		return nil, fmt.Errorf("HOME is unset or relative (%q): the denylist is resolved against it", home)
	}
	p.home = filepath.Clean(home)
	p.xdgConf = envLookup(spec.Env, "XDG_CONFIG_HOME")
	if p.xdgConf != "" && !filepath.IsAbs(p.xdgConf) {
		p.xdgConf = ""
	}

	wd, err := canonicalDir(spec.Workdir)
	if err != nil {
		return nil, fmt.Errorf("workdir: %w", err)
	}
	p.workdir = wd
	for _, d := range spec.AddDirs {
		cd, err := canonicalDir(d)
		if err != nil {
			return nil, fmt.Errorf("--add-dir %s: %w", d, err)
		}
		if err := sharedTreeGuard(cd, p.home, wd, tempRoots(spec.Env)); err != nil {
			return nil, fmt.Errorf("--add-dir %s: %w", d, err)
		}
		if !slices.Contains(p.addDirs, cd) {
			p.addDirs = append(p.addDirs, cd)
		}
	}
	p.deny = defaultDenylist(p.home, p.xdgConf)
	if host.RunAsRoot {
		// Kernel uid 0 without capabilities still reads what other users
		// left readable: every local user's credentials are masked too.
		p.deny = append(p.deny, otherUsersDenylist(p.home)...)
	}
	if spec.StateDir != "" {
		if !filepath.IsAbs(spec.StateDir) {
			return nil, fmt.Errorf("state directory %q is not absolute", spec.StateDir)
		}
		p.deny = append(p.deny, filepath.Clean(spec.StateDir))
	}
	for _, d := range spec.ExtraDeny {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("deny path %q is not absolute", d)
		}
		p.deny = append(p.deny, filepath.Clean(d))
	}
	if p.mode != ModeOff {
		if err := p.checkWorkdir(); err != nil {
			return nil, err
		}
	}
	if err := p.resolveProtect(spec); err != nil {
		return nil, err
	}
	p.scratchR = spec.ScratchRoot
	p.gitConf = globalGitConfigFiles(p.home, p.xdgConf)
	p.hookGrants = append(p.resolveHookGrants(spec.HookPaths), p.resolveGrantDirs(spec.GrantDirs)...)

	if p.mode != ModeOff {
		if err := p.chooseBackend(spec.Backend); err != nil {
			return nil, err
		}
	}
	p.setBackend()
	return p, nil
}

// checkWorkdir refuses a worktree that is a shared tree (binding HOME
// writable would expose everything) or lies inside a denylisted path.
func (p *Policy) checkWorkdir() error {
	if err := sharedTreeGuard(p.workdir, p.home, "", tempRoots(p.env)); err != nil {
		return fmt.Errorf("workdir: %w", err)
	}
	for _, d := range p.deny {
		for _, sp := range resolvedSpellings(d) {
			if Within(p.workdir, sp) {
				return fmt.Errorf("workdir %s lies inside the denylisted %s", p.workdir, d)
			}
		}
	}
	return nil
}

// setBackend derives the backend and cache strategy from the mode.
func (p *Policy) setBackend() {
	landlock := p.backend == backendLandlock
	p.backend = "bwrap"
	if p.host.OS == "darwin" {
		p.backend = "seatbelt" // no overlay there: caches are private
	}
	if landlock {
		p.backend = backendLandlock // no overlay: caches are private
	}
	switch {
	case p.mode == ModeOff:
		p.backend = "none"
		p.cache = CacheHost
	case p.mode == ModeReadOnly:
		p.cache = CacheNone
	case p.mode == ModeWorkspaceWrite && p.host.Overlay && !landlock:
		p.cache = CacheOverlay
	default:
		p.cache = CachePrivate
	}
}

// Narrow returns a copy of p confined further: a stricter mode, the network
// off, or more masked paths. It refuses anything that would widen p.
func (p *Policy) Narrow(mode Mode, network Network, extraDeny []string) (*Policy, error) {
	q := *p
	q.addDirs = slices.Clone(p.addDirs)
	q.deny = slices.Clone(p.deny)
	if mode != "" && mode != p.mode {
		if _, err := ParseMode(string(mode)); err != nil {
			return nil, err
		}
		if !mode.NoWiderThan(p.mode) {
			return nil, fmt.Errorf("cannot narrow sandbox %s to %s: it would grant more", p.mode, mode)
		}
		if p.mode == ModeOff && p.host.Unusable() != "" {
			return nil, fmt.Errorf("%w: --sandbox %s: %s", ErrUnenforceable, mode, p.host.Unusable())
		}
		q.mode = mode
		q.degraded = ""
		q.setBackend()
		if err := q.checkWorkdir(); err != nil {
			return nil, err
		}
	}
	switch network {
	case "", p.network:
	case NetworkOff:
		q.network = NetworkOff
	default:
		return nil, fmt.Errorf("cannot narrow --sandbox-net %s to %s: it would grant more", p.network, network)
	}
	for _, d := range extraDeny {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("deny path %q is not absolute", d)
		}
		q.deny = append(q.deny, filepath.Clean(d))
	}
	q.hookGrants = q.renarrowHookGrants(p.hookGrants)
	return &q, nil
}

func (p *Policy) Mode() Mode                { return p.mode }
func (p *Policy) Network() Network          { return p.network }
func (p *Policy) Backend() string           { return p.backend }
func (p *Policy) Workdir() string           { return p.workdir }
func (p *Policy) AddDirs() []string         { return slices.Clone(p.addDirs) }
func (p *Policy) Home() string              { return p.home }
func (p *Policy) Denylist() []string        { return slices.Clone(p.deny) }
func (p *Policy) Limits() Limits            { return p.limits }
func (p *Policy) Cache() CacheStrategy      { return p.cache }
func (p *Policy) Host() HostReport          { return p.host }
func (p *Policy) Explicit() bool            { return p.explicit }
func (p *Policy) GlobalGitConfig() []string { return slices.Clone(p.gitConf) }
func (p *Policy) ScratchRoot() string       { return p.scratchR }
func (p *Policy) Env() []string             { return slices.Clone(p.env) }

// Degraded is the reason an unset default fell back to off, or "".
func (p *Policy) Degraded() string { return p.degraded }

// StartupLine is the one-line startup report (docs/security.md, "What is enforced":
// "The startup line"), read from the policy so it never says more than is
// enforced.
func (p *Policy) StartupLine() string {
	if p.mode == ModeOff {
		if p.degraded != "" {
			return "sandbox: NOT ENFORCING (off): no usable backend on this host: " + p.degraded + p.landlockAlsoUnusable() +
				"; commands run with your full user access (pass --sandbox MODE to refuse instead)" + p.offProtectFact()
		}
		return "sandbox: off (requested): commands run with your full user access" + p.offProtectFact()
	}
	net := "network off"
	if p.network == NetworkOn {
		net = "network on via allowlist proxies"
	}
	mode := string(p.mode)
	if p.writesBlocked {
		mode += ", writes blocked"
	}
	if p.backend == backendLandlock {
		return p.landlockStartupLine(mode)
	}
	line := fmt.Sprintf("sandbox: %s enforcing %s (%s, secrets masked, cache %s)", p.backend, mode, net, p.cache) + p.protectFacts()
	if pl := p.ProcessLimit(); pl != "" {
		line += "; process limit: " + pl
	}
	if sl := p.SecondLayer(); strings.HasPrefix(sl, "landlock") {
		// Only a layer that holds; `probe` says why none does.
		line += "; second layer: " + sl
	}
	return line
}

// offProtectFact says, in mode off, that configured protected paths are
// not enforced ("" when there are none).
func (p *Policy) offProtectFact() string {
	if len(p.protect) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d protected path(s) NOT enforced", len(p.protect))
}

// protectFacts is the startup line's protected-path and runner-state facts,
// "" when there are none.
func (p *Policy) protectFacts() string {
	s := ""
	if n := len(p.protect); n > 0 {
		s += fmt.Sprintf("; protected: %d path(s), read-only in every mode", n)
	}
	if n := len(p.stateRW); n > 0 {
		s += fmt.Sprintf("; runner state: %d dir(s), writable in every mode", n)
	}
	return s
}

// WriteRoots are the persistent writable roots of spawned processes (scratch
// and caches excluded).
func (p *Policy) WriteRoots() []string {
	if p.writesBlocked {
		return nil
	}
	switch p.mode {
	case ModeWorkspaceWrite:
		return append([]string{p.workdir}, p.addDirs...)
	case ModeRestricted:
		return []string{p.workdir}
	}
	return nil
}

func envLookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func tempRoots(env []string) []string {
	roots := []string{"/tmp", "/var/tmp", "/dev/shm"}
	if t := envLookup(env, "TMPDIR"); filepath.IsAbs(t) {
		roots = append(roots, filepath.Clean(t))
	}
	return roots
}

// FileToolsReadOnly returns a copy of p carrying the read-only rules, for
// the in-process file layer alone: where no backend can confine a
// delegate's shell, its file tools still keep the read-only write boundary
// (the delegate floor: docs/http.md, "Many agents, one server", "Narrower
// sessions"). It must never reach a launcher.
func (p *Policy) FileToolsReadOnly() *Policy {
	q := *p
	q.mode = ModeReadOnly
	q.cache = CacheNone
	q.backend = "none"
	return &q
}

// NarrowWorkdir returns a copy of p whose worktree is dir, which must be p's
// worktree or a directory inside it (an MCP client's roots may narrow the
// worktree, never move or widen it). dir is symlink-resolved first; a dir
// that resolves outside the worktree is refused.
func (p *Policy) NarrowWorkdir(dir string) (*Policy, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("workdir %q is not absolute", dir)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("workdir: %w", err)
	}
	if !Within(real, p.workdir) {
		return nil, fmt.Errorf("cannot narrow the worktree to a directory outside it")
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("workdir: not a directory")
	}
	q := *p
	q.addDirs = slices.Clone(p.addDirs)
	q.deny = slices.Clone(p.deny)
	q.workdir = real
	if p.mode != ModeOff {
		if err := q.checkWorkdir(); err != nil {
			return nil, err
		}
	}
	q.hookGrants = q.renarrowHookGrants(p.hookGrants)
	return &q, nil
}

// BlockWrites returns a copy of a restricted policy that keeps its read
// scope but writes nothing persistent: no write root, git metadata not
// writable, only the scratch: the delegate floor under a restricted
// server, which keeps restricted's narrower read scope and applies the
// read-only write block without widening reads (docs/http.md, "Many agents, one
// server", "Narrower sessions"). Other modes reach the floor through
// Narrow(ModeReadOnly).
func (p *Policy) BlockWrites() (*Policy, error) {
	if p.mode != ModeRestricted {
		return nil, fmt.Errorf("block writes: only restricted keeps its own mode (use read-only for %s)", p.mode)
	}
	q := *p
	q.addDirs = slices.Clone(p.addDirs)
	q.deny = slices.Clone(p.deny)
	q.writesBlocked = true
	return &q, nil
}

// WritesBlocked reports whether BlockWrites applies.
func (p *Policy) WritesBlocked() bool { return p.writesBlocked }

// writes reports whether spawned processes may write persistent state
// (the worktree, git metadata).
func (p *Policy) writes() bool { return p.mode.Writes() && !p.writesBlocked }
