package confine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The landlock backend's Linux half (landlock_backend.go; docs/security.md,
// "The landlock backend"): the launcher's prepare, the read set enumerated
// per spawn, and what the helper applies besides the Landlock rules.

// LandlockBackendEnv carries the backend's extra work to the helper:
// "v1;net=guard|host;rl=NOFILE,FSIZE,DATA". The helper removes it.
const LandlockBackendEnv = "EVENER_LANDLOCK_BACKEND"

// maxLandlockRules bounds the rules one spawn's read set may need.
const maxLandlockRules = 8192

// llForwarder is the landlock backend's loopback forwarder to the
// session's egress bridge, one per launcher (osBackend.llfwd).
type llForwarder = loopbackForwarder

// setEgressLandlock starts the loopback forwarder the landlock backend's
// commands reach the proxies through (there is no network namespace for
// a relay). Called with s.mu held.
func (b *osBackend) setEgressLandlock(s *Launcher, eg EgressBridge) error {
	if s.p.Load().Backend() != backendLandlock {
		return nil
	}
	fwd, err := newLoopbackForwarder(eg.HTTPSocket, eg.SOCKSSocket)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	if b.llfwd != nil {
		b.llfwd.Close()
	}
	b.llfwd = fwd
	return nil
}

// closeLandlock stops the forwarder.
func (b *osBackend) closeLandlock(s *Launcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.llfwd != nil {
		b.llfwd.Close()
		b.llfwd = nil
	}
}

// prepareLandlock builds a landlock-backend spawn: this binary's helper in
// front of the command, the rules and the backend's extras in its
// environment. Started as a plain process (no bubblewrap) that leads a
// session of its own, which the seccomp filter keeps every descendant in.
func (b *osBackend) prepareLandlock(s *Launcher, p *Policy, c Command, dir string, over map[string]string) (*Prepared, error) {
	Phase("inspect")
	l, err := Inspect(p, s.scratch, dir)
	if err != nil {
		return nil, err
	}
	network := p.Network()
	if c.Network == NetworkOff || c.Network == NetworkHost {
		network = c.Network
	}
	exe, err := landlockHelper()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSandboxSetup, err)
	}
	if k, _ := lstatKind(exe); k != PathFile {
		return nil, fmt.Errorf("%w: the Landlock helper is missing or not what it was", ErrUnsafeLayout)
	}
	var ports []uint16
	if network == NetworkOn {
		s.mu.Lock()
		eg, fwd := s.egress, b.llfwd
		s.mu.Unlock()
		if eg == nil || fwd == nil {
			return nil, fmt.Errorf("%w: the network is on but no egress proxies run for this session", ErrSandboxSetup)
		}
		for k, v := range egressEnvAt(*eg, fwd.httpPort, fwd.socksPort, exe) {
			over[k] = v
		}
		ports = []uint16{uint16(fwd.httpPort), uint16(fwd.socksPort)}
	}
	if p.Cache() == CachePrivate {
		for k, v := range CacheEnv(s.scratch, p.Mode(), envLookup(p.env, "GOPATH")) {
			if _, set := c.Env[k]; !set {
				over[k] = v
			}
		}
	}
	reads, err := landlockReadSet(p, l, s.hideBeside)
	if err != nil {
		return nil, err
	}
	r := LandlockRules{Read: append(reads, exe), Dev: landlockBackendDev}
	r.Write = append(r.Write, p.WriteRoots()...)
	r.Write = append(r.Write, s.scratch)
	r.Write = append(r.Write, p.StateRW()...)
	if p.writes() {
		for _, g := range l.Git {
			if g.BindWritable {
				r.Write = append(r.Write, g.Dir)
			}
		}
	}
	if network != NetworkHost {
		r.GuardTCP, r.TCPPorts, r.GuardBind = true, ports, true
		r.HostNetNS = hostNetNS()
	}
	for _, x := range []*[]string{&r.Read, &r.Write} {
		slices.Sort(*x)
		*x = slices.Compact(*x)
	}
	netMode := "guard"
	if network == NetworkHost {
		netMode = "host"
	}
	lim := p.Limits()
	extra := fmt.Sprintf("v1;net=%s;rl=%d,%d,%d", netMode, lim.OpenFiles, lim.FileBytes, lim.DataBytes)
	env := EnvFloor(p.env, s.envPass, p.Mode(), over, grantedRoots(p))
	env = withLandlockEnv(env, r.Encode())
	env = append(env, LandlockBackendEnv+"="+extra)
	args := append([]string{exe, LandlockSubcommand, "--"}, c.Args...)
	pr := &Prepared{Path: exe, Args: args, Env: env, Dir: dir, landlock: true}
	if gg := newSurfaceGuard(p, l, s.scratch); gg != nil {
		pr.after = gg.restore
	}
	return pr, nil
}

