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

// A session's loopback (docs/terminals.md, "Terminals"): with ShareLoopback, every
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
//
// The same holder bounds a user server's session as a whole (StartSpawner):
// every sandboxed spawn of the session, whatever its network, enters the
// holder's user namespace, and its bubblewrap gets RLIMIT_NPROC = procs
// before it makes the sandbox's namespace: it reads its options from a pipe
// (--args) the server fills only after prlimit(2) (launcher_linux.go). The
// kernel counts RLIMIT_NPROC per user namespace and uid, and charges a
// process to every namespace above its own, each level against the limit
// of whoever created the namespace below it: every process of every
// sandbox of the session is charged to the holder's namespace, checked
// against the procs their bubblewrap had when it made the sandbox's
// namespace. So the session's sandboxes and their bubblewraps count
// together against one procs. A holder made for that alone ends once its
// namespaces are open: the server's descriptors keep them. (Host uid 0 is
// exempt from RLIMIT_NPROC in every namespace: a root server's session has
// a pids cgroup instead, cgroup_linux.go.)

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

// sessionRlimitMissing says why a user server's sessions cannot be bounded
// as a whole (RLIMIT_NPROC then binds each sandbox), "" when they can.
func sessionRlimitMissing() string {
	if findNsenter() == "" {
		return "nsenter (util-linux) not found in /usr/bin or /bin"
	}
	return ""
}

// loopback is a made session holder: the session's loopback, and for a
// user server the session's user namespace. Guarded by the launcher's
// lbMu.
type loopback struct {
	network Network  // the policy's network when it was made
	relays  bool     // a holder relays to the session's proxies (network on)
	netNS   *os.File // the namespace spawns join
	userNS  *os.File // its owning user namespace (unprivileged servers)
	nsenter string
	// The holder process, while one runs (nil for a session bound
	// alone: its namespaces outlive it through netNS and userNS).
	cmd    *exec.Cmd     // the holder's bwrap
	hold   *os.File      // the holder's stdin: closing it ends the holder
	exited chan struct{} // closed once the holder's bwrap is reaped
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

// sessionHolder returns the holder spawns under p join, making it on first
// use, and whether a spawn that takes the session's network (wantNet)
// joins its network namespace. nil (and no error) when spawns make their
// own namespaces: no loopback was asked for and the session is not bounded
// as a whole (a root server's, or one without StartSpawner). The network is
// not joined when the policy's network changed since the holder was made
// (a narrowed session never joins a namespace whose relay it lost).
func (s *Launcher) sessionHolder(p *Policy, wantNet bool) (*loopback, bool, error) {
	s.lbMu.Lock()
	defer s.lbMu.Unlock()
	procs := s.be.sessionNS.Load() && !p.host.RunAsRoot
	if !s.lbWanted && !procs {
		return nil, false, nil
	}
	if s.lb == nil {
		if s.lbErr != nil {
			return nil, false, s.lbErr
		}
		what := "session loopback"
		if !s.lbWanted {
			what = "session user namespace"
		}
		lb, err := s.makeLoopback(p)
		if err != nil {
			s.lbErr = fmt.Errorf("%w: %s: %v", ErrSandboxSetup, what, err)
			return nil, false, s.lbErr
		}
		s.lb = lb
	}
	if s.lb.exited != nil {
		select {
		case <-s.lb.exited:
			return nil, false, fmt.Errorf("%w: the session's holder ended", ErrSandboxSetup)
		default:
		}
	}
	joinNet := s.lbWanted && wantNet && s.lb.network == p.Network()
	if joinNet && !s.lb.relays {
		if err := s.revive(p, s.lb); err != nil {
			return nil, false, fmt.Errorf("%w: session loopback: %v", ErrSandboxSetup, err)
		}
	}
	if !joinNet && !procs {
		return nil, false, nil
	}
	return s.lb, joinNet, nil
}

// makeLoopback starts the holder and opens its namespaces. Called with
// lbMu held. A holder made only for a user server's session bound (no
// loopback asked for yet) ends once its namespaces are open: the server's
// descriptors keep them, so the session costs no process; revive starts
// the relays in them if a loopback is asked for later.
func (s *Launcher) makeLoopback(p *Policy) (*loopback, error) {
	ns := findNsenter()
	if ns == "" {
		return nil, errors.New("nsenter (util-linux) not found")
	}
	exe, err := relayBinary()
	if err != nil {
		return nil, err
	}
	keep := s.lbWanted || p.host.RunAsRoot
	holdArgs := []string{exe, LoopbackSubcommand}
	relays := false
	if keep && p.Network() == NetworkOn {
		s.mu.Lock()
		eg := s.egress
		s.mu.Unlock()
		if eg == nil {
			return nil, errors.New("the network is on but no egress proxies run for this session")
		}
		holdArgs = append(holdArgs, eg.HTTPSocket, eg.SOCKSSocket)
		relays = true
	}
	lb := &loopback{network: p.Network(), relays: relays, nsenter: ns}
	// No --die-with-parent (here and in revive): its signal follows the
	// OS thread that started bubblewrap, which Go may end (a root
	// server's session cgroup thread does, at every session's end),
	// killing another session's holder. The holder ends when its stdin
	// closes: close, or the server's death.
	args := append([]string{"bwrap", "--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc",
		"--new-session", "--cap-drop", "ALL", "--ro-bind", "/", "/",
		"--info-fd", "3", "--"}, holdArgs...)
	pid, err := lb.startHolder(p.host.Bwrap, args)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*loopback, error) {
		lb.close()
		return nil, err
	}
	// The holder is alive (it answered and waits on its stdin), so its pid
	// names it while the descriptors are opened.
	if lb.netNS, err = os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net"); err != nil {
		return fail(err)
	}
	if !p.host.RunAsRoot {
		if lb.userNS, err = os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user"); err != nil {
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
	if !keep {
		lb.endHolder()
	}
	return lb, nil
}

