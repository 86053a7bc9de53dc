package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Launcher starts every process of one sandbox session (package session
// owns the session): it holds the policy, a private scratch directory and
// the processes started under it. Every process the server starts goes
// through Launcher.Run.
//
// One Launcher serves every OS. What differs is its backend (osBackend, one
// per build): launcher_linux.go starts bubblewrap, launcher_darwin.go
// sandbox-exec, launcher_other.go nothing. The Launcher itself keeps the
// scratch, the policy and its narrowing, the table of running processes,
// Close, and the steps every Run takes: the git sweep around the spawn, the
// common part of Prepare, the start under the lock, the wait, the timeout
// and the result.
type Launcher struct {
	p       atomic.Pointer[Policy]
	scratch string
	envPass []string // extra variable names a trusted layer lets through
	// hideBeside is the server-private parent of the scratch, hidden in
	// every sandbox but for the scratch itself ("" when not isolated).
	hideBeside string

	mu      sync.Mutex // guards what follows, and the backend's egress state
	running map[*spawn]struct{}
	closed  bool
	egress  *EgressBridge
	exe     string // this binary: the egress relay (Linux), the connect helper (macOS)
	agent   string // the host path of the session's SSH agent socket (SetAgent), "" for none
	// onStarted, when set, receives each sandboxed spawn's start latency
	// (SetStartObserver).
	onStarted func(time.Duration)

	be osBackend
	// keep, set by KeepScratch, makes Close leave the scratch in place
	// (a session persisted across a server restart, launcher_persist.go).
	keep atomic.Bool

	lbMu     sync.Mutex // guards lbWanted, lb and lbErr: the session loopback
	lbWanted bool       // ShareLoopback was called
	lb       *loopback  // made on the first spawn that joins it
	lbErr    error      // why it could not be made (not retried)

	sb sessionBoxes // the session sandbox (session_sandbox_linux.go)
}

// ShareLoopback makes the session's later sandboxed spawns that take the
// session's network share one network namespace, and so one loopback
// (docs/terminals.md, "Terminals"; loopback_linux.go). The terminal set calls it
// before a session's first terminal starts: a session that never has one
// keeps no holder process for it (a user server's session still enters
// its user namespace at every spawn: StartSpawner).
func (s *Launcher) ShareLoopback() {
	s.lbMu.Lock()
	s.lbWanted = true
	s.lbMu.Unlock()
}

// backend is the per-OS half of a Launcher, implemented once per build by
// osBackend. Besides it each OS file defines procAttr (the spawn's process
// attributes) and SealInheritedFDs.
type backend interface {
	// ready says whether this build can start a sandbox at all;
	// NewLauncher fails when it cannot.
	ready() error
	// prepare builds the sandboxed spawn of c under p (a mode other than
	// off): the wrapper's argv (bwrap, sandbox-exec), the environment
	// (over holds what every spawn sets) and the mount plan or profile.
	prepare(s *Launcher, p *Policy, c Command, dir string, over map[string]string) (*Prepared, error)
	// setEgress readies what later sandboxes use to reach the session's
	// proxies (macOS: two loopback forwarders). Called with s.mu held.
	setEgress(s *Launcher, b EgressBridge) error
	// start starts a sandboxed spawn, with s.mu held (so Close cannot miss
	// it). A backend that cannot hold a started sandbox before its command
	// runs (macOS) calls onStart first.
	start(s *Launcher, sp *spawn, onStart func()) error
	// release confines the started sandbox (resource limits, the process
	// cgroup), calls onStart and lets the command run; it sets sp.pid
	// (under s.mu) to the process whose death ends the sandbox. On failure
	// it has killed the spawn and waited for it.
	release(s *Launcher, sp *spawn, onStart func()) error
	// end runs once a started spawn is over (or failed to start).
	end(s *Launcher, sp *spawn)
	// startSpawner: see Launcher.StartSpawner.
	startSpawner(s *Launcher)
	// close releases what the backend holds, once Close killed every
	// process.
	close(s *Launcher)
}

var _ backend = (*osBackend)(nil)

// spawn is one started process.
type spawn struct {
	cmd       *exec.Cmd
	sandboxed bool
	// pid, once released, is the sandbox's init (Linux): killing it ends
	// every process in the sandbox's PID namespace. Guarded by the
	// launcher's lock.
	pid int
	os  osSpawn // the backend's own state
	// began is when Run began (the start latency's origin); zero for a
	// spawn not started by Run.
	began time.Time
	// terminal: a terminal's program, which leads a session of its own
	// (Command.Terminal).
	terminal bool
	optsAt   [2]int // Prepared.optsAt
	// landlock: Prepared.landlock, a session leader killed with its
	// session (no PID namespace ends with it).
	landlock bool
	after    func() []string // Prepared.after
}

// NewLauncher creates the session's scratch directory (mode 0700).
func NewLauncher(p *Policy, envPassthrough []string) (*Launcher, error) {
	return NewLauncherUnder(p, envPassthrough, "")
}

// NewLauncherUnder is NewLauncher with the scratch created in parent, a
// directory private to one server that holds the scratch of each of its
// sessions: the session's sandboxes see parent as an empty directory but
// for their own scratch (sibling sessions' scratch and bridge sockets are
// hidden). "" is NewLauncher.
func NewLauncherUnder(p *Policy, envPassthrough []string, parent string) (*Launcher, error) {
	var be osBackend
	if err := be.ready(); err != nil {
		return nil, err
	}
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
	hide := ""
	if parent != "" {
		hide = filepath.Dir(dir)
	}
	s, err := launcherOver(p, envPassthrough, dir, hide)
	if err != nil {
		_ = RemoveTree(dir)
	}
	return s, err
}

// launcherOver is a launcher over the scratch dir (made, or reopened after
// a restart), whose parent hide is hidden in its sandboxes ("": none).
func launcherOver(p *Policy, envPassthrough []string, dir, hide string) (*Launcher, error) {
	if p.Mode() != ModeOff && underAny(dir, p.WriteRoots()) {
		return nil, fmt.Errorf("scratch %s lies inside a write root; set TMPDIR elsewhere", dir)
	}
	if err := sealOnce(); err != nil {
		return nil, fmt.Errorf("seal inherited descriptors: %w", err)
	}
	defaultSignalsForChildren()
	s := &Launcher{scratch: dir, running: map[*spawn]struct{}{}, envPass: envPassthrough, hideBeside: hide}
	s.p.Store(p)
	return s, nil
}

func (s *Launcher) Policy() *Policy { return s.p.Load() }
func (s *Launcher) Scratch() string { return s.scratch }

// Narrow makes later spawns follow np, which must be no wider than the
// current policy: the same or a stricter mode, the network kept or turned
// off, the worktree kept or narrowed to a directory inside it. Processes
// already running keep the sandbox they started in.
func (s *Launcher) Narrow(np *Policy) error {
	cur := s.p.Load()
	switch {
	case !np.Mode().NoWiderThan(cur.Mode()):
		return fmt.Errorf("narrow: mode %s is wider than %s", np.Mode(), cur.Mode())
	case cur.Network() == NetworkOff && np.Network() != NetworkOff:
		return errors.New("narrow: the network cannot be turned on")
	case !Within(np.Workdir(), cur.Workdir()):
		return errors.New("narrow: the worktree cannot move outside the current one")
	case len(np.AddDirs()) > len(cur.AddDirs()):
		return errors.New("narrow: roots cannot be added")
	case cur.WritesBlocked() && !np.WritesBlocked():
		return errors.New("narrow: blocked writes cannot be unblocked")
	}
	s.p.Store(np)
	return nil
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
	if err := s.be.setEgress(s, b); err != nil {
		return err
	}
	s.egress, s.exe = &b, exe
	return nil
}

// SetAgent makes every later spawn see the session's brokered SSH agent
// (docs/ssh-agent.md): the socket at host path sock is bound into each
// sandbox at AgentSocket, and SSH_AUTH_SOCK names it (mode off: the host
// path). Only the Linux backend binds it.
func (s *Launcher) SetAgent(sock string) error {
	if runtime.GOOS != "linux" && s.p.Load().Mode() != ModeOff {
		return errors.New("the brokered SSH agent needs the Linux sandbox backend")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agent = sock
	return nil
}

// agentSocket is what SetAgent set.
func (s *Launcher) agentSocket() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent
}

// SetStartObserver makes every later sandboxed spawn report its start
// latency to f: from the start of Run (the filesystem inspected, the mount
// plan and bubblewrap's arguments built) until the sandbox is released to
// run its command. f must not block. The server feeds its metrics with it;
// confine knows nothing of them.
func (s *Launcher) SetStartObserver(f func(time.Duration)) {
	s.mu.Lock()
	s.onStarted = f
	s.mu.Unlock()
}

// StartSpawner makes procs bound this session's sandboxes as a whole
// (Linux): a user server's spawns enter one session user namespace from
// now on; a root server's session gets its pids cgroup now and, on cgroup
// v1, a thread inside it that starts its sandboxes (prepared in the
// background; until then each spawn's thread enters the cgroup itself).
// Without it only a root server's sandboxes share a limit. Close stops it.
func (s *Launcher) StartSpawner() {
	s.sb.server.Store(true) // a server's session: session sandboxes may serve it
	s.be.startSpawner(s)
}

// Close kills every process still running under the session, releases
// what its backend holds and removes its scratch directory (unless
// KeepScratch was called).
func (s *Launcher) Close() error {
	s.mu.Lock()
	s.closed = true
	for sp := range s.running {
		killTree(sp)
	}
	s.mu.Unlock()
	s.closeBoxes()
	s.be.close(s)
	s.lbMu.Lock()
	s.lb.close()
	s.lb, s.lbErr = nil, errors.New("session closed")
	s.lbMu.Unlock()
	if s.keep.Load() {
		return nil
	}
	Phase("rm-scratch")
	return RemoveTree(s.scratch)
}

// Prepare resolves c against the policy: working directory, environment
// floor and, for a sandboxed spawn, the backend's argv and its mount plan
// or profile.
func (s *Launcher) Prepare(c Command) (*Prepared, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("no command")
	}
	p := s.p.Load()
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
	if p.Mode() == ModeOff {
		if a := s.agentSocket(); a != "" {
			over["SSH_AUTH_SOCK"] = a
		}
		env := EnvFloor(p.env, s.envPass, ModeOff, over, nil)
		path, err := exec.LookPath(c.Args[0])
		if err != nil {
			return nil, err
		}
		return &Prepared{Path: path, Args: c.Args, Env: env, Dir: dir}, nil
	}
	return s.be.prepare(s, p, c, dir, over)
}

