package confine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A session sandbox (docs/speed.md, "Session sandbox"; experimental, opt-in
// through SessionSandboxEnv): the session's bubblewrap, with the mount
// plan of the spawn's inspection, is built once and kept by a holder
// process, and each command starts inside it with what must stay per call:
// a PID namespace and /proc of its own, the /proc masks, no capabilities,
// no_new_privs, the seccomp filter, the resource limits, the scrubbed
// environment and the working directory (session_sandbox_inside_linux.go).
//
// Never a stale plan: every call inspects the filesystem and computes the
// plan as a per-call bubblewrap would; a plan that differs from the one
// the holder was built with (a nested repository to pin, a credential file
// that appeared, a host socket to mask, a git layout that changed) makes a
// new holder before the command runs. A holder replaced while calls still
// run in it ends when the last of them does.

// sessionBox is one built session sandbox.
type sessionBox struct {
	key    string    // the holder's bubblewrap options and /proc plan
	cmd    *exec.Cmd // the holder's bwrap
	hold   *os.File  // the spawner's stdin: closing it ends the holder
	req    *os.File  // the server's end of the request socket
	exited chan struct{}
	// spawner is the holder's PID 1 (host pid) and mounts the mount IDs of
	// its mount namespace when it was built: a mount detached since (the
	// host renamed or removed what a mask or pin covers, which detaches
	// the mount in every other namespace) makes the holder stale.
	spawner int
	mounts  string
	cgroup  string // the session's pids cgroup each call's slot joins (root servers)

	pidsMu  sync.Mutex // guards pidsMax and orders the writes of pids.max
	pidsMax int64      // the value last written to cgroup's pids.max (0: none yet)

	wmu     sync.Mutex          // guards waiters and early
	waiters map[int]chan uint32 // a running call's slot (pid in the holder) -> its wait status
	// early keeps an end reported before its call awaited it (a slot
	// does not wait for the server, so a quick command can end before the
	// server has read its hello); entries nobody claims within
	// earlyKept (a call the server gave up on) are dropped.
	early map[int]earlyEnd
	gone  chan struct{} // closed when the spawner's reports end
	// Guarded by the launcher's sbMu.
	refs    int  // calls running in it
	retired bool // replaced: ends when refs drops to zero
}

// sessionBoxes is the launcher's session-sandbox state.
type sessionBoxes struct {
	mu     sync.Mutex // guards box and the boxes' refs and retired
	box    *sessionBox
	closed bool
	// server: StartSpawner was called (a server's session, which lives
	// long enough to amortise its holder; a one-shot exec does not).
	server atomic.Bool
}

// sessionEligible says whether c may run in the session sandbox: a
// sandboxed, non-terminal command with no network or the session's
// allowlisted one (the holder's network namespace then runs the relay to
// the session's proxies, and the calls share it). In a session with a
// shared loopback (a terminal started) the holder joins the loopback's
// network namespace, as a per-call spawn would.
func (s *Launcher) sessionEligible(p *Policy, c Command) bool {
	if !sessionSandboxOn() || !s.sb.server.Load() || p.Mode() == ModeOff || p.Backend() == backendLandlock || c.Terminal || c.Network == NetworkHost {
		return false
	}
	n := callNetwork(p, c)
	return n == NetworkOff || n == NetworkOn
}

// callNetwork is the network c gets under p, as prepare resolves it: the
// policy's, unless the command turns it off or asks for the host's.
func callNetwork(p *Policy, c Command) Network {
	if c.Network == NetworkOff || c.Network == NetworkHost {
		return c.Network
	}
	return p.Network()
}

// sessionCall is one call's resolved spawn.
type sessionCall struct {
	holderArgs []string // bubblewrap options of the holder (without its command)
	req        slotRequest
	// relay: the holder's network namespace is shared by its calls and
	// runs the relay to the session's proxies (network on).
	relay bool
	// lb: the holder joins the session loopback's network namespace
	// (loopback_linux.go), shared by its calls, whose holder relays.
	lb *loopback
}

// sessionPrepare is prepare for a call in the session sandbox: the same
// inspection, plan and environment, split into what the holder is built
// with and what the slot applies per call.
func (s *Launcher) sessionPrepare(p *Policy, c Command) (*sessionCall, error) {
	dir, err := s.resolveDir(c.Dir)
	if err != nil {
		return nil, err
	}
	over := map[string]string{"PWD": dir}
	for k, v := range c.Env {
		over[k] = v
	}
	over["TMPDIR"] = s.scratch
	over["EVENER_SCRATCH_DIR"] = s.scratch
	Phase("inspect")
	l, err := Inspect(p, s.scratch, dir)
	if err != nil {
		return nil, err
	}
	Phase("plan")
	l.ScratchParent = s.hideBeside
	network := callNetwork(p, c)
	sc := &sessionCall{}
	s.lbMu.Lock()
	shared := s.lbWanted
	s.lbMu.Unlock()
	if !shared && s.be.sessionNS.Load() && !p.host.RunAsRoot {
		// A user server's session namespaces, made at the first spawn as
		// the per-call path makes them (its holder ends once they are
		// open): the session's per-call spawns enter them.
		if _, _, err := s.sessionHolder(p, false); err != nil {
			return nil, err
		}
	}
	if shared && c.Network != NetworkOff {
		// The session's loopback, as prepare joins it: made on first use;
		// not joined when the policy's network changed since it was made.
		lb, joinNet, err := s.sessionHolder(p, true)
		if err != nil {
			return nil, err
		}
		if joinNet {
			sc.lb = lb
		}
	}
	sc.relay = network == NetworkOn && sc.lb == nil
	if network == NetworkOn {
		// The per-call path's egress (launcher_linux.go's prepare): the
		// same bridge binds and the same environment; the relay runs once
		// in the holder instead of in front of every command.
		if err := s.addEgress(&l, over); err != nil {
			return nil, err
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
	plan := Plan(p, l)
	var box MountPlan
	for _, m := range plan {
		// What lies in /proc is the slot's: its /proc is mounted afresh.
		if m.Kind != MountProc && Within(m.Dst, "/proc") {
			switch m.Kind {
			case MountRemount:
				sc.req.ProcRO = true
			case MountMaskFile, MountMaskDir:
				sc.req.ProcMasks = append(sc.req.ProcMasks, slotMask{Path: m.Dst, Dir: m.Kind == MountMaskDir})
			default:
				return nil, fmt.Errorf("%w: plan entry %s %s has no session-sandbox form", ErrSandboxSetup, m.Kind, m.Dst)
			}
			continue
		}
		box = append(box, m)
	}
	exe, err := relayBinary()
	if err != nil {
		return nil, err
	}
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if sc.lb == nil {
		args = append(args, "--unshare-net")
	}
	// No --die-with-parent: its signal follows the OS thread that
	// started bubblewrap, and Go ends threads (a root server's session
	// cgroup thread, at every session's end), which killed other
	// sessions' holders under their calls. The spawner ends when its
	// stdin closes (the server's Close, or the server's death).
	args = append(args, "--new-session", "--as-pid-1",
		"--cap-add", "ALL", "--hostname", "evener-sandbox", "--info-fd", "3")
	args = append(args, box.Args()...)
	// The spawner and the slots are this binary, at the egress relay's
	// place (the plan binds it there already with the network on).
	if l.Egress == nil {
		args = append(args, "--ro-bind", exe, relayExe)
	}
	args = append(args, "--chdir", "/")
	sc.holderArgs = args
	prog, err := SeccompProgram()
	if err != nil {
		return nil, err
	}
	lim := p.Limits()
	landlock := ""
	if landlockOn(p) {
		r := RulesForLandlock(p, l, network)
		r.HostNetNS = hostNetNS()
		landlock = r.Encode()
	}
	sc.req = slotRequest{
		Landlock: landlock,
		Args:     c.Args, Dir: dir, Seccomp: prog, ProcMasks: sc.req.ProcMasks, ProcRO: sc.req.ProcRO,
		Env: EnvFloor(p.env, s.envPass, p.Mode(), over, grantedRoots(p)),
		Limits: [][2]uint64{
			{unix.RLIMIT_NOFILE, limitValue(unix.RLIMIT_NOFILE, lim.OpenFiles)},
			{unix.RLIMIT_NPROC, limitValue(unix.RLIMIT_NPROC, lim.Procs)},
			{unix.RLIMIT_FSIZE, limitValue(unix.RLIMIT_FSIZE, lim.FileBytes)},
			{unix.RLIMIT_DATA, limitValue(unix.RLIMIT_DATA, lim.DataBytes)},
			{unix.RLIMIT_CORE, 0},
		},
	}
	return sc, nil
}

// limitValue is v, never above the hard limit the server itself got.
func limitValue(res int, v int64) uint64 {
	var cur unix.Rlimit
	if unix.Getrlimit(res, &cur) == nil && cur.Max < uint64(v) {
		return cur.Max
	}
	return uint64(v)
}

// sessionKey names a holder's plan: the options it is built with and the
// per-call /proc plan.
func sessionKey(sc *sessionCall) string {
	var b strings.Builder
	for _, a := range sc.holderArgs {
		b.WriteString(a)
		b.WriteByte(0)
	}
	for _, m := range sc.req.ProcMasks {
		fmt.Fprintf(&b, "%s %v\x00", m.Path, m.Dir)
	}
	fmt.Fprintf(&b, "ro=%v relay=%v loopback=%v", sc.req.ProcRO, sc.relay, sc.lb != nil)
	return b.String()
}

// acquireBox returns a running holder built with sc's plan, building one
// (and retiring the current one) when the plan changed; the caller
// releases it.
func (s *Launcher) acquireBox(p *Policy, sc *sessionCall) (*sessionBox, error) {
	key := sessionKey(sc)
	s.sb.mu.Lock()
	defer s.sb.mu.Unlock()
	if s.sb.closed {
		return nil, errors.New("session closed")
	}
	if b := s.sb.box; b != nil {
		alive := true
		select {
		case <-b.exited:
			alive = false
		default:
		}
		if alive && b.key == key && b.mountsIntact() {
			b.refs++
			return b, nil
		}
		s.retireLocked(b)
		s.sb.box = nil
	}
	Phase("holder-build")
	b, err := s.buildBox(p, sc, key)
	if err != nil {
		return nil, err
	}
	s.sb.box = b
	b.refs++
	return b, nil
}

// releaseBox drops a call's hold on b.
func (s *Launcher) releaseBox(b *sessionBox) {
	s.sb.mu.Lock()
	b.refs--
	end := b.retired && b.refs == 0
	s.sb.mu.Unlock()
	if end {
		b.end()
	}
}

// retireLocked marks b replaced, ending it now if no call runs in it.
// Called with sb.mu held.
func (s *Launcher) retireLocked(b *sessionBox) {
	b.retired = true
	if b.refs == 0 {
		go b.end()
	}
}

// buildBox starts a holder with sc's options and waits for its spawner.
func (s *Launcher) buildBox(p *Policy, sc *sessionCall, key string) (*sessionBox, error) {
	exe := relayExe
	pp, err := json.Marshal(procPlan{Masks: sc.req.ProcMasks, ReadOnly: sc.req.ProcRO, Relay: sc.relay, SharedNet: sc.relay || sc.lb != nil})
	if err != nil {
		return nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: request socket: %v", ErrSandboxSetup, err)
	}
	reqS, reqH := os.NewFile(uintptr(pair[0]), "session-req"), os.NewFile(uintptr(pair[1]), "session-req")
	infoR, infoW, err := os.Pipe()
	if err != nil {
		reqS.Close()
		reqH.Close()
		return nil, err
	}
	defer infoR.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		reqS.Close()
		reqH.Close()
		infoW.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		reqS.Close()
		reqH.Close()
		infoW.Close()
		inR.Close()
		inW.Close()
		return nil, err
	}
	args := append(append([]string{"bwrap"}, sc.holderArgs...), "--", exe, SpawnerSubcommand, string(pp))
	path := p.host.Bwrap
	var opts []string
	if sc.lb != nil {
		// In the session loopback's network namespace (and, for a user
		// server, its user namespace, which owns it), as a per-call
		// spawn enters them.
		var at int
		path, args, at = sc.lb.wrap(path, args, true)
		if sc.lb.userNS != nil {
			// In the session's user namespace the whole session counts
			// against one procs (loopback_linux.go): the holder's
			// bubblewrap gets RLIMIT_NPROC = procs before it makes its
			// namespace, reading its options from a pipe filled after
			// prlimit(2), as a per-call spawn's does.
			opts = args[at+1 : at+1+len(sc.holderArgs)]
			args = append(append(args[:at+1:at+1], "--args", "5"), args[at+1+len(sc.holderArgs):]...)
		}
	}
	var optsR, optsW *os.File
	files := []*os.File{infoW, reqH}
	if opts != nil {
		if optsR, optsW, err = os.Pipe(); err != nil {
			reqS.Close()
			reqH.Close()
			infoW.Close()
			inR.Close()
			inW.Close()
			outR.Close()
			outW.Close()
			return nil, fmt.Errorf("%w: options pipe: %v", ErrSandboxSetup, err)
		}
		files = append(files, optsR)
	}
	// No parent-death signal (it follows the forking thread, which Go may
	// end): the holder ends when its stdin closes (the server's Close, or
	// the server's death).
	cmd := &exec.Cmd{Path: path, Args: args, Dir: "/", Env: []string{"PATH=/usr/bin:/bin", "GOMAXPROCS=1", "GOGC=400"},
		Stdin: inR, Stdout: outW, Stderr: os.Stderr, ExtraFiles: files}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	infoW.Close()
	reqH.Close()
	if optsR != nil {
		optsR.Close()
		if err == nil {
			if err = limitThenRelease(cmd.Process.Pid, p.Limits().Procs, opts, optsW); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		} else {
			optsW.Close()
		}
	}
	if err != nil {
		inW.Close()
		reqS.Close()
		outR.Close()
		return nil, fmt.Errorf("%w: start the session sandbox: %v", ErrSandboxSetup, err)
	}
	b := &sessionBox{key: key, cmd: cmd, hold: inW, req: reqS, exited: make(chan struct{}),
		waiters: map[int]chan uint32{}, gone: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	type ready struct {
		pid int
		err error
	}
	got := make(chan ready, 1)
	go func() {
		defer outR.Close()
		defer close(b.gone)
		br := bufio.NewReader(outR)
		pid, err := readChildPID(infoR)
		if err == nil {
			var line string
			line, err = br.ReadString('\n')
			if err == nil && strings.TrimSpace(line) != "ready" {
				err = fmt.Errorf("spawner said %q", strings.TrimSpace(line))
			}
		}
		got <- ready{pid, err}
		if err == nil {
			b.readReports(br)
		}
	}()
	var r ready
	select {
	case r = <-got:
	case <-time.After(loopbackReadyTimeout):
		r.err = errors.New("the spawner did not report ready")
	}
	if r.err == nil && p.host.RunAsRoot {
		// RLIMIT_NPROC does not bind host uid 0: the session's pids
		// cgroup does, joined before any slot exists.
		if _, perr := PidsCgroup(); perr == nil {
			// The holder joins it once, before any slot exists: every
			// slot is born inside (a migration per call would cost
			// milliseconds on cgroup v1). Its pids.max is procs plus the
			// holder's own tasks (set at each call).
			if b.cgroup, r.err = s.be.sessionCgroup(s); r.err == nil {
				r.err = joinPidsCgroup(b.cgroup, cmd.Process.Pid, r.pid)
			}
		}
	}
	if r.err == nil {
		b.spawner = r.pid
		b.mounts, r.err = mountIDs(r.pid)
	}
	if r.err == nil {
		_, r.err = inW.Write([]byte{'g'})
	}
	if r.err != nil {
		b.end()
		return nil, fmt.Errorf("%w: the session sandbox: %v", ErrSandboxSetup, r.err)
	}
	return b, nil
}

// readReports delivers the spawner's "pid status" lines to the calls
// waiting for them.
func (b *sessionBox) readReports(br *bufio.Reader) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, e1 := strconv.Atoi(f[0])
		ws, e2 := strconv.ParseUint(f[1], 10, 32)
		if e1 != nil || e2 != nil {
			continue
		}
		b.wmu.Lock()
		ch := b.waiters[pid]
		delete(b.waiters, pid)
		if ch == nil {
			now := time.Now()
			for p, e := range b.early {
				if now.Sub(e.at) > earlyKept {
					delete(b.early, p)
				}
			}
			if b.early == nil {
				b.early = make(map[int]earlyEnd)
			}
			b.early[pid] = earlyEnd{ws: uint32(ws), at: now}
		}
		b.wmu.Unlock()
		if ch != nil {
			ch <- uint32(ws)
		}
	}
}

// await registers a call's slot (its pid in the holder's PID namespace).
func (b *sessionBox) await(pid int) chan uint32 {
	ch := make(chan uint32, 1)
	b.wmu.Lock()
	if e, ok := b.early[pid]; ok {
		delete(b.early, pid)
		ch <- e.ws
	} else {
		b.waiters[pid] = ch
	}
	b.wmu.Unlock()
	return ch
}

// earlyEnd is a slot's end reported before its call awaited it.
type earlyEnd struct {
	ws uint32
	at time.Time
}

// earlyKept bounds how long an unclaimed early end is kept. A call claims
// its own within the moment between its slot's hello and the server
// reading it; a pid is reused in the holder's PID namespace only after
// tens of thousands of starts, never within this.
const earlyKept = time.Minute

// setPidsMax writes v to the session cgroup's pids.max unless it holds v
// already (a cgroupfs write on every call was a measurable part of a root
// server's call: docs/speed.md).
func (b *sessionBox) setPidsMax(v int64) error {
	b.pidsMu.Lock()
	defer b.pidsMu.Unlock()
	if b.pidsMax == v {
		return nil
	}
	if err := os.WriteFile(filepath.Join(b.cgroup, "pids.max"), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
		b.pidsMax = 0
		return err
	}
	b.pidsMax = v
	return nil
}

// holderTasks counts the spawner's tasks: what
// of the holder always counts against the session's bound. The idle
// slots are not added (they come and go, and a bound fitted to them would
// be too wide while the spawner cannot replace one): the commands' share
// is procs less the idle slots' few tasks, never more than procs
// (docs/speed.md).
func (b *sessionBox) holderTasks() int {
	tids, _ := os.ReadDir("/proc/" + strconv.Itoa(b.spawner) + "/task")
	return len(tids)
}

// mountsIntact reports whether every mount the holder was built with is
// still there.
func (b *sessionBox) mountsIntact() bool {
	m, err := mountIDs(b.spawner)
	return err == nil && m == b.mounts
}

// mountIDs lists the mount IDs of pid's mount namespace, in order.
func mountIDs(pid int) (string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return "", fmt.Errorf("the holder's mounts: %w", err)
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(data), "\n") {
		if id, _, ok := strings.Cut(line, " "); ok {
			b.WriteString(id)
			b.WriteByte(' ')
		}
	}
	return b.String(), nil
}

