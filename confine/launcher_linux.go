package confine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The Linux backend: every sandboxed spawn is a bubblewrap started with the
// session's mount plan, a seccomp filter on descriptor 3, its info on 4 and
// held on 5 until release has applied the resource limits (and, for a root
// server, put it in the session's pids cgroup).
//
// procs bounds a session's processes as a whole (docs/security.md, "What is
// enforced"): a root server's sandboxes all live in one pids cgroup per
// session (cgroup_linux.go); a user server's session sandboxes all enter one
// user namespace, where RLIMIT_NPROC counts them together
// (loopback_linux.go).

// osBackend is the Linux launcher backend (bubblewrap).
type osBackend struct {
	// cleanup counts a spawner being made; close waits.
	cleanup sync.WaitGroup
	// spawner, once ready, starts this session's sandboxes inside its
	// pids cgroup (root servers on cgroup v1; see StartSpawner).
	spawner     atomic.Pointer[spawner]
	spawnerOnce sync.Once
	// sessionNS: every sandbox of this (user server's) session enters the
	// holder's user namespace (StartSpawner; loopback_linux.go).
	sessionNS atomic.Bool

	// llfwd is the landlock backend's loopback forwarder to the egress
	// bridge (landlock_backend_linux.go); guarded by the launcher's mu.
	llfwd *llForwarder

	cgMu     sync.Mutex // guards cg, cgErr and cgClosed: the session pids cgroup
	cg       string     // made on the first root spawn or by StartSpawner
	cgErr    error      // why it could not be made (not retried)
	cgClosed bool       // close removed it: none is made again
}

// osSpawn is a sandboxed spawn's descriptors and process cgroup.
type osSpawn struct {
	seccompR, infoR, infoW, blockR, blockW *os.File
	cgroup                                 string        // the session's pids cgroup (root servers)
	bwrapJoined                            bool          // bwrap is in it (born there, or moved right after start)
	spawner                                *spawner      // bwrap is started by it, born in its cgroup
	stuck                                  chan struct{} // closed at end: see startInCgroup
}

func (b *osBackend) ready() error { return nil }

func procAttr(sandboxed, terminal bool) *syscall.SysProcAttr {
	if terminal {
		// A terminal's command leads a session whose controlling
		// terminal is its standard input (the pseudo-terminal), so the
		// terminal's ^C reaches its foreground job; killTree ends the
		// session's process group.
		return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true, Setctty: true, Ctty: 0}
	}
	// A mode-off command leads a process group of its own: killTree ends
	// it with its children.
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: !sandboxed}
}

// prepare builds the bubblewrap argv: the namespaces, the seccomp filter,
// the mount plan, and with the network on the relay in front of the
// command.
func (b *osBackend) prepare(s *Launcher, p *Policy, c Command, dir string, over map[string]string) (*Prepared, error) {
	if p.Backend() == backendLandlock {
		return b.prepareLandlock(s, p, c, dir, over)
	}
	Phase("inspect")
	l, err := Inspect(p, s.scratch, dir)
	if err != nil {
		return nil, err
	}
	Phase("plan")
	l.ScratchParent = s.hideBeside
	cmdArgs := c.Args
	network := p.Network()
	if c.Network == NetworkOff || c.Network == NetworkHost {
		network = c.Network
	}
	// The session's holder (loopback_linux.go): its user namespace, which
	// bounds a user server's session, and its loopback when the session
	// has one and this spawn takes the session's network.
	lb, joinNet, err := s.sessionHolder(p, network != NetworkHost && c.Network != NetworkOff)
	if err != nil {
		return nil, err
	}
	if network == NetworkOn {
		if err := s.addEgress(&l, over); err != nil {
			return nil, err
		}
		if !joinNet {
			// No loopback holder relays for it: the relay runs in
			// front of the command, inside its sandbox.
			cmdArgs = append([]string{relayExe, RelaySubcommand, "--"}, c.Args...)
		}
	}
	if a := s.agentSocket(); a != "" {
		if k, _ := lstatKind(a); k == PathAbsent || k == PathSymlink || k == PathDir {
			return nil, fmt.Errorf("%w: the session's SSH agent socket is missing or not what it was", ErrUnsafeLayout)
		}
		l.Agent = a
		over["SSH_AUTH_SOCK"] = AgentSocket
	}
	s.addCacheEnv(p, l, c, over)
	plan, cmdArgs, landlock, err := s.landlockWrap(p, l, Plan(p, l), cmdArgs, network)
	if err != nil {
		return nil, err
	}
	args := []string{"bwrap",
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns", "--assert-userns-disabled", "--die-with-parent",
		"--cap-drop", "ALL", "--hostname", "evener-sandbox",
		"--seccomp", "3", "--info-fd", "4", "--block-fd", "5",
	}
	if !c.Terminal {
		// A session of its own: nothing in the sandbox can inject input
		// into a terminal the server was started from (TIOCSTI). A
		// terminal's command keeps the session whose controlling
		// terminal is the server's own pseudo-terminal for it.
		args = append(args, "--new-session")
	}
	if network != NetworkHost && !joinNet {
		// A network namespace of its own: with the network on, the only
		// way out is the egress bridge. Only a command that asked for the
		// host's network (an MCP server behind this one, docs/gateway.md, "MCP
		// servers behind evener-mcp") keeps it.
		args = append(args, "--unshare-net")
	}
	args = append(args, plan.Args()...)
	args = widenArgsIfTest(args)
	args = append(args, "--chdir", dir, "--")
	optsEnd := len(args) - 1 // bwrap's "--"
	args = append(args, cmdArgs...)
	env := withLandlockEnv(EnvFloor(p.env, s.envPass, p.Mode(), over, grantedRoots(p)), landlock)
	path := p.host.Bwrap
	var optsAt [2]int
	if lb != nil {
		var at int
		path, args, at = lb.wrap(path, args, joinNet)
		if lb.userNS != nil {
			// In the session's user namespace: the options go through a
			// pipe, after the process limit (start).
			optsAt = [2]int{at + 1, at + optsEnd}
		}
	}
	return &Prepared{Path: path, Args: args, Env: env, Dir: dir, Plan: plan, Sandboxed: true, optsAt: optsAt}, nil
}

