package confine

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// MountKind is one bubblewrap filesystem operation.
type MountKind string

const (
	MountROBind   MountKind = "ro-bind"
	MountBind     MountKind = "bind"
	MountDevBind  MountKind = "dev-bind"
	MountTmpfs    MountKind = "tmpfs"
	MountRemount  MountKind = "remount-ro"
	MountDev      MountKind = "dev"
	MountProc     MountKind = "proc"
	MountSymlink  MountKind = "symlink"
	MountDir      MountKind = "dir"
	MountOverlay  MountKind = "overlay" // read-real, write-private (bwrap >= 0.10)
	MountMaskFile MountKind = "mask-file"
	MountMaskDir  MountKind = "mask-dir"
)

// Mount is one entry of a MountPlan. Why says which rule produced it; it is
// part of the golden files so a reviewer reads the plan, not the argv.
type Mount struct {
	Kind MountKind `json:"kind"`
	Src  string    `json:"src,omitempty"`
	Dst  string    `json:"dst"`
	Size int64     `json:"size,omitempty"`
	Why  string    `json:"why"`
}

// MountPlan is the ordered list of mounts that builds a sandbox's view of the
// filesystem. Later entries cover earlier ones, which is why masks come last.
type MountPlan []Mount

// Args renders the plan as bubblewrap arguments.
func (mp MountPlan) Args() []string {
	var a []string
	for _, m := range mp {
		switch m.Kind {
		case MountROBind, MountBind, MountDevBind:
			a = append(a, "--"+string(m.Kind), m.Src, m.Dst)
		case MountTmpfs:
			if m.Size > 0 {
				a = append(a, "--size", strconv.FormatInt(m.Size, 10))
			}
			a = append(a, "--tmpfs", m.Dst)
		case MountRemount, MountDev, MountProc, MountDir:
			a = append(a, "--"+string(m.Kind), m.Dst)
		case MountSymlink:
			a = append(a, "--symlink", m.Src, m.Dst)
		case MountOverlay:
			a = append(a, "--overlay-src", m.Src, "--tmp-overlay", m.Dst)
		case MountMaskFile:
			a = append(a, "--ro-bind", "/dev/null", m.Dst)
		case MountMaskDir:
			// An empty, mode-0000, 4 KiB tmpfs: nothing of what it covers is
			// visible. It is not remounted read-only (that costs a mount-table
			// walk per mask): whatever is written there stays in the sandbox
			// and vanishes with it.
			a = append(a, "--perms", "0000", "--size", "4096", "--tmpfs", m.Dst)
		default:
			panic("bug: unknown mount kind " + string(m.Kind))
		}
	}
	return a
}

// String renders the plan one mount per line, for golden files and `probe`.
func (mp MountPlan) String() string {
	var b strings.Builder
	for _, m := range mp {
		fmt.Fprintf(&b, "%-11s %s", m.Kind, m.Dst)
		if m.Src != "" && m.Src != m.Dst {
			fmt.Fprintf(&b, " <- %s", m.Src)
		}
		if m.Size > 0 {
			fmt.Fprintf(&b, " size=%d", m.Size)
		}
		fmt.Fprintf(&b, "  # %s\n", m.Why)
	}
	return b.String()
}

// PathKind is what an lstat found at a path.
type PathKind int

const (
	PathAbsent PathKind = iota
	PathFile
	PathDir
	PathSymlink
	PathOther // sockets, FIFOs, devices
)

// Entry is a path the plan depends on and what was found there at spawn.
type Entry struct {
	Path string
	Kind PathKind
	// Target is the symlink target for PathSymlink entries, as read.
	Target string
}

// GitDir is one git directory whose config and hook surfaces must stay
// read-only while its object store stays writable.
type GitDir struct {
	// Dir is the git directory (a main .git, worktrees/<id>, modules/<name>).
	Dir string
	// BindWritable is set when Dir lies outside every write root and so must
	// be bound writable (a linked worktree's or submodule's common dir).
	BindWritable bool
	// Chain are the directories between the outermost pinned git dir and
	// each surface; each becomes a mount point so it cannot be renamed.
	Chain []string
	// Surfaces are the protected files and directories, each existing by the
	// time the plan is rendered (Inspect pre-creates absent ones).
	Surfaces []Entry
}

