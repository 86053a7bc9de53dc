package confine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A session's loopback (README, "Terminals"): with ShareLoopback, every
// sandboxed spawn of the session that takes the session's network joins one
// network namespace instead of making its own, so a server started in a
// terminal is reachable from the session's `shell` and from nothing else.
// Each spawn still gets its own mount, PID, IPC and user namespaces.
//
// The namespace is held by a small process, the holder: this project's
// binary in a bubblewrap of its own (--unshare-user --unshare-net; bwrap
// brings the loopback up), which, with the network on, also runs the relay
// to the session's proxies that otherwise starts inside every command. The
// server keeps descriptors of the holder's network (and user) namespace and
// each spawn enters them through nsenter(1) before bubblewrap: an
// unprivileged server cannot setns(2) into a network namespace owned by a
// user namespace it is not in, and a multithreaded Go process cannot enter
// a user namespace at all. nsenter opens the descriptors through
// /proc/<server>/fd, so no namespace descriptor is inherited by the command.

// loopbackReadyTimeout bounds how long a holder may take to report ready.
const loopbackReadyTimeout = 10 * time.Second

// nsenterPaths are where nsenter(1) is looked for: system directories only,
// never $PATH (a spawn's first program must not be the user's to replace).
var nsenterPaths = []string{"/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter", "/sbin/nsenter"}

func findNsenter() string {
	for _, p := range nsenterPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// loopback is a made session loopback.
type loopback struct {
	network Network   // the policy's network when it was made
	cmd     *exec.Cmd // the holder's bwrap
	hold    *os.File  // the holder's stdin: closing it ends the holder
	netNS   *os.File  // the namespace spawns join
	userNS  *os.File  // its owning user namespace (unprivileged servers)
	nsenter string
	exited  chan struct{} // closed once the holder's bwrap is reaped
}

// LoopbackAvailable says whether this host can give a session a loopback
// of its own (nsenter is there); terminals need it.
func (s *Launcher) LoopbackAvailable() error {
	if s.p.Load().Mode() == ModeOff {
		return nil // the host's own loopback
	}
	if findNsenter() == "" {
		return errors.New("nsenter (util-linux) was not found in /usr/bin or /bin: a session loopback cannot be made")
	}
	return nil
}

// sessionLoopback returns the loopback spawns under p join, making it on
// first use; nil (and no error) when spawns make their own namespace: no
// loopback was asked for, or the policy's network changed since it was
// made (a narrowed session never joins a namespace whose relay it lost).
func (s *Launcher) sessionLoopback(p *Policy) (*loopback, error) {
	s.lbMu.Lock()
	defer s.lbMu.Unlock()
	if !s.lbWanted {
		return nil, nil
	}
	if s.lb == nil {
		if s.lbErr != nil {
			return nil, s.lbErr
		}
		lb, err := s.makeLoopback(p)
		if err != nil {
			s.lbErr = fmt.Errorf("%w: session loopback: %v", ErrSandboxSetup, err)
			return nil, s.lbErr
		}
		s.lb = lb
	}
	if s.lb.network != p.Network() {
		return nil, nil
	}
	select {
	case <-s.lb.exited:
		return nil, fmt.Errorf("%w: the session's loopback holder ended", ErrSandboxSetup)
	default:
	}
	return s.lb, nil
}

// makeLoopback starts the holder and opens its namespaces. Called with
// lbMu held.
func (s *Launcher) makeLoopback(p *Policy) (*loopback, error) {
	ns := findNsenter()
	if ns == "" {
		return nil, errors.New("nsenter (util-linux) not found")
	}
	exe, err := relayBinary()
	if err != nil {
		return nil, err
	}
	holdArgs := []string{exe, LoopbackSubcommand}
	if p.Network() == NetworkOn {
		s.mu.Lock()
		eg := s.egress
		s.mu.Unlock()
		if eg == nil {
			return nil, errors.New("the network is on but no egress proxies run for this session")
		}
		holdArgs = append(holdArgs, eg.HTTPSocket, eg.SOCKSSocket)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer infoR.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		inR.Close()
		inW.Close()
		return nil, err
	}
	defer outR.Close()
	args := append([]string{"bwrap", "--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/", "/",
		"--info-fd", "3", "--"}, holdArgs...)
	// No parent-death signal: it follows the thread that forked, and Go
	// ends threads (a root server's cgroup spawns end theirs), which
	// would kill the holder under a live session. The holder ends when
	// its stdin closes instead: on Close, and when the server dies.
	cmd := &exec.Cmd{Path: p.host.Bwrap, Args: args, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"},
		Stdin: inR, Stdout: outW, Stderr: os.Stderr, ExtraFiles: []*os.File{infoW}}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	infoW.Close()
	if err != nil {
		inW.Close()
		return nil, fmt.Errorf("start the holder: %w", err)
	}
	lb := &loopback{network: p.Network(), cmd: cmd, hold: inW, nsenter: ns, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(lb.exited) }()
	fail := func(err error) (*loopback, error) {
		lb.close()
		return nil, err
	}
	type ready struct {
		pid int
		err error
	}
	got := make(chan ready, 1)
	go func() {
		pid, err := readChildPID(infoR)
		if err == nil {
			var line string
			line, err = bufio.NewReader(outR).ReadString('\n')
			if err == nil && strings.TrimSpace(line) != "ready" {
				err = fmt.Errorf("holder said %q", strings.TrimSpace(line))
			}
		}
		got <- ready{pid, err}
	}()
	var r ready
	select {
	case r = <-got:
	case <-time.After(loopbackReadyTimeout):
		return fail(errors.New("the holder did not report ready"))
	}
	if r.err != nil {
		return fail(fmt.Errorf("the holder: %w", r.err))
	}
	// The holder is alive (it answered and waits on its stdin), so its pid
	// names it while the descriptors are opened.
	if lb.netNS, err = os.Open("/proc/" + strconv.Itoa(r.pid) + "/ns/net"); err != nil {
		return fail(err)
	}
	if !p.host.RunAsRoot {
		if lb.userNS, err = os.Open("/proc/" + strconv.Itoa(r.pid) + "/ns/user"); err != nil {
			return fail(err)
		}
	}
	// Never the server's own network: a spawn that joined it would have
	// the host's.
	var own, held unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &own); err != nil {
		return fail(err)
	}
	if err := unix.Fstat(int(lb.netNS.Fd()), &held); err != nil {
		return fail(err)
	}
	if own.Ino == held.Ino && own.Dev == held.Dev {
		return fail(errors.New("the holder is in the server's own network namespace"))
	}
	select {
	case <-lb.exited:
		return fail(errors.New("the holder ended while its namespaces were opened"))
	default:
	}
	return lb, nil
}