// setEgress: the bridge's sockets are bound into each sandbox (prepare).
func (b *osBackend) setEgress(s *Launcher, eg EgressBridge) error { return b.setEgressLandlock(s, eg) }

// start opens the spawn's descriptors (the seccomp program, bwrap's info
// and block pipes), picks its pids cgroup (root servers) and starts bwrap,
// held on the block pipe until release.
func (b *osBackend) start(s *Launcher, sp *spawn, onStart func()) error {
	f := &sp.os
	if err := b.openFiles(s, f); err != nil {
		return err
	}
	cmd := sp.cmd
	cmd.Dir = "/" // bwrap changes to the working directory inside
	cmd.ExtraFiles = []*os.File{f.seccompR, f.infoW, f.blockR}
	var opts []string
	var optsR, optsW *os.File
	if at := sp.optsAt; at[1] > at[0] {
		// bwrap reads its options from descriptor 6, which it cannot do
		// before the process limit is set below: it makes the sandbox's
		// user namespace only once it has them all.
		var err error
		if optsR, optsW, err = os.Pipe(); err != nil {
			f.closeChildEnds()
			f.infoR.Close()
			f.blockW.Close()
			return fmt.Errorf("%w: options pipe: %v", ErrSandboxSetup, err)
		}
		opts = cmd.Args[at[0]:at[1]]
		cmd.Args = append(append(cmd.Args[:at[0]:at[0]], "--args", "6"), cmd.Args[at[1]:]...)
		cmd.ExtraFiles = append(cmd.ExtraFiles, optsR)
	}
	var err error
	joined := false
	switch {
	case f.spawner != nil:
		err = f.spawner.start(cmd)
	case f.cgroup != "" && !pidsCtl.v2:
		// Born in its cgroup: no other task moved in (cgroup_linux.go).
		f.stuck = make(chan struct{})
		if joined, err = startInCgroup(f.cgroup, cmd, f.stuck); joined {
			f.bwrapJoined = err == nil
		}
	}
	if f.spawner == nil && !joined {
		err = cmd.Start()
	}
	f.closeChildEnds()
	if optsR != nil {
		optsR.Close()
		if err == nil {
			err = limitThenRelease(cmd.Process.Pid, s.p.Load().Limits().Procs, opts, optsW)
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		} else {
			optsW.Close()
		}
	}
	if err != nil {
		f.infoR.Close()
		f.blockW.Close()
		return fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	return nil
}

// limitThenRelease sets pid's RLIMIT_NPROC to procs (soft and hard), then
// writes bubblewrap's options, NUL-separated, to w and closes it (in the
// background: a large mount plan outgrows the pipe, and bwrap drains it).
func limitThenRelease(pid int, procs int64, opts []string, w *os.File) error {
	n := uint64(procsCeiling(procs))
	if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
		w.Close()
		return fmt.Errorf("%w: set the process limit: %v", ErrSandboxSetup, err)
	}
	var b bytes.Buffer
	for _, o := range opts {
		b.WriteString(o)
		b.WriteByte(0)
	}
	go func() {
		_, _ = w.Write(b.Bytes())
		w.Close()
	}()
	return nil
}

