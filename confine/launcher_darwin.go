//go:build darwin

package confine

import (
	"context"
	"errors"
	"fmt"
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

// The macOS launcher: every spawn runs under /usr/bin/sandbox-exec with a
// profile SeatbeltProfile generates from the session's policy at that
// spawn. It has the Linux launcher's API. What macOS does not give a
// sandbox (spec 000: no PID or mount namespace) is said here and in the
// README: a process that leaves the command's process group outlives a
// timeout, no resource limit is applied, and the children of a server that
// dies are not killed with it.

// Session is one sandbox session: a policy, a private scratch directory and
// the processes started under it.
type Launcher struct {
	p       atomic.Pointer[Policy]
	scratch string

	mu      sync.Mutex
	running map[*exec.Cmd]struct{}
	closed  bool
	envPass []string
	// hideBeside is the server-private parent of the scratch, hidden in
	// every sandbox but for the scratch itself ("" when not isolated).
	hideBeside string
	egress     *EgressBridge
	fwd        *loopbackForwarder
	exe        string // this binary, for GIT_SSH_COMMAND's connect helper
}

// NewLauncherUnder is NewSession with the scratch created in parent (see the
// Linux launcher); "" is NewSession.
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
	s := &Launcher{scratch: dir, running: map[*exec.Cmd]struct{}{}, envPass: envPassthrough}
	if parent != "" {
		s.hideBeside = filepath.Dir(dir)
	}
	s.p.Store(p)
	return s, nil
}

// SetEgress hands the launcher the bridge to the session's proxies. macOS
// has no network namespace: the sandbox shares the host's loopback, so the
// session listens on two loopback ports relayed to the bridge sockets, and
// the profile lets the sandbox reach those two ports and nothing else.
func (s *Launcher) SetEgress(b EgressBridge) error {
	exe, err := relayBinary()
	if err != nil {
		return err
	}
	fwd, err := newLoopbackForwarder(b.HTTPSocket, b.SOCKSSocket)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fwd != nil {
		s.fwd.Close()
	}
	s.egress, s.fwd, s.exe = &b, fwd, exe
	return nil
}

// Close kills every process still running under the session, stops its
// loopback forwarders and removes its scratch directory.
func (s *Launcher) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.running {
		killGroup(c)
	}
	if s.fwd != nil {
		s.fwd.Close()
	}
	s.mu.Unlock()
	return removeAllForce(s.scratch)
}

// Prepare resolves c against the policy: working directory, profile,
// environment floor and the sandbox-exec argv.
func (s *Launcher) Prepare(c Command) (*Prepared, error) {
	p, dir, over, off, err := s.prepareCommon(c)
	if err != nil || off != nil {
		return off, err
	}
	if strings.HasPrefix(c.Args[0], "-") {
		// sandbox-exec would read it as one of its own options.
		return nil, fmt.Errorf("%w: a command may not start with '-'", ErrSandboxSetup)
	}
	var proxy *SeatbeltProxy
	exe := ""
	if p.Network() == NetworkOn {
		s.mu.Lock()
		eg, fwd := s.egress, s.fwd
		exe = s.exe
		s.mu.Unlock()
		if eg == nil || fwd == nil {
			return nil, fmt.Errorf("%w: the network is on but no egress proxies run for this session", ErrSandboxSetup)
		}
		proxy = &SeatbeltProxy{HTTPPort: fwd.httpPort, SOCKSPort: fwd.socksPort}
		for k, v := range egressEnvAt(*eg, fwd.httpPort, fwd.socksPort, exe) {
			over[k] = v
		}
	}
	toolchain := DeveloperToolchain(p, p.Host().DeveloperDir)
	l, err := InspectSeatbelt(p, s.scratch, toolchain, proxy, exe)
	if err != nil {
		return nil, err
	}
	l.ScratchParent = s.hideBeside
	profile, err := SeatbeltProfile(p, l)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSandboxSetup, err)
	}
	if p.Cache() == CachePrivate {
		for k, v := range CacheEnv(s.scratch, p.Mode(), envLookup(p.env, "GOPATH")) {
			if _, set := c.Env[k]; !set {
				over[k] = v
			}
		}
	}
	granted := []string{p.Workdir()}
	if p.Mode() != ModeRestricted {
		granted = append(granted, p.AddDirs()...)
	}
	env := EnvFloor(p.env, s.envPass, p.Mode(), over, granted)
	if dev := p.Host().DeveloperDir; dev != "" && underAny(filepath.Clean(dev), toolchain) {
		env = setEnv(env, "PATH", DeveloperPath(envLookup(env, "PATH"), filepath.Clean(dev)))
	}
	args := append([]string{"sandbox-exec", "-p", profile}, c.Args...)
	return &Prepared{Path: SeatbeltExec, Args: args, Env: env, Dir: dir, Profile: profile, Sandboxed: true}, nil
}

// setEnv replaces or appends key in an os.Environ-style list.
func setEnv(env []string, key, value string) []string {
	for i, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

// Run starts c under the policy and waits for it. A timeout or a cancelled
// ctx kills the command's process group.
func (s *Launcher) Run(ctx context.Context, c Command) (Result, error) {
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
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, WaitDelay: 2 * time.Second,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Result{ExitCode: -1}, errors.New("session closed")
	}
	if c.OnStart != nil {
		c.OnStart()
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return Result{ExitCode: -1}, fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	s.running[cmd] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, cmd)
		s.mu.Unlock()
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var res Result
	select {
	case err = <-done:
	case <-ctx.Done():
		killGroup(cmd)
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

// killGroup kills a spawn's process group (the command and every child
// that did not start a group of its own).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Process.Kill()
	}
}

var sealOnce = sync.OnceValue(SealInheritedFDs)

// SealInheritedFDs marks every descriptor above stderr close-on-exec, so
// nothing the server inherited from its own parent reaches a sandbox
// (macOS has no close_range: the open descriptors are read from /dev/fd).
func SealInheritedFDs() error {
	ents, err := os.ReadDir("/dev/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// The descriptor ReadDir used is already closed: EBADF is fine.
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}

// StartSpawner does nothing on macOS (no pids cgroup).
func (s *Launcher) StartSpawner() {}
