package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The macOS backend: every spawn runs under /usr/bin/sandbox-exec with a
// profile SeatbeltProfile generates from the session's policy at that
// spawn. What macOS does not give a sandbox (no PID or mount namespace) is
// said here and in the docs/macos.md, ("macOS (Seatbelt)"): a process that leaves
// the command's process group outlives a timeout, no resource limit is
// applied, and the children of a server that dies are not killed with it.

// osBackend is the macOS launcher backend (Seatbelt).
type osBackend struct {
	// fwd relays two loopback ports to the bridge sockets (guarded by the
	// launcher's lock).
	fwd *loopbackForwarder
}

// osSpawn: a Seatbelt spawn holds nothing of its own.
type osSpawn struct{}

func (b *osBackend) ready() error { return nil }

// procAttr: every spawn leads a process group of its own, which is what a
// timeout kills; a terminal's leads a session on its pseudo-terminal.
func procAttr(sandboxed, terminal bool) *syscall.SysProcAttr {
	if terminal {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// prepare builds the sandbox-exec argv and the profile.
func (b *osBackend) prepare(s *Launcher, p *Policy, c Command, dir string, over map[string]string) (*Prepared, error) {
	if strings.HasPrefix(c.Args[0], "-") {
		// sandbox-exec would read it as one of its own options.
		return nil, fmt.Errorf("%w: a command may not start with '-'", ErrSandboxSetup)
	}
	var proxy *SeatbeltProxy
	exe := ""
	network := p.Network()
	if c.Network == NetworkHost || c.Network == NetworkOff {
		network = c.Network // an MCP server's own choice (docs/gateway.md, "MCP servers behind evener-mcp")
	}
	if network == NetworkOn {
		s.mu.Lock()
		eg, fwd := s.egress, b.fwd
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
	if network != p.Network() {
		l.Network = network
	}
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
	env := EnvFloor(p.env, s.envPass, p.Mode(), over, grantedRoots(p))
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

// setEgress: macOS has no network namespace, so the sandbox shares the
// host's loopback: the session listens on two loopback ports relayed to the
// bridge sockets, and the profile lets the sandbox reach those two ports and
// nothing else.
func (b *osBackend) setEgress(s *Launcher, eg EgressBridge) error {
	fwd, err := newLoopbackForwarder(eg.HTTPSocket, eg.SOCKSSocket)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	if b.fwd != nil {
		b.fwd.Close()
	}
	b.fwd = fwd
	return nil
}

// start: sandbox-exec applies the profile before it execs the command, so
// nothing holds the sandbox: onStart runs first.
func (b *osBackend) start(s *Launcher, sp *spawn, onStart func()) error {
	if onStart != nil {
		onStart()
	}
	if err := sp.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", filepath.Base(sp.cmd.Path), err)
	}
	return nil
}

func (b *osBackend) release(s *Launcher, sp *spawn, onStart func()) error { return nil }
func (b *osBackend) end(s *Launcher, sp *spawn)                           {}

// startSpawner does nothing on macOS (no pids cgroup).
func (b *osBackend) startSpawner(s *Launcher) {}

// close stops the loopback forwarders.
func (b *osBackend) close(s *Launcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.fwd != nil {
		b.fwd.Close()
	}
}

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