func (b *osBackend) openFiles(s *Launcher, f *osSpawn) error {
	prog, err := SeccompProgram()
	if err != nil {
		return err
	}
	// Plain pipes: only the info pipe's read end, which a goroutine drains
	// while the command runs, goes through the runtime's poller; the ends
	// bwrap gets and the two written once are blocking descriptors, so no
	// end is registered with epoll, made non-blocking and back again.
	var p [3][2]int
	for i := range p {
		if err := unix.Pipe2(p[i][:], unix.O_CLOEXEC); err != nil {
			for _, q := range p[:i] {
				unix.Close(q[0])
				unix.Close(q[1])
			}
			return fmt.Errorf("pipe: %w", err)
		}
	}
	// The program (under 64 KiB) fits the pipe's buffer: written whole
	// before bwrap starts.
	if n, werr := unix.Write(p[0][1], prog); werr != nil {
		err = werr
	} else if n != len(prog) {
		err = io.ErrShortWrite
	}
	unix.Close(p[0][1])
	if err == nil {
		err = unix.SetNonblock(p[1][0], true)
	}
	if err != nil {
		unix.Close(p[0][0])
		for _, q := range p[1:] {
			unix.Close(q[0])
			unix.Close(q[1])
		}
		return fmt.Errorf("%w: seccomp and info pipes: %v", ErrSandboxSetup, err)
	}
	f.seccompR = os.NewFile(uintptr(p[0][0]), "seccomp")
	f.infoR, f.infoW = os.NewFile(uintptr(p[1][0]), "bwrap-info"), os.NewFile(uintptr(p[1][1]), "bwrap-info")
	f.blockR, f.blockW = os.NewFile(uintptr(p[2][0]), "bwrap-block"), os.NewFile(uintptr(p[2][1]), "bwrap-block")
	if s.p.Load().host.RunAsRoot {
		// RLIMIT_NPROC does not bind host uid 0; the session's pids
		// cgroup does. Where no pids controller can be used (a container
		// with a read-only cgroupfs, say) the spawn goes ahead without a
		// process cap; the probe and the startup line say "process
		// limit: none".
		if _, perr := PidsCgroup(); perr == nil {
			if f.cgroup, err = b.sessionCgroup(s); err != nil {
				f.closeChildEnds()
				f.infoR.Close()
				f.blockW.Close()
				return fmt.Errorf("%w: %v", ErrSandboxSetup, err)
			}
			if sp := b.spawner.Load(); sp != nil {
				f.spawner, f.bwrapJoined = sp, true
			}
		}
	}
	return nil
}

// sessionCgroup is the session's pids cgroup (pids.max = procs), made on
// first use.
func (b *osBackend) sessionCgroup(s *Launcher) (string, error) {
	b.cgMu.Lock()
	defer b.cgMu.Unlock()
	switch {
	case b.cg != "" || b.cgErr != nil:
		return b.cg, b.cgErr
	case b.cgClosed:
		return "", errors.New("session closed")
	}
	b.cg, b.cgErr = newSessionCgroup(s.p.Load().Limits().Procs)
	return b.cg, b.cgErr
}

func (f *osSpawn) closeChildEnds() {
	f.seccompR.Close()
	f.infoW.Close()
	f.blockR.Close()
}