// wrap puts nsenter in front of a bubblewrap argv (path, args) so the
// spawn starts in the loopback's namespaces.
func (lb *loopback) wrap(path string, args []string) (string, []string) {
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/"
	w := []string{"nsenter"}
	if lb.userNS != nil {
		w = append(w, "--user="+self+strconv.Itoa(int(lb.userNS.Fd())), "--preserve-credentials")
	}
	w = append(w, "--net="+self+strconv.Itoa(int(lb.netNS.Fd())), "--", path)
	return lb.nsenter, append(w, args[1:]...)
}

// close ends the holder (its bwrap dies with it: --die-with-parent) and
// releases the descriptors.
func (lb *loopback) close() {
	if lb == nil {
		return
	}
	lb.hold.Close()
	if lb.cmd.Process != nil {
		_ = lb.cmd.Process.Kill()
	}
	<-lb.exited
	for _, f := range []*os.File{lb.netNS, lb.userNS} {
		if f != nil {
			f.Close()
		}
	}
}

// RunLoopbackHold is the holder's body: with two bridge sockets given,
// relay the loopback's proxy ports to them (as RunRelay does inside a
// command), then report ready and wait until the server closes stdin.
func RunLoopbackHold(args []string) int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if len(args) == 2 {
		if code := listenRelays(args[0], args[1]); code != 0 {
			return code
		}
	} else if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp loopback: want no argument or two bridge sockets")
		return 125
	}
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return 125
	}
	var b [64]byte
	for {
		if _, err := os.Stdin.Read(b[:]); err != nil {
			return 0
		}
	}
}