// grantedRoots are where KUBECONFIG may point and survive: the worktree,
// and the extra roots outside restricted mode.
func grantedRoots(p *Policy) []string {
	granted := []string{p.Workdir()}
	if p.Mode() != ModeRestricted {
		granted = append(granted, p.AddDirs()...)
	}
	return granted
}

// resolveDir places the working directory inside the worktree, a write root
// or the scratch; never elsewhere.
func (s *Launcher) resolveDir(d string) (string, error) {
	p := s.p.Load()
	wd := p.Workdir()
	if d == "" {
		return wd, nil
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(wd, d)
	}
	d = filepath.Clean(d)
	if p.Mode() != ModeOff && !underAny(d, append(append(p.WriteRoots(), wd, s.scratch), p.AddDirs()...)) {
		return "", fmt.Errorf("working directory %s is outside the worktree", d)
	}
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	if p.Mode() != ModeOff && !underAny(r, append(append(p.WriteRoots(), wd, s.scratch), p.AddDirs()...)) {
		return "", fmt.Errorf("working directory %s resolves outside the worktree", d)
	}
	return r, nil
}

// Run starts c under the policy and waits for it. A timeout or a cancelled
// ctx kills the whole tree (Linux: the sandbox's PID namespace dies with its
// init; macOS: the command's process group).
func (s *Launcher) Run(ctx context.Context, c Command) (res Result, err error) {
	began := time.Now()
	// After the spawn, whatever it ran, the git sweep sets aside any
	// repository it left for the user's git to run (gitsweep.go; Linux).
	Phase("sweep-begin")
	sw, err := s.sweepBegin()
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	defer func() {
		Phase("sweep-end")
		sw.end(&res)
		Phase("swept")
		FlushPhases()
	}()
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	if r, ok, err := s.runSession(ctx, c, began); ok {
		return r, err
	}
	for attempt := 0; ; attempt++ {
		Phase("prepare")
		pr, err := s.Prepare(c)
		if err != nil {
			return Result{ExitCode: -1}, err
		}
		stdout, stderr := c.Stdout, c.Stderr
		var sn *setupSniffer
		var rewind func() bool
		masks := hostSocketMasks(pr.Plan)
		if attempt == 0 && len(masks) > 0 && !c.Terminal && sniffable(c.Stderr) {
			rewind = rewinder(c.Stdin)
		}
		if rewind != nil {
			// A masked host socket may vanish before bubblewrap mounts
			// over it (launcher_retry.go): watch for that failure.
			sn = newSetupSniffer(c.Stderr, masks)
			stderr = sn
			if c.Stdout == c.Stderr {
				stdout = sn
			}
		}
		cmd := &exec.Cmd{Path: pr.Path, Args: pr.Args, Env: pr.Env, Dir: pr.Dir,
			Stdin: c.Stdin, Stdout: stdout, Stderr: stderr, WaitDelay: 2 * time.Second,
			SysProcAttr: procAttr(pr.Sandboxed, c.Terminal)}
		if pr.landlock {
			// A session of its own, which the backend's seccomp filter
			// keeps every descendant in (landlock_backend_linux.go).
			cmd.SysProcAttr = landlockProcAttr(c.Terminal)
		}
		res, err := s.launch(ctx, &spawn{cmd: cmd, sandboxed: pr.Sandboxed, began: began, terminal: c.Terminal, optsAt: pr.optsAt, landlock: pr.landlock, after: pr.after}, c.OnStart)
		if sn != nil && sn.retry(res.ExitCode) && err == nil && ctx.Err() == nil && rewind() {
			continue
		}
		return res, err
	}
}

