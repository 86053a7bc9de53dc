package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Launcher is one sandbox session: a policy, a private scratch directory and
// the processes started under it. Every process the server starts goes
// through Launcher.Run.
type Launcher struct {
	p       atomic.Pointer[Policy]
	scratch string

	mu      sync.Mutex
	running map[*exec.Cmd]int // bwrap command -> sandbox init pid (0 until known)
	closed  bool
	// EnvPassthrough are extra variable names a trusted layer lets through.
	envPass []string
	// hideBeside is the server-private parent of the scratch, hidden in
	// every sandbox but for the scratch itself ("" when not isolated).
	hideBeside string
	// cleanup counts per-spawn cgroups still being removed; Close waits.
	cleanup sync.WaitGroup
	// spawner, once ready, starts this session's sandboxes inside its
	// pids cgroup (root servers on cgroup v1; see StartSpawner).
	spawner     atomic.Pointer[spawner]
	spawnerOnce sync.Once
	egress      *EgressBridge
	exe         string // this binary, for the egress relay
}

// SetEgress hands the launcher the bridge to the session's proxies. With
// the network on, a sandboxed spawn without one is refused.
func (s *Launcher) SetEgress(b EgressBridge) error {
	exe, err := relayBinary()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.egress, s.exe = &b, exe
	return nil
}