// end ends the holder (every call still in it dies with its PID
// namespace) and waits for it.
func (b *sessionBox) end() {
	b.hold.Close()
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.req.Close()
}

// closeBoxes ends the session's holders (Close).
func (s *Launcher) closeBoxes() {
	s.sb.mu.Lock()
	s.sb.closed = true
	b := s.sb.box
	s.sb.box = nil
	s.sb.mu.Unlock()
	if b != nil {
		b.end()
	}
}

// runSession runs c in the session sandbox; ok is false when c is not
// eligible (Run then starts a bubblewrap of its own).
func (s *Launcher) runSession(ctx context.Context, c Command, began time.Time) (res Result, ok bool, err error) {
	p := s.p.Load()
	if !s.sessionEligible(p, c) || len(c.Args) == 0 {
		return Result{}, false, nil
	}
	Phase("prepare")
	sc, err := s.sessionPrepare(p, c)
	if err != nil {
		return Result{ExitCode: -1}, true, err
	}
	b, err := s.acquireBox(p, sc)
	if errors.Is(err, ErrSandboxSetup) {
		// A host socket of the plan may have vanished before bubblewrap
		// mounted over it (launcher_retry.go): inspect and build again,
		// once.
		if sc, err = s.sessionPrepare(p, c); err == nil {
			b, err = s.acquireBox(p, sc)
		}
	}
	if err != nil {
		return Result{ExitCode: -1}, true, err
	}
	defer s.releaseBox(b)
	res, err = s.callIn(ctx, b, sc, c, began)
	return res, true, err
}