// revive readies a loopback asked for after its holder ended (made for the
// session bound alone): the network namespace kept its loopback interface;
// with the network on, the relays to the session's proxies start in it, in
// a bubblewrap entered into the session's namespaces. Called with lbMu
// held.
func (s *Launcher) revive(p *Policy, lb *loopback) error {
	if lb.network != NetworkOn || lb.relays || p.Network() != NetworkOn {
		return nil
	}
	if lb.userNS == nil {
		return errors.New("no user namespace to start the relays in")
	}
	s.mu.Lock()
	eg := s.egress
	s.mu.Unlock()
	if eg == nil {
		return errors.New("the network is on but no egress proxies run for this session")
	}
	exe, err := relayBinary()
	if err != nil {
		return err
	}
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/"
	args := []string{"nsenter", "--user=" + self + strconv.Itoa(int(lb.userNS.Fd())), "--preserve-credentials",
		"--net=" + self + strconv.Itoa(int(lb.netNS.Fd())), "--",
		p.host.Bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc",
		"--new-session", "--cap-drop", "ALL", "--ro-bind", "/", "/",
		"--info-fd", "3", "--", exe, LoopbackSubcommand, eg.HTTPSocket, eg.SOCKSSocket}
	if _, err := lb.startHolder(lb.nsenter, args); err != nil {
		return fmt.Errorf("the relays: %w", err)
	}
	lb.relays = true
	return nil
}

// startHolder starts a holder process (path, args: a bubblewrap whose info
// goes to descriptor 3) and waits until it reports ready; it returns the
// pid of the sandbox's init. On failure nothing of it is left.
func (lb *loopback) startHolder(path string, args []string) (int, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer infoR.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		return 0, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		inR.Close()
		inW.Close()
		return 0, err
	}
	defer outR.Close()
	// No parent-death signal: it follows the thread that forked, and Go
	// ends threads (a root server's cgroup spawns end theirs), which
	// would kill the holder under a live session. The holder ends when
	// its stdin closes instead: on Close, and when the server dies.
	// One scheduler slot: the holder's threads count against the
	// session's procs like any process of the session.
	cmd := &exec.Cmd{Path: path, Args: args, Dir: "/", Env: []string{"PATH=/usr/bin:/bin", "GOMAXPROCS=1"},
		Stdin: inR, Stdout: outW, Stderr: os.Stderr, ExtraFiles: []*os.File{infoW}}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	infoW.Close()
	if err != nil {
		inW.Close()
		return 0, fmt.Errorf("start the holder: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	lb.cmd, lb.hold, lb.exited = cmd, inW, exited
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
		r.err = errors.New("the holder did not report ready")
	}
	if r.err != nil {
		lb.endHolder()
		return 0, fmt.Errorf("the holder: %w", r.err)
	}
	return r.pid, nil
}

// endHolder ends the holder process, if one runs, and waits for it.
func (lb *loopback) endHolder() {
	if lb.cmd == nil {
		return
	}
	lb.hold.Close()
	select {
	case <-lb.exited:
	case <-time.After(5 * time.Second):
		_ = lb.cmd.Process.Kill()
		<-lb.exited
	}
	lb.cmd, lb.hold, lb.exited = nil, nil, nil
}

// wrap puts nsenter in front of a bubblewrap argv (path, args) so the
// spawn starts in the holder's user namespace (user servers) and, with
// joinNet, its network namespace. at is where bwrap's own argv (its path)
// begins in the result.
func (lb *loopback) wrap(path string, args []string, joinNet bool) (string, []string, int) {
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/"
	w := []string{"nsenter"}
	if lb.userNS != nil {
		w = append(w, "--user="+self+strconv.Itoa(int(lb.userNS.Fd())), "--preserve-credentials")
	}
	if joinNet {
		w = append(w, "--net="+self+strconv.Itoa(int(lb.netNS.Fd())))
	}
	w = append(w, "--", path)
	return lb.nsenter, append(w, args[1:]...), len(w) - 1
}

// procsCeiling is procs, never above the hard RLIMIT_NPROC the server got
// (an unprivileged process cannot raise it).
func procsCeiling(procs int64) int64 {
	var cur unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &cur) == nil && cur.Max < uint64(procs) {
		return int64(cur.Max)
	}
	return procs
}

// close ends the holder (its stdin closes; its bwrap is killed) and
// releases the descriptors.
func (lb *loopback) close() {
	if lb == nil {
		return
	}
	if lb.cmd != nil {
		lb.hold.Close()
		_ = lb.cmd.Process.Kill()
		<-lb.exited
		lb.cmd, lb.hold, lb.exited = nil, nil, nil
	}
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