// NewLauncherUnder is NewSession with the scratch created in parent, a
// directory private to one server that holds the scratch of each of its
// sessions: the session's sandboxes see parent as an empty directory but
// for their own scratch (sibling sessions' scratch and bridge sockets are
// hidden). "" is NewSession.
func NewLauncherUnder(p *Policy, envPassthrough []string, parent string) (*Launcher, error) {
	root := p.ScratchRoot()
	if root == "" {
		root = os.TempDir()
	}
	if parent != "" {
		root = parent
	}
	dir, err := os.MkdirTemp(root, "evener-mcp-")
	if err != nil {
		return nil, fmt.Errorf("create scratch: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("resolve scratch: %w", err)
	}
	if p.Mode() != ModeOff && underAny(dir, p.WriteRoots()) {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("scratch %s lies inside a write root; set TMPDIR elsewhere", dir)
	}
	if err := sealOnce(); err != nil {
		return nil, fmt.Errorf("seal inherited descriptors: %w", err)
	}
	s := &Launcher{scratch: dir, running: map[*exec.Cmd]int{}, envPass: envPassthrough}
	if parent != "" {
		s.hideBeside = filepath.Dir(dir)
	}
	s.p.Store(p)
	return s, nil
}

// Close kills every process still running under the session and removes
// its scratch directory.
func (s *Launcher) Close() error {
	s.mu.Lock()
	s.closed = true
	for c, pid := range s.running {
		killTree(c, pid)
	}
	s.mu.Unlock()
	s.cleanup.Wait()
	s.spawnerOnce.Do(func() {}) // no spawner may start after Close
	if sp := s.spawner.Swap(nil); sp != nil {
		sp.stop()
	}
	return removeAllForce(s.scratch)
}

// Prepare resolves c against the policy: working directory, mount plan,
// environment floor and the bubblewrap argv.
func (s *Launcher) Prepare(c Command) (*Prepared, error) {
	p, dir, over, off, err := s.prepareCommon(c)
	if err != nil || off != nil {
		return off, err
	}
	l, err := Inspect(p, s.scratch, dir)
	if err != nil {
		return nil, err
	}
	l.ScratchParent = s.hideBeside
	cmdArgs := c.Args
	if p.Network() == NetworkOn {
		s.mu.Lock()
		eg, exe := s.egress, s.exe
		s.mu.Unlock()
		if eg == nil {
			return nil, fmt.Errorf("%w: the network is on but no egress proxies run for this session", ErrSandboxSetup)
		}
		for _, src := range []string{exe, eg.HTTPSocket, eg.SOCKSSocket} {
			if k, _ := lstatKind(src); k == PathAbsent || k == PathSymlink || k == PathDir {
				return nil, fmt.Errorf("%w: egress bridge %s is missing or not what it was", ErrUnsafeLayout, src)
			}
		}
		l.Egress = &EgressMounts{Exe: exe, HTTPSocket: eg.HTTPSocket, SOCKSSocket: eg.SOCKSSocket}
		for k, v := range egressEnv(*eg) {
			over[k] = v
		}
		cmdArgs = append([]string{relayExe, RelaySubcommand, "--"}, c.Args...)
	}
	cacheEnv := map[string]string{}
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
	plan := Plan(p, l)
	args := []string{"bwrap",
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns", "--assert-userns-disabled", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--hostname", "evener-sandbox",
		"--seccomp", "3", "--info-fd", "4", "--block-fd", "5",
		// Always a network namespace of its own: with the network on, the
		// only way out is the egress bridge.
		"--unshare-net",
	}
	args = append(args, plan.Args()...)
	args = append(args, "--chdir", dir, "--")
	args = append(args, cmdArgs...)
	// KUBECONFIG survives only inside a granted root: the worktree and the
	// extra roots in every mode.
	granted := []string{p.Workdir()}
	if p.Mode() != ModeRestricted {
		granted = append(granted, p.AddDirs()...)
	}
	env := EnvFloor(p.env, s.envPass, p.Mode(), over, granted)
	return &Prepared{Path: p.host.Bwrap, Args: args, Env: env, Dir: dir, Plan: plan, Sandboxed: true}, nil
}

// Run starts c under the policy and waits for it. A timeout or a cancelled
// ctx kills the whole tree: the sandbox's PID namespace dies with its init.
func (s *Launcher) Run(ctx context.Context, c Command) (res Result, err error) {
	// After the spawn, whatever it ran, the git sweep sets aside any
	// repository it left for the user's git to run (gitsweep.go).
	sw, err := s.sweepBegin()
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	defer func() { res.Quarantined = sw.end() }()
	pr, err := s.Prepare(c)
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	cmd := &exec.Cmd{Path: pr.Path, Args: pr.Args, Env: pr.Env, Dir: pr.Dir,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, WaitDelay: 2 * time.Second}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if !pr.Sandboxed {
		cmd.SysProcAttr.Setpgid = true
		if c.OnStart != nil {
			c.OnStart()
		}
		return s.wait(ctx, cmd, nil, nil)
	}
	cmd.Dir = "/"
	files, err := s.sandboxFiles()
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	cmd.ExtraFiles = []*os.File{files.seccompR, files.infoW, files.blockR}
	return s.wait(ctx, cmd, files, c.OnStart)
}

type spawnFiles struct {
	seccompR, infoR, infoW, blockR, blockW *os.File
	cgroup                                 string   // pids cgroup of a root server's spawn
	bwrapJoined                            bool     // bwrap was moved into it right after start
	spawner                                *spawner // bwrap is started by it, born in its cgroup
}

// StartSpawner prepares, in the background, a thread that starts this
// session's sandboxes inside one session pids cgroup, so later spawns pay
// no cgroup migration. For long-lived sessions of a root server on cgroup
// v1; elsewhere, or until it is ready, spawns use a cgroup per spawn.
// Close stops it.
func (s *Launcher) StartSpawner() {
	if !s.p.Load().host.RunAsRoot {
		return
	}
	s.spawnerOnce.Do(func() {
		s.cleanup.Add(1)
		go func() {
			defer s.cleanup.Done()
			sp, err := newSpawner(s.p.Load().Limits().Procs)
			if err != nil {
				return
			}
			s.mu.Lock()
			closed := s.closed
			if !closed {
				s.spawner.Store(sp)
			}
			s.mu.Unlock()
			if closed {
				sp.stop()
			}
		}()
	})
}

func (f *spawnFiles) closeChildEnds() {
	f.seccompR.Close()
	f.infoW.Close()
	f.blockR.Close()
}

func (s *Launcher) sandboxFiles() (*spawnFiles, error) {
	prog, err := SeccompProgram()
	if err != nil {
		return nil, err
	}
	f := &spawnFiles{}
	var w *os.File
	if f.seccompR, w, err = os.Pipe(); err != nil {
		return nil, err
	}
	if _, err := w.Write(prog); err != nil {
		w.Close()
		return nil, fmt.Errorf("write seccomp program: %w", err)
	}
	w.Close()
	if f.infoR, f.infoW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if f.blockR, f.blockW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if s.p.Load().host.RunAsRoot {
		// RLIMIT_NPROC does not bind host uid 0; a pids cgroup does.
		// Where no pids controller can be used (a container with a
		// read-only cgroupfs, say) the spawn goes ahead without a process
		// cap; the probe reports it as "process limit: none".
		if sp := s.spawner.Load(); sp != nil {
			f.cgroup, f.spawner, f.bwrapJoined = sp.dir, sp, true
		} else if f.cgroup, err = newPidsCgroup(s.p.Load().Limits().Procs); err != nil {
			f.cgroup = ""
		}
	}
	return f, nil
}

func (s *Launcher) wait(ctx context.Context, cmd *exec.Cmd, f *spawnFiles, onStart func()) (Result, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Result{ExitCode: -1}, errors.New("session closed")
	}
	start := time.Now()
	var err error
	if f != nil && f.spawner != nil {
		err = f.spawner.start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		s.mu.Unlock()
		if f != nil {
			f.closeChildEnds()
			f.infoR.Close()
			f.blockW.Close()
		}
		return Result{ExitCode: -1}, fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	s.running[cmd] = 0
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, cmd)
		s.mu.Unlock()
	}()

	if f != nil {
		f.closeChildEnds()
		if f.cgroup != "" && f.spawner == nil {
			// Removed off the result's path: the kernel may take a few
			// milliseconds to release the last exited task.
			s.cleanup.Add(1)
			defer func() {
				go func() {
					defer s.cleanup.Done()
					removePidsCgroup(f.cgroup)
				}()
			}()
			// Move bwrap now, while it is still starting: the migration
			// (which can wait for an RCU grace period) overlaps its start,
			// and the sandbox it clones is born inside. release checks.
			f.bwrapJoined = joinPidsCgroup(f.cgroup, cmd.Process.Pid) == nil
		}
		pid, err := s.release(cmd.Process.Pid, f, onStart)
		if err != nil {
			// Kill before the block pipe closes: bwrap treats EOF on it as
			// the go-ahead.
			killTree(cmd, pid)
			f.blockW.Close()
			_ = cmd.Wait()
			if errors.Is(err, unix.ESRCH) && cmd.ProcessState != nil {
				// The sandbox vanished before it was released: say how
				// bubblewrap itself ended (a rare failure under load,
				// not yet explained).
				err = fmt.Errorf("%w (bubblewrap: %s)", err, cmd.ProcessState)
			}
			return Result{ExitCode: -1}, err
		}
		f.blockW.Close()
		s.mu.Lock()
		s.running[cmd] = pid
		s.mu.Unlock()
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var res Result
	select {
	case err = <-done:
	case <-ctx.Done():
		s.mu.Lock()
		killTree(cmd, s.running[cmd])
		s.mu.Unlock()
		err = <-done
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	res.Duration = time.Since(start)
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
		res.ExitCode = 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, err
	}
	return res, nil
}