// landlockBackendDev are the device files a landlock-backend command may
// read and write (the host's /dev: no pseudo-terminal of another session).
var landlockBackendDev = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// landlockReadSet is what a landlock-backend spawn may read under p:
// restricted mode's roots, or (other modes) the system roots, the home,
// the worktree, the extra roots, the hook and grant directories, /proc;
// each granted whole unless a denied path lies beneath it, in which case
// its entries are granted one by one (recursively), the denied ones
// never. A symlink among them is granted as its target only when the
// target holds nothing denied. Enumerated at every spawn: there is no
// mount to mask a secret, so it is kept out by not granting it.
func landlockReadSet(p *Policy, l Layout, scratchParent string) ([]string, error) {
	var roots []string
	if p.Mode() == ModeRestricted {
		for _, e := range l.SystemRoots {
			roots = append(roots, e.Path)
		}
		roots = append(roots, l.GitConfig...)
		for _, g := range l.Git {
			roots = append(roots, g.Dir)
		}
		if p.WritesBlocked() {
			roots = append(roots, p.Workdir())
		}
	} else {
		for _, r := range systemReadRoots {
			if k, _ := lstatKind(r); k == PathDir || k == PathSymlink {
				roots = append(roots, r)
			}
		}
		roots = append(roots, p.Home(), p.Workdir())
		roots = append(roots, p.AddDirs()...)
	}
	roots = append(roots, l.HookDirs...)
	for _, g := range p.hookGrants {
		if g.Dir != "" {
			roots = append(roots, g.Dir)
		}
	}
	roots = append(roots, "/proc")
	var deny []string
	for _, d := range append(p.Denylist(), systemSecrets...) {
		deny = append(deny, resolvedSpellings(d)...)
	}
	if sr := p.ScratchRoot(); sr != "" {
		deny = append(deny, resolvedSpellings(sr)...) // other sessions' scratch
	}
	if scratchParent != "" {
		deny = append(deny, resolvedSpellings(scratchParent)...)
	}
	g := &grantWalk{deny: deny}
	for _, r := range roots {
		if err := g.grant(r, 0); err != nil {
			return nil, err
		}
	}
	return g.out, nil
}

// grantWalk enumerates a read set around the denied paths.
type grantWalk struct {
	deny []string
	out  []string
}

func (g *grantWalk) grant(path string, depth int) error {
	if len(g.out) > maxLandlockRules {
		return fmt.Errorf("%w: the landlock backend's read set needs more than %d rules", ErrSandboxSetup, maxLandlockRules)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil // absent: nothing to grant
	}
	if underAny(real, g.deny) || underAny(path, g.deny) {
		return nil
	}
	if !g.holdsDenied(real) && !g.holdsDenied(path) {
		g.out = append(g.out, real)
		return nil
	}
	// A denied path lies beneath: grant the entries around it, but never
	// follow a link that leads to such a tree.
	fi, err := os.Lstat(real)
	if err != nil || !fi.IsDir() || depth >= 12 {
		return nil
	}
	ents, err := os.ReadDir(real)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		child := filepath.Join(real, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			t, err := filepath.EvalSymlinks(child)
			if err != nil || underAny(t, g.deny) || g.holdsDenied(t) || underAny(child, g.deny) {
				continue
			}
			g.out = append(g.out, t)
			continue
		}
		if err := g.grant(child, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// holdsDenied reports whether a denied path lies strictly beneath dir.
func (g *grantWalk) holdsDenied(dir string) bool {
	for _, d := range g.deny {
		if d != dir && Within(d, dir) {
			return true
		}
	}
	return false
}

// landlockBackendExtras is the helper's work besides the Landlock rules
// (LandlockBackendEnv): resource limits and capabilities before the
// ruleset, the seccomp filters after it. ok false: not a landlock-backend
// spawn.
type landlockBackendExtras struct {
	netHost                bool
	nofile, fsize, dataLim uint64
}

func parseLandlockBackend(s string) (landlockBackendExtras, error) {
	var x landlockBackendExtras
	f := strings.Split(s, ";")
	if f[0] != "v1" {
		return x, errors.New("landlock backend: unknown version")
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "net":
			x.netHost = v == "host"
		case "rl":
			n := strings.Split(v, ",")
			if len(n) != 3 {
				return x, errors.New("landlock backend: bad limits")
			}
			var vals [3]uint64
			for i := range n {
				u, err := strconv.ParseUint(n[i], 10, 64)
				if err != nil {
					return x, errors.New("landlock backend: bad limits")
				}
				vals[i] = u
			}
			x.nofile, x.fsize, x.dataLim = vals[0], vals[1], vals[2]
		default:
			return x, fmt.Errorf("landlock backend: unknown field %q", k)
		}
	}
	return x, nil
}

// landlockBackendPre applies the resource limits and drops every
// capability (a root server's command keeps none); nil when not a
// landlock-backend spawn. Non-zero: the exit code of a failure.
func landlockBackendPre() (*landlockBackendExtras, int) {
	spec, ok := os.LookupEnv(LandlockBackendEnv)
	if !ok {
		return nil, 0
	}
	os.Unsetenv(LandlockBackendEnv)
	x, err := parseLandlockBackend(spec)
	if err == nil {
		err = x.limits()
	}
	if err == nil {
		err = dropAllCaps()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: the landlock backend could not confine the command: %v\n", err)
		return nil, 125
	}
	return &x, 0
}

func (x *landlockBackendExtras) limits() error {
	for _, r := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_NOFILE, x.nofile},
		{unix.RLIMIT_FSIZE, x.fsize},
		{unix.RLIMIT_DATA, x.dataLim},
		{unix.RLIMIT_CORE, 0},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err != nil {
			return fmt.Errorf("read resource limit %d: %w", r.res, err)
		}
		v := min(r.v, cur.Max)
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("set resource limit %d: %w", r.res, err)
		}
	}
	return nil
}