// rewinder returns what puts stdin back where the first attempt began
// reading it (nil when it cannot: a pipe, a terminal); no stdin needs none.
func rewinder(stdin io.Reader) func() bool {
	if stdin == nil {
		return func() bool { return true }
	}
	if _, isFile := stdin.(*os.File); isFile {
		return nil
	}
	rs, ok := stdin.(io.Seeker)
	if !ok {
		return nil
	}
	at, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil
	}
	return func() bool {
		_, err := rs.Seek(at, io.SeekStart)
		return err == nil
	}
}

// sniffable reports whether a spawn's stderr can be watched for bubblewrap's
// setup failure: a writer of the caller's (a file, a terminal or nothing is
// passed to the process as it is).
func sniffable(w io.Writer) bool {
	if w == nil {
		return false
	}
	_, isFile := w.(*os.File)
	return !isFile
}

// launch starts sp, releases it into its sandbox and waits for it.
func (s *Launcher) launch(ctx context.Context, sp *spawn, onStart func()) (Result, error) {
	cmd := sp.cmd
	Phase("start")
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Result{ExitCode: -1}, errors.New("session closed")
	}
	start := time.Now()
	var err error
	if sp.sandboxed {
		err = s.be.start(s, sp, onStart)
		defer s.be.end(s, sp)
	} else {
		if onStart != nil {
			onStart()
		}
		if err = cmd.Start(); err != nil {
			err = fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
		}
	}
	if err != nil {
		s.mu.Unlock()
		return Result{ExitCode: -1}, err
	}
	s.running[sp] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, sp)
		s.mu.Unlock()
	}()
	if sp.sandboxed {
		Phase("release")
		if err := s.be.release(s, sp, onStart); err != nil {
			return Result{ExitCode: -1}, err
		}
		Phase("wait")
		s.mu.Lock()
		observe := s.onStarted
		s.mu.Unlock()
		if observe != nil && !sp.began.IsZero() {
			observe(time.Since(sp.began))
		}
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var res Result
	select {
	case err = <-done:
	case <-ctx.Done():
		s.mu.Lock()
		killTree(sp)
		s.mu.Unlock()
		err = <-done
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	Phase("waited")
	if sp.terminal && !sp.sandboxed || sp.landlock {
		// No PID namespace ends with it: what it left in its session
		// (it led one: procAttr) goes now.
		for range 3 { // a process may fork while the table is read
			killSession(cmd.Process.Pid)
		}
	}
	if sp.after != nil {
		res.Quarantined = append(res.Quarantined, sp.after()...)
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

// killTree kills a spawn and everything below it: the sandbox's init when
// known (on Linux killing it kills every process in the PID namespace,
// including children that detached with setsid; bwrap then exits), the
// process group of a spawn that leads one, and the process itself.
// Callers hold the launcher's lock (sp.pid).
func killTree(sp *spawn) {
	if sp.pid > 0 {
		_ = unix.Kill(sp.pid, unix.SIGKILL)
	}
	cmd := sp.cmd
	if cmd.Process != nil {
		if a := cmd.SysProcAttr; a != nil && (a.Setpgid || a.Setsid) {
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		}
		_ = cmd.Process.Kill()
	}
}

var sealOnce = sync.OnceValue(SealInheritedFDs)

// RemoveTree removes dir and everything in it relative to its held parent
// (HeldDir.RemoveAll: no link followed, read-only directories a command
// left, the Go module cache's among them, made writable by descriptor).
// dir's parent lies outside every tree a sandbox can write (TMPDIR, or
// this server's private scratch parent).
func RemoveTree(dir string) error {
	pd, err := OpenHeld(filepath.Dir(dir), nil)
	if err != nil {
		return err
	}
	defer pd.Close()
	return pd.RemoveAll(filepath.Base(dir))
}