// release reads bubblewrap's info (the sandbox init's host pid), applies the
// resource limits to it before it execs the command, then lets it go. On
// failure it kills the spawn before the block pipe closes (bwrap treats EOF
// on it as the go-ahead) and waits for it.
func (b *osBackend) release(s *Launcher, sp *spawn, onStart func()) error {
	f, cmd := &sp.os, sp.cmd
	if f.cgroup != "" && !f.bwrapJoined {
		// Move bwrap now, while it is still starting: the migration (which
		// can wait for an RCU grace period) overlaps its start, and the
		// sandbox it clones is born inside. hold checks.
		f.bwrapJoined = joinPidsCgroup(f.cgroup, cmd.Process.Pid) == nil
	}
	pid, err := b.hold(s, cmd.Process.Pid, f, onStart)
	if err != nil {
		s.mu.Lock()
		sp.pid = pid
		killTree(sp)
		s.mu.Unlock()
		f.blockW.Close()
		_ = cmd.Wait()
		if errors.Is(err, unix.ESRCH) && cmd.ProcessState != nil {
			// The sandbox vanished before it was released: say how
			// bubblewrap itself ended (a rare failure under load, not
			// yet explained).
			err = fmt.Errorf("%w (bubblewrap: %s)", err, cmd.ProcessState)
		}
		return err
	}
	f.blockW.Close()
	s.mu.Lock()
	sp.pid = pid
	if s.closed {
		// Close ran between the release and now: it killed bubblewrap,
		// whose init, if still waiting for bubblewrap, would wait forever.
		killTree(sp)
	}
	s.mu.Unlock()
	return nil
}

// hold does release's work while bwrap holds the sandbox: it returns the
// sandbox init's pid.
func (b *osBackend) hold(s *Launcher, bwrapPID int, f *osSpawn, onStart func()) (int, error) {
	// bwrap writes the rest of its info later; a closed pipe would kill it
	// with SIGPIPE, so the rest is drained and dropped.
	defer func() {
		go func() {
			_, _ = io.Copy(io.Discard, f.infoR)
			f.infoR.Close()
		}()
	}()
	pid, err := readChildPID(f.infoR)
	if err != nil {
		return 0, fmt.Errorf("%w: bubblewrap exited before the sandbox existed (its message is above)", ErrSandboxSetup)
	}
	Phase("limits")
	lim := s.p.Load().Limits()
	for _, r := range []struct {
		res int
		v   int64
	}{
		{unix.RLIMIT_NOFILE, lim.OpenFiles},
		{unix.RLIMIT_NPROC, lim.Procs},
		{unix.RLIMIT_FSIZE, lim.FileBytes},
		{unix.RLIMIT_DATA, lim.DataBytes},
		{unix.RLIMIT_CORE, 0},
	} {
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, r.res, nil, &cur); err != nil {
			return pid, fmt.Errorf("%w: read resource limit %d: %w", ErrSandboxSetup, r.res, err)
		}
		// Never above the hard limit the server itself got: lowering is
		// always allowed, raising is not.
		v := min(uint64(r.v), cur.Max)
		rl := unix.Rlimit{Cur: v, Max: v}
		if err := unix.Prlimit(pid, r.res, &rl, nil); err != nil {
			return pid, fmt.Errorf("%w: set resource limit %d: %v", ErrSandboxSetup, r.res, err)
		}
	}
	if f.cgroup != "" {
		// bwrap itself and the held init: every later fork lands inside.
		// The init is moved too unless it was born there (bwrap joined
		// before it cloned).
		pids := []int{pid}
		if !f.bwrapJoined {
			pids = append(pids, bwrapPID)
		} else if inCgroup(pid, f.cgroup) {
			pids = nil
		}
		if err := joinPidsCgroup(f.cgroup, pids...); err != nil {
			return pid, fmt.Errorf("%w: %v", ErrSandboxSetup, err)
		}
	}
	if onStart != nil {
		onStart()
	}
	// A launcher closed while the sandbox was held (a server's SIGTERM
	// can land here) killed bubblewrap only: it could not know the init
	// yet. The command must not start; release kills the init.
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return pid, errors.New("session closed")
	}
	if _, err := f.blockW.Write([]byte{1}); err != nil {
		return pid, fmt.Errorf("%w: release sandbox: %v", ErrSandboxSetup, err)
	}
	return pid, nil
}

// end lets a thread that could not leave the session cgroup end (see
// startInCgroup).
func (b *osBackend) end(s *Launcher, sp *spawn) {
	if f := &sp.os; f.stuck != nil {
		close(f.stuck)
	}
}