// dropAllCaps empties the bounding set (when it may) and the thread's
// capability sets, and locks root out of regaining them at exec.
func dropAllCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Permitted == 0 && data[1].Permitted == 0 && os.Geteuid() != 0 {
		return nil
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop bounding capability %d: %w", c, err)
		}
	}
	const secbits = 0x2f // NOROOT, NOROOT_LOCKED, NO_SETUID_FIXUP, NO_SETUID_FIXUP_LOCKED, KEEP_CAPS_LOCKED
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// landlockBackendPost installs the native seccomp filter and the
// backend's own (landlockBackendFilter), after the ruleset.
func (x *landlockBackendExtras) post() error {
	prog, err := SeccompProgram()
	if err != nil {
		return err
	}
	if err := installSeccomp(prog); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	extra, err := landlockBackendFilter(x.netHost)
	if err != nil {
		return err
	}
	if err := installSeccomp(extra); err != nil {
		return fmt.Errorf("seccomp (backend filter): %w", err)
	}
	return nil
}

// installSeccomp attaches raw (struct sock_filter[], native order) to the
// calling thread; no_new_privs is set already.
func installSeccomp(raw []byte) error {
	if len(raw) == 0 || len(raw)%8 != 0 {
		return errors.New("bad filter")
	}
	fp := unix.SockFprog{Len: uint16(len(raw) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&raw[0]))}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fp))); errno != 0 {
		return errno
	}
	return nil
}

// The backend filter's answers.
const (
	retEACCES   = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	msgFastOpen = 0x20000000 // MSG_FASTOPEN
)

// landlockBackendSysV are System V IPC calls: without an IPC namespace
// they reach the host's segments, queues and semaphores.
var landlockBackendSysV = []uint32{
	unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL, unix.SYS_SHMDT,
	unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
	unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMTIMEDOP, unix.SYS_SEMCTL,
}