// callIn sends one call to b's slots and waits for it.
func (s *Launcher) callIn(ctx context.Context, b *sessionBox, sc *sessionCall, c Command, began time.Time) (Result, error) {
	Phase("start")
	fail := func(err error) (Result, error) { return Result{ExitCode: -1}, err }
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("%w: control socket: %v", ErrSandboxSetup, err))
	}
	if err := unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
		return fail(fmt.Errorf("%w: control socket: %v", ErrSandboxSetup, err))
	}
	ctlF := os.NewFile(uintptr(pair[0]), "session-ctl")
	conn, err := net.FileConn(ctlF)
	ctlF.Close()
	if err != nil {
		unix.Close(pair[1])
		return fail(fmt.Errorf("%w: control socket: %v", ErrSandboxSetup, err))
	}
	ctl := conn.(*net.UnixConn)
	defer ctl.Close()
	st, err := newStdio(c)
	if err != nil {
		unix.Close(pair[1])
		return fail(err)
	}
	defer st.closeParent()
	rq := sc.req
	rq.ProcMasks, rq.ProcRO = nil, false // the holder's, applied by each slot ahead
	rq.Nproc = -1
	if b.cgroup != "" || !s.p.Load().host.RunAsRoot {
		// The session's bound (a user server's RLIMIT_NPROC in the
		// holder's user namespace, a root server's pids cgroup) counts
		// the holder's own tasks too: the spawner's are added to procs
		// (and the holder's bwrap, in a root server's cgroup). Set
		// before the call is sent: the slot does not wait.
		reserve := b.holderTasks()
		procs := s.p.Load().Limits().Procs
		if b.cgroup != "" {
			if err := b.setPidsMax(procs + int64(reserve) + 1); err != nil {
				unix.Close(pair[1])
				st.closeChild()
				return fail(fmt.Errorf("%w: set pids.max: %v", ErrSandboxSetup, err))
			}
		} else {
			rq.Nproc = int64(min(uint64(procs)+uint64(reserve), limitValue(unix.RLIMIT_NPROC, 1<<40)))
		}
	}
	payload, err := json.Marshal(rq)
	if err != nil {
		unix.Close(pair[1])
		st.closeChild()
		return fail(err)
	}
	rights := unix.UnixRights(pair[1], int(st.child[0].Fd()), int(st.child[1].Fd()), int(st.child[2].Fd()))
	err = unix.Sendmsg(int(b.req.Fd()), payload, rights, nil, 0)
	unix.Close(pair[1])
	st.closeChild()
	if err != nil {
		return fail(fmt.Errorf("%w: send the call to the session sandbox: %v", ErrSandboxSetup, err))
	}
	// The slot answers with its credentials: its pid in the server's PID
	// namespace, the call's init. It does not wait for the server: the
	// command may be running (or over) by the time this is read, and its
	// end is kept for the await below (readReports).
	_ = ctl.SetReadDeadline(time.Now().Add(loopbackReadyTimeout))
	msg := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, err := ctl.ReadMsgUnix(msg, oob)
	if err != nil || n == 0 {
		// Closing ctl (deferred) tells a slot that took the call late
		// not to start it (execConfined). A holder with no slot to take
		// a call while no other call runs in it is of no use to the next
		// one: it is replaced. With other calls running, their processes
		// may hold the session's bound (a slot then cannot start, and the
		// spawner starts one once they end): a new holder there would be
		// a new user namespace, a second bound for a user server.
		s.sb.mu.Lock()
		if s.sb.box == b && b.refs == 1 {
			s.retireLocked(b)
			s.sb.box = nil
		}
		s.sb.mu.Unlock()
		return fail(fmt.Errorf("%w: the session sandbox did not take the call: %v", ErrSandboxSetup, err))
	}
	if msg[0] == slotFail {
		return fail(fmt.Errorf("%w: %s", ErrSandboxSetup, msg[1:n]))
	}
	pid, err := credPID(oob[:oobn])
	if err != nil || msg[0] != slotHello {
		return fail(fmt.Errorf("%w: the session sandbox's answer: %v", ErrSandboxSetup, err))
	}
	_ = ctl.SetReadDeadline(time.Time{})
	hpid, err := strconv.Atoi(string(msg[1:n]))
	if err != nil || hpid <= 1 {
		_ = unix.Kill(pid, unix.SIGKILL)
		return fail(fmt.Errorf("%w: the call's slot: no pid in the holder (%q)", ErrSandboxSetup, msg[1:n]))
	}
	ended := b.await(hpid)
	sp := &spawn{cmd: &exec.Cmd{}, sandboxed: true, began: began, pid: pid}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = unix.Kill(pid, unix.SIGKILL)
		return fail(errors.New("session closed"))
	}
	s.running[sp] = struct{}{}
	observe := s.onStarted
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, sp)
		s.mu.Unlock()
	}()
	if c.OnStart != nil {
		c.OnStart()
	}
	start := time.Now()
	st.startCopies()
	if observe != nil {
		observe(time.Since(began))
	}
	Phase("wait")
	// The control socket closes when the slot execs the command (it is
	// close-on-exec) or says why it could not.
	failed := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 4096)
		n, _ := ctl.Read(buf)
		failed <- buf[:max(n, 0)]
	}()
	var res Result
	var ws uint32
	status := false
	select {
	case ws = <-ended:
		status = true
	case <-b.gone:
	case <-ctx.Done():
		s.mu.Lock()
		killTree(sp)
		s.mu.Unlock()
		select {
		case ws = <-ended:
			status = true
		case <-b.gone:
		}
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	st.wait(outputDrain)
	Phase("waited")
	res.Duration = time.Since(start)
	if msg := <-failed; len(msg) > 0 && msg[0] == slotFail {
		return Result{ExitCode: -1}, fmt.Errorf("%w: %s", ErrSandboxSetup, msg[1:])
	}
	w := syscall.WaitStatus(ws)
	switch {
	case !status:
		// The holder ended under the call (Close).
		res.Signal = syscall.SIGKILL.String()
		res.ExitCode = 128 + int(syscall.SIGKILL)
	case w.Signaled():
		res.Signal = w.Signal().String()
		res.ExitCode = 128 + int(w.Signal())
	default:
		res.ExitCode = w.ExitStatus()
	}
	return res, nil
}