// Layout is everything the plan needs to know about the filesystem, gathered
// by Inspect at each spawn (lstat, never following a link the sandbox could
// have planted). Plan itself does no I/O.
type Layout struct {
	Scratch string
	// ScratchParent, when set, is a server-private directory holding the
	// scratch of every session of one server: it is covered by an empty
	// tmpfs before the scratch is bound, so a session sees no sibling's
	// scratch or bridge sockets.
	ScratchParent string
	// Deny are the denylist paths that exist, each under its literal and its
	// resolved spelling.
	Deny []Entry
	// Sockets are the daemon control sockets that exist.
	Sockets []string
	// HostSockets are the pathname sockets bound in the server's network
	// namespace (host services), at their real location; SocketDirs the
	// serviceSocketDirs that exist. Both are masked in every sandboxed
	// mode wherever the sandbox would see them (see mountplan_sockets.go).
	HostSockets []string
	SocketDirs  []string
	// Proc are the procMasks entries present in the host's procfs.
	Proc []Entry
	// ProcReadOnly remounts the sandbox's procfs read-only (root servers).
	ProcReadOnly bool
	// SystemRoots are restricted mode's system read roots that exist.
	SystemRoots []Entry
	// GitConfig are the file-exact global git config grants (restricted).
	GitConfig []string
	// HookDirs are the hook command directories granted read/exec (every
	// sandboxed mode), as re-checked at spawn.
	HookDirs []string
	// Git are the git directories to protect.
	Git []GitDir
	// GitLinks are worktree `.git` files (gitlinks) pinned read-only.
	GitLinks []string
	// PinAbsentGit is a worktree-root .git that does not exist: it is pinned
	// as an empty read-only directory so no repository with hooks can be
	// planted where the user's git will find it.
	PinAbsentGit string
	// CacheRoots are the host cache roots served as overlays.
	CacheRoots []string
	// Workdir is the command's working directory.
	Workdir string
	// Protect are the protected paths' spellings found at spawn
	// (protect.go).
	Protect []ProtectEntry
	// Egress, when set, is the bridge to the session's proxies: this
	// binary (the relay) and the two Unix sockets, bound into the private
	// /tmp.
	Egress *EgressMounts
	// Agent, when set, is the host path of the session's SSH agent socket,
	// bound at AgentSocket.
	Agent string
}

// EgressMounts are the host paths the bridge binds into the sandbox.
type EgressMounts struct {
	Exe, HTTPSocket, SOCKSSocket string
}