// landlockBackendFilter is the backend's own seccomp filter, stacked on
// the native one, for what namespaces gave the native backend:
//   - socket(2): AF_UNIX refused (the host's daemons: docker, D-Bus, the
//     user's agents; socketpair(2) still works); AF_INET and AF_INET6 only
//     as TCP (SOCK_STREAM, protocol 0 or IPPROTO_TCP), which Landlock
//     filters: UDP, ICMP, raw and SCTP refused with EACCES. A command on
//     the host's network (netHost) keeps every inet socket.
//   - sendto/sendmsg/sendmmsg with MSG_FASTOPEN (a connect without
//     connect(2)).
//   - setsid(2): every descendant stays in the session the launcher kills.
//   - System V IPC.
func landlockBackendFilter(netHost bool) ([]byte, error) {
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompDataArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompAuditArch, SkipTrue: 1},
		bpf.RetConstant{Val: retKill},
		bpf.LoadAbsolute{Off: seccompDataNr, Size: 4},
	}
	deny := append([]uint32{unix.SYS_SETSID}, landlockBackendSysV...)
	for _, nr := range deny {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, bpf.RetConstant{Val: retEPERM})
	}
	for _, s := range []struct{ nr, arg uint32 }{{unix.SYS_SENDTO, 3}, {unix.SYS_SENDMSG, 2}, {unix.SYS_SENDMMSG, 3}} {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: s.nr, SkipFalse: 3},
			bpf.LoadAbsolute{Off: seccompDataArgs + 8*s.arg, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: msgFastOpen, SkipFalse: 1},
			bpf.RetConstant{Val: retEPERM},
		)
		// The accumulator holds the flags now: reload the number.
		p = append(p, bpf.LoadAbsolute{Off: seccompDataNr, Size: 4})
	}
	// socket(domain, type, protocol)
	sock := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: seccompDataArgs, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipFalse: 1},
		/* 2 */ bpf.RetConstant{Val: retEACCES},
	}
	if !netHost {
		sock = append(sock,
			/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: 2}, // -> 6
			/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6, SkipTrue: 1}, // -> 6
			/* 5 */ bpf.RetConstant{Val: retAllow}, // other families: the native filter's
			/* 6 */ bpf.LoadAbsolute{Off: seccompDataArgs + 8, Size: 4}, // type
			/* 7 */ bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf},
			/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOCK_STREAM, SkipFalse: 4}, // -> 13
			/* 9 */ bpf.LoadAbsolute{Off: seccompDataArgs + 16, Size: 4}, // protocol
			/* 10 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1}, // -> 12
			/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.IPPROTO_TCP, SkipFalse: 1}, // -> 13
			/* 12 */ bpf.RetConstant{Val: retAllow},
			/* 13 */ bpf.RetConstant{Val: retEACCES},
		)
	} else {
		sock = append(sock /* 3 */, bpf.RetConstant{Val: retAllow})
	}
	p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKET, SkipFalse: uint8(len(sock))})
	p = append(p, sock...)
	p = append(p, bpf.RetConstant{Val: retAllow})
	raw, err := bpf.Assemble(p)
	if err != nil {
		return nil, fmt.Errorf("assembling the landlock backend's seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = appendSockFilter(out, r)
	}
	return out, nil
}

func appendSockFilter(out []byte, r bpf.RawInstruction) []byte {
	f := unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	b := (*[8]byte)(unsafe.Pointer(&f))
	return append(out, b[:]...)
}

// landlockProcAttr: a landlock-backend command leads a session of its own
// (a terminal's takes its pseudo-terminal as the controlling one).
func landlockProcAttr(terminal bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true, Setctty: terminal}
}

// The landlock backend has no mount to pin a git directory's code-running
// surfaces (config, config.worktree, commondir, gitdir, hooks/) read-only
// inside a writable worktree, and Landlock cannot take a right away
// beneath a granted tree. So the server guards them itself: it records
// them before the command and, once the command and its session are gone,
// sets aside every one that changed and puts the recorded one back. This
// is the server's doing, not the kernel's (docs/security.md, "The landlock
// backend"): a git the user runs while the command runs sees what it
// planted.

// maxSurfaceBytes bounds what is recorded of one surface file.
const maxSurfaceBytes = 1 << 20

// surfFile is one recorded file (or link, or other entry).
type surfFile struct {
	kind   PathKind
	mode   uint32
	data   []byte
	target string
}

// surfSnap is one surface as recorded: a file, or a directory's entries.
type surfSnap struct {
	parent, name string
	self         surfFile
	entries      map[string]surfFile // a directory's (hooks/), one level
}

// surfaceGuard records and restores one spawn's git surfaces.
type surfaceGuard struct {
	workdir string
	anchors []string
	snaps   []surfSnap
}

func newSurfaceGuard(p *Policy, l Layout, scratch string) *surfaceGuard {
	g := &surfaceGuard{workdir: l.Workdir}
	g.anchors = append(append(append(g.anchors, p.WriteRoots()...), scratch), p.StateRW()...)
	for _, d := range l.Git {
		if d.BindWritable {
			g.anchors = append(g.anchors, d.Dir)
		}
	}
	for _, d := range l.Git {
		for _, e := range d.Surfaces {
			s, ok := g.record(filepath.Dir(e.Path), filepath.Base(e.Path))
			if ok {
				g.snaps = append(g.snaps, s)
			}
		}
	}
	if len(g.snaps) == 0 {
		return nil
	}
	return g
}