// outputDrain bounds the wait for a call's output once the call ended.
// Every writer is gone by then (the call's PID namespace ends with its
// init), so the copies end as soon as they read what is left in the
// pipes; the bound matters only when the server is starved. At 2 s a
// loaded machine (100 sessions, an `echo` taking 2.3 s) returned one
// call's output empty (TestHTTPLoad).
const outputDrain = 10 * time.Second

// credPID is the sender's pid of an SCM_CREDENTIALS message.
func credPID(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if c, err := unix.ParseUnixCredentials(&m); err == nil && c.Pid > 0 {
			return int(c.Pid), nil
		}
	}
	return 0, errors.New("no credentials")
}

// callStdio is a call's three standard descriptors: the child's ends and,
// for a writer or reader of the caller's that is not a file, the pipe and
// its copy.
type callStdio struct {
	child  [3]*os.File
	own    [3]bool // child[i] is a pipe end (or /dev/null) made here
	copies []func()
	wg     sync.WaitGroup
	parent []*os.File // our ends of the pipes, closed at the end
}

func newStdio(c Command) (*callStdio, error) {
	st := &callStdio{}
	if f, ok := c.Stdin.(*os.File); ok {
		st.child[0] = f
	} else if c.Stdin == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		st.child[0], st.own[0] = f, true
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		st.child[0], st.own[0] = r, true
		st.parent = append(st.parent, w)
		in := c.Stdin
		st.copies = append(st.copies, func() {
			_, _ = io.Copy(w, in)
			w.Close()
		})
	}
	outs := []io.Writer{c.Stdout, c.Stderr}
	for i, wr := range outs {
		if i == 1 && c.Stderr != nil && c.Stderr == c.Stdout {
			st.child[2] = st.child[1]
			continue
		}
		if f, ok := wr.(*os.File); ok {
			st.child[i+1] = f
			continue
		}
		if wr == nil {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				st.closeChild()
				st.closeParent()
				return nil, err
			}
			st.child[i+1], st.own[i+1] = f, true
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			st.closeChild()
			st.closeParent()
			return nil, err
		}
		st.child[i+1], st.own[i+1] = w, true
		st.parent = append(st.parent, r)
		st.wg.Add(1)
		st.copies = append(st.copies, func() {
			defer st.wg.Done()
			_, _ = io.Copy(wr, r)
		})
	}
	return st, nil
}

// startCopies starts copying between the caller's streams and the pipes.
func (st *callStdio) startCopies() {
	for _, f := range st.copies {
		go f()
	}
}

// wait waits for the output copies, at most delay (a descriptor passed on
// to another call of the session could keep a pipe open).
func (st *callStdio) wait(delay time.Duration) {
	done := make(chan struct{})
	go func() { st.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(delay):
	}
}

func (st *callStdio) closeChild() {
	for i, f := range st.child {
		if f != nil && st.own[i] && (i != 2 || st.child[2] != st.child[1]) {
			f.Close()
		}
	}
}

func (st *callStdio) closeParent() {
	for _, f := range st.parent {
		f.Close()
	}
}