// Plan computes the mount plan for policy p and filesystem facts l. It is a
// pure function: the same inputs give the same plan.
func Plan(p *Policy, l Layout) MountPlan {
	var mp MountPlan
	add := func(m Mount) { mp = append(mp, m) }
	lim := p.Limits()

	switch p.Mode() {
	case ModeReadOnly, ModeWorkspaceWrite:
		add(Mount{Kind: MountROBind, Src: "/", Dst: "/", Why: "read anywhere, write nowhere by default"})
	case ModeRestricted:
		add(Mount{Kind: MountTmpfs, Dst: "/", Size: 1 << 20, Why: "restricted: an empty root"})
		for _, r := range l.SystemRoots {
			switch r.Kind {
			case PathSymlink:
				add(Mount{Kind: MountSymlink, Src: r.Target, Dst: r.Path, Why: "system read root (merged-usr link)"})
			case PathDir:
				add(Mount{Kind: MountROBind, Src: r.Path, Dst: r.Path, Why: "system read root"})
			}
		}
		for _, f := range l.GitConfig {
			add(Mount{Kind: MountROBind, Src: f, Dst: f, Why: "global git config, file-exact"})
		}
	}

	add(Mount{Kind: MountDev, Dst: "/dev", Why: "minimal /dev"})
	add(Mount{Kind: MountTmpfs, Dst: "/dev/shm", Size: lim.TmpfsBytes, Why: "size-limited shared memory"})
	add(Mount{Kind: MountProc, Dst: "/proc", Why: "procfs of the sandbox's own PID namespace"})
	for _, e := range l.Proc {
		add(maskFor(e, "procfs entry leaking host kernel state"))
	}
	// The sandbox's init is bubblewrap itself, same uid and dumpable: its
	// memory must not be readable or writable by the command (ptrace is
	// refused by seccomp, but /proc/<pid>/mem is a file).
	for _, m := range []string{"/proc/1/mem", "/proc/1/task/1/mem"} {
		add(Mount{Kind: MountMaskFile, Dst: m, Why: "the sandbox init's memory"})
	}
	// Kernel uid 0 passes the owner check on global sysctls and on files
	// like sysrq-trigger even without capabilities: a server started by root
	// must not reach them, so the whole procfs is read-only.
	if l.ProcReadOnly {
		add(Mount{Kind: MountRemount, Dst: "/proc", Why: "procfs read-only (sysctls, sysrq)"})
	}
	add(Mount{Kind: MountTmpfs, Dst: "/tmp", Size: lim.TmpfsBytes, Why: "private /tmp (host sockets live there)"})
	if e := l.Egress; e != nil {
		add(Mount{Kind: MountROBind, Src: e.Exe, Dst: relayExe, Why: "egress relay (this binary)"})
		add(Mount{Kind: MountROBind, Src: e.HTTPSocket, Dst: relayHTTPSock, Why: "egress: the session's HTTP proxy"})
		add(Mount{Kind: MountROBind, Src: e.SOCKSSocket, Dst: relaySOCKSSock, Why: "egress: the session's SOCKS5 proxy"})
	}
	if l.Agent != "" {
		add(Mount{Kind: MountROBind, Src: l.Agent, Dst: AgentSocket, Why: "the session's brokered SSH agent"})
	}
	// Hook directories: after the private /tmp (a hook may live below a temp
	// root), before every write root (which stay writable) and before the masks
	// (which stay masked inside it).
	for _, d := range l.HookDirs {
		add(Mount{Kind: MountROBind, Src: d, Dst: d, Why: "hook command directory: read/exec, never write"})
	}
	if p.Mode() == ModeRestricted {
		// The only sockets restricted mode shows are inside a hook dir.
		for _, s := range l.Sockets {
			if underAny(s, l.HookDirs) {
				add(Mount{Kind: MountMaskFile, Dst: s, Why: "denylist: daemon control socket"})
			}
		}
	} else {
		add(Mount{Kind: MountMaskDir, Dst: "/sys", Why: "denylist: pseudo-filesystem"})
		add(Mount{Kind: MountMaskDir, Dst: "/run/user", Why: "denylist: per-user runtime sockets"})
		for _, s := range l.Sockets {
			add(Mount{Kind: MountMaskFile, Dst: s, Why: "denylist: daemon control socket"})
		}
	}

	switch {
	case p.Mode() == ModeReadOnly:
		// The private /tmp above would hide a worktree that lives there.
		for _, r := range append([]string{p.Workdir()}, p.AddDirs()...) {
			add(Mount{Kind: MountROBind, Src: r, Dst: r, Why: "worktree, read-only"})
		}
	case p.WritesBlocked():
		add(Mount{Kind: MountROBind, Src: p.Workdir(), Dst: p.Workdir(), Why: "worktree, read-only (writes blocked)"})
	}
	for _, w := range p.WriteRoots() {
		add(Mount{Kind: MountBind, Src: w, Dst: w, Why: "write root"})
	}
	if l.Scratch != "" {
		if l.ScratchParent != "" && p.Mode() != ModeRestricted {
			// restricted starts from an empty root: the parent is not there.
			add(Mount{Kind: MountTmpfs, Dst: l.ScratchParent, Size: 1 << 20, Why: "other sessions' scratch hidden"})
		}
		add(Mount{Kind: MountBind, Src: l.Scratch, Dst: l.Scratch, Why: "session scratch (TMPDIR)"})
	}
	for _, d := range p.StateRW() {
		add(Mount{Kind: MountBind, Src: d, Dst: d, Why: "runner state directory: writable in every mode"})
	}
	for _, c := range l.CacheRoots {
		add(Mount{Kind: MountOverlay, Src: c, Dst: c, Why: "cache: shared-read/private-write"})
	}

	if p.writes() {
		for _, g := range l.Git {
			if g.BindWritable {
				add(Mount{Kind: MountBind, Src: g.Dir, Dst: g.Dir, Why: "git metadata outside the worktree"})
			} else {
				add(Mount{Kind: MountBind, Src: g.Dir, Dst: g.Dir, Why: "git dir pinned: renaming it fails"})
			}
			for _, c := range g.Chain {
				add(Mount{Kind: MountBind, Src: c, Dst: c, Why: "git chain pinned: renaming it fails"})
			}
			for _, s := range g.Surfaces {
				add(Mount{Kind: MountROBind, Src: s.Path, Dst: s.Path, Why: "git config/hook surface read-only"})
			}
		}
		for _, gl := range l.GitLinks {
			add(Mount{Kind: MountROBind, Src: gl, Dst: gl, Why: "gitlink read-only: it names the git dir"})
		}
		if l.PinAbsentGit != "" {
			add(Mount{Kind: MountMaskDir, Dst: l.PinAbsentGit, Why: "no repository may be planted here"})
		}
	}

	// Protected paths after every writable bind (protect.go).
	mp = planProtect(mp, l)

	// Masks last, so no bind above re-exposes a secret.
	for _, e := range l.Deny {
		add(maskFor(e, "denylist: credentials"))
	}
	for _, d := range l.SocketDirs {
		if !notHostView(d, l, p) {
			add(Mount{Kind: MountMaskDir, Dst: d, Why: "host service socket directory"})
		}
	}
	for _, s := range l.HostSockets {
		if !hostSocketHidden(s, l, p) {
			add(Mount{Kind: MountMaskFile, Dst: s, Why: "host Unix socket"})
		}
	}
	if p.Mode() == ModeRestricted {
		// The empty root was writable while bwrap built mount points in it;
		// a write there now must fail, not vanish with the sandbox.
		add(Mount{Kind: MountRemount, Dst: "/", Why: "restricted: the empty root read-only"})
	}
	return mp
}

func maskFor(e Entry, why string) Mount {
	if e.Kind == PathDir {
		return Mount{Kind: MountMaskDir, Dst: e.Path, Why: why}
	}
	return Mount{Kind: MountMaskFile, Dst: e.Path, Why: why}
}

// underAny reports whether p lies at or under one of roots.
func underAny(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return Within(p, r) })
}

// cleanAbs is filepath.Clean for paths already known to be absolute.
func cleanAbs(p string) string { return filepath.Clean(p) }