// record reads one surface through a held parent; ok false when its
// parent cannot be held (it is then not guarded: the git sweep's case).
func (g *surfaceGuard) record(parent, name string) (surfSnap, bool) {
	s := surfSnap{parent: parent, name: name}
	hd, err := OpenHeld(parent, g.anchors)
	if err != nil {
		return s, false
	}
	defer hd.Close()
	s.self = readSurf(hd, name)
	if s.self.kind == PathDir {
		s.entries = map[string]surfFile{}
		if sub, err := hd.Sub(name); err == nil {
			names, _ := sub.Names(4096)
			slices.Sort(names)
			for _, n := range names {
				s.entries[n] = readSurf(sub, n)
			}
			sub.Close()
		}
	}
	return s, true
}

func readSurf(d *HeldDir, name string) surfFile {
	st, err := d.Stat(name)
	if err != nil {
		return surfFile{kind: PathAbsent}
	}
	f := surfFile{mode: st.Mode & 0o7777}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		f.kind = PathDir
	case unix.S_IFLNK:
		f.kind = PathSymlink
		buf := make([]byte, 4096)
		if n, err := unix.Readlinkat(d.FD(), name, buf); err == nil {
			f.target = string(buf[:n])
		}
	case unix.S_IFREG:
		f.kind = PathFile
		fd, err := unix.Openat(d.FD(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			fh := os.NewFile(uintptr(fd), name)
			buf := make([]byte, maxSurfaceBytes+1)
			n, _ := io.ReadFull(fh, buf)
			fh.Close()
			f.data = buf[:n]
		}
	default:
		f.kind = PathOther
	}
	return f
}

func (a surfFile) equal(b surfFile) bool {
	return a.kind == b.kind && a.mode == b.mode && a.target == b.target && string(a.data) == string(b.data)
}

func (a surfSnap) equal(b surfSnap) bool {
	if !a.self.equal(b.self) || len(a.entries) != len(b.entries) {
		return false
	}
	for n, e := range a.entries {
		if o, ok := b.entries[n]; !ok || !e.equal(o) {
			return false
		}
	}
	return true
}

// restore sets aside every surface that changed and puts the recorded one
// back; it returns what it did, worktree-relative, for Result.Quarantined.
func (g *surfaceGuard) restore() []string {
	var out []string
	for _, s := range g.snaps {
		now, ok := g.record(s.parent, s.name)
		if ok && now.equal(s) {
			continue
		}
		rel, err := filepath.Rel(g.workdir, filepath.Join(s.parent, s.name))
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = filepath.Join("<git dir>", s.name)
		}
		out = append(out, rel+": "+g.putBack(s, ok && now.self.kind != PathAbsent))
	}
	return out
}

func (g *surfaceGuard) putBack(s surfSnap, present bool) string {
	hd, err := OpenHeld(s.parent, g.anchors)
	if err != nil {
		return "changed by the command (landlock backend: not pinned); its directory could not be held, left as it is"
	}
	defer hd.Close()
	what := "changed by the command (landlock backend: not pinned)"
	if present {
		aside := ""
		for i := 0; i < 100 && aside == ""; i++ {
			cand := s.name + quarantineSuffix
			if i > 0 {
				cand += "." + strconv.Itoa(i)
			}
			if err := unix.Renameat2(hd.FD(), s.name, hd.FD(), cand, unix.RENAME_NOREPLACE); err == nil {
				aside = cand
			} else if !errors.Is(err, unix.EEXIST) {
				return what + "; could not be set aside: " + err.Error()
			}
		}
		if aside == "" {
			return what + "; could not be set aside"
		}
		what += "; set aside as " + aside
	}
	if err := writeSurf(hd, s.name, s.self); err != nil {
		return what + "; the recorded one could not be put back: " + err.Error()
	}
	if s.self.kind == PathDir {
		sub, err := hd.Sub(s.name)
		if err != nil {
			return what + "; the recorded one could not be put back: " + err.Error()
		}
		defer sub.Close()
		for n, e := range s.entries {
			if err := writeSurf(sub, n, e); err != nil {
				return what + "; the recorded one could not be put back whole: " + err.Error()
			}
		}
	}
	return what + "; the recorded one put back"
}

func writeSurf(d *HeldDir, name string, f surfFile) error {
	switch f.kind {
	case PathFile:
		if err := d.CreateFile(name, f.data, f.mode); err != nil {
			return err
		}
		return d.Chmod(name, f.mode) // the umask took bits CreateFile asked for
	case PathDir:
		if err := d.Mkdir(name, f.mode|0o700); err != nil {
			return err
		}
		return d.Chmod(name, f.mode)
	case PathSymlink:
		return unix.Symlinkat(f.target, d.FD(), name)
	}
	return nil // absent (or not a file): nothing to put back
}