// release reads bubblewrap's info (the sandbox init's host pid), applies the
// resource limits to it before it execs the command, then lets it go. The
// caller closes the block pipe, after killing the spawn if release failed.
func (s *Launcher) release(bwrapPID int, f *spawnFiles, onStart func()) (int, error) {
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
	info := struct{ ChildPID int }{pid}
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
		if err := unix.Prlimit(info.ChildPID, r.res, nil, &cur); err != nil {
			return info.ChildPID, fmt.Errorf("%w: read resource limit %d: %w", ErrSandboxSetup, r.res, err)
		}
		// Never above the hard limit the server itself got: lowering is
		// always allowed, raising is not.
		v := min(uint64(r.v), cur.Max)
		rl := unix.Rlimit{Cur: v, Max: v}
		if err := unix.Prlimit(info.ChildPID, r.res, &rl, nil); err != nil {
			return info.ChildPID, fmt.Errorf("%w: set resource limit %d: %v", ErrSandboxSetup, r.res, err)
		}
	}
	if f.cgroup != "" {
		// bwrap itself and the held init: every later fork lands inside.
		// The init is moved too unless it was born there (bwrap joined
		// before it cloned).
		pids := []int{info.ChildPID}
		if !f.bwrapJoined {
			pids = append(pids, bwrapPID)
		} else if inCgroup(info.ChildPID, f.cgroup) {
			pids = nil
		}
		if err := joinPidsCgroup(f.cgroup, pids...); err != nil {
			return info.ChildPID, fmt.Errorf("%w: %v", ErrSandboxSetup, err)
		}
	}
	if onStart != nil {
		onStart()
	}
	if _, err := f.blockW.Write([]byte{1}); err != nil {
		return info.ChildPID, fmt.Errorf("%w: release sandbox: %v", ErrSandboxSetup, err)
	}
	return info.ChildPID, nil
}

var childPIDRE = regexp.MustCompile(`"child-pid"\s*:\s*(\d+)`)

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
		if m := childPIDRE.FindSubmatch(buf); m != nil {
			return strconv.Atoi(string(m[1]))
		}
		if err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no child-pid in bwrap info")
}

// killTree kills a spawn and everything below it. For a sandbox, killing
// its PID-namespace init kills every process in the namespace, including
// children that detached with setsid; bwrap then exits.
func killTree(cmd *exec.Cmd, initPID int) {
	if initPID > 0 {
		_ = unix.Kill(initPID, unix.SIGKILL)
	}
	if cmd.Process != nil {
		if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		}
		_ = cmd.Process.Kill()
	}
}

var sealOnce = sync.OnceValue(SealInheritedFDs)

// SealInheritedFDs marks every descriptor above stderr close-on-exec, so
// nothing the server inherited from its own parent reaches a sandbox.
func SealInheritedFDs() error {
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}