// startSpawner: a user server's session enters one user namespace from
// now on (where nsenter and prlimit are there: the probe says which bound
// holds); a root server's session makes its pids cgroup now and, on cgroup
// v1, a spawner thread inside it in the background.
func (b *osBackend) startSpawner(s *Launcher) {
	if !s.p.Load().host.RunAsRoot {
		if sessionRlimitMissing() == "" {
			b.sessionNS.Store(true)
		}
		return
	}
	if _, err := PidsCgroup(); err != nil {
		return
	}
	dir, err := b.sessionCgroup(s)
	if err != nil || pidsCtl.v2 {
		return
	}
	b.spawnerOnce.Do(func() {
		b.cleanup.Add(1)
		go func() {
			defer b.cleanup.Done()
			sp, err := newSpawner(dir)
			if err != nil {
				return
			}
			s.mu.Lock()
			closed := s.closed
			if !closed {
				b.spawner.Store(sp)
			}
			s.mu.Unlock()
			if closed {
				sp.stop()
			}
		}()
	})
}

func (b *osBackend) close(s *Launcher) {
	b.closeLandlock(s)
	Phase("close-wait")
	b.cleanup.Wait()
	b.spawnerOnce.Do(func() {}) // no spawner may start after Close
	if sp := b.spawner.Swap(nil); sp != nil {
		sp.stop()
	}
	b.cgMu.Lock()
	dir := b.cg
	b.cg, b.cgClosed = "", true
	b.cgMu.Unlock()
	if dir != "" {
		// Close killed every sandbox it knew; one still held (Close ran
		// from its onStart) is killed here, through the cgroup.
		killCgroup(dir)
		removePidsCgroup(dir)
	}
}

// readChildPID reads bubblewrap's --info-fd stream only as far as the child
// pid: bwrap writes the rest of the object only after the sandbox is set up,
// and waiting for it would stall every spawn. bwrap writes the pid with one
// write(2) well under PIPE_BUF, which a pipe delivers whole, so digits at the
// end of what was read are the whole number.
func readChildPID(r io.Reader) (int, error) {
	buf := make([]byte, 0, 256)
	chunk := make([]byte, 256)
	for len(buf) < 4096 {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if pid, ok := childPID(buf); ok {
			return pid, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no child-pid in bwrap info")
}

// childPID finds `"child-pid"`, optional blanks, a colon, optional blanks
// and digits in b (what the regular expression `"child-pid"\s*:\s*(\d+)`
// matched, without compiling one at every start).
func childPID(b []byte) (int, bool) {
	const key = `"child-pid"`
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte(key))
		if i < 0 {
			return 0, false
		}
		off += i + len(key)
		rest := bytes.TrimLeft(b[off:], " \t\r\n\f\v")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		rest = bytes.TrimLeft(rest[1:], " \t\r\n\f\v")
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 0 {
			continue
		}
		pid, err := strconv.Atoi(string(rest[:n]))
		return pid, err == nil
	}
}

// SealInheritedFDs marks every descriptor above stderr close-on-exec, so
// nothing the server inherited from its own parent reaches a sandbox.
func SealInheritedFDs() error {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// addCacheEnv adds to over the cache variables p's cache mode gives a
// spawn (private caches in the scratch, or the overlays' own), except
// those the command sets itself.
func (s *Launcher) addCacheEnv(p *Policy, l Layout, c Command, over map[string]string) {
	var cacheEnv map[string]string
	switch p.Cache() {
	case CachePrivate:
		cacheEnv = CacheEnv(s.scratch, p.Mode(), envLookup(p.env, "GOPATH"))
	case CacheOverlay:
		cacheEnv = overlayCacheEnv(p, s.scratch, l.CacheRoots)
	}
	for k, v := range cacheEnv {
		if _, set := c.Env[k]; !set {
			over[k] = v
		}
	}
}

// addEgress gives a spawn with the network on the session's egress: the
// bridge's binds in l (each checked to be what it was) and the proxy
// environment in over. Both spawn paths use it.
func (s *Launcher) addEgress(l *Layout, over map[string]string) error {
	s.mu.Lock()
	eg, exe := s.egress, s.exe
	s.mu.Unlock()
	if eg == nil {
		return fmt.Errorf("%w: the network is on but no egress proxies run for this session", ErrSandboxSetup)
	}
	for _, src := range []string{exe, eg.HTTPSocket, eg.SOCKSSocket} {
		if k, _ := lstatKind(src); k == PathAbsent || k == PathSymlink || k == PathDir {
			return fmt.Errorf("%w: egress bridge %s is missing or not what it was", ErrUnsafeLayout, src)
		}
	}
	l.Egress = &EgressMounts{Exe: exe, HTTPSocket: eg.HTTPSocket, SOCKSSocket: eg.SOCKSSocket}
	for k, v := range egressEnv(*eg) {
		over[k] = v
	}
	return nil
}
