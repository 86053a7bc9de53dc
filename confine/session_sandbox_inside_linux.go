package confine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The two halves of a session sandbox that run inside it
// (session_sandbox_linux.go; docs/speed.md, "Session sandbox"):
//
//   - the spawner, the holder's only command (PID 1 of the session's PID
//     namespace, with the capabilities of the session's user namespace and
//     no seccomp filter yet), keeps idle slots ready;
//   - a slot, started by the spawner in PID, mount, network, IPC and UTS
//     namespaces of its own, mounts that PID namespace's /proc, waits for
//     one request, applies the per-call confinement (the /proc masks, the
//     resource limits, the working directory, a session of its own; then,
//     on the thread that execs, every capability dropped and the seccomp
//     filter) and becomes the command: the call's init, whose end ends
//     every process of the call. The spawner, its parent, reports how it
//     ended to the server.
//
// Neither loads configuration or trusts anything but the server's
// descriptors.

// Descriptors of the spawner (set by the server) and of a slot (by the
// spawner).
const (
	spawnerReqFD = 4 // the server's request socket (3 is bwrap's info)
	slotReqFD    = 3 // the same socket, in a slot
	slotTakenFD  = 4 // a slot writes one byte here once it took a request
)

// slotsIdle is how many idle slots the spawner keeps.
const slotsIdle = 2

// slotRequest is one call, as the server sends it to a slot with four
// descriptors: the call's control socket, stdin, stdout, stderr.
type slotRequest struct {
	Args      []string
	Env       []string
	Dir       string
	Limits    [][2]uint64 // resource, value (soft and hard)
	ProcMasks []slotMask  // over the slot's own /proc
	ProcRO    bool
	Seccomp   []byte // the seccomp program (raw sock_filter array)
	NoSession bool   // keep the caller's session (no setsid)
	// Nproc, when not negative, is the RLIMIT_NPROC to set instead of
	// Limits' (a user server's procs plus the holder's own tasks).
	Nproc    int64
	Landlock string // the second layer's rules (LandlockRules.Encode), "" when it is off
}

// procPlan is what a slot's own /proc gets: the plan's masks there and
// whether it is read-only (the spawner's argument, passed to each slot).
type procPlan struct {
	Masks    []slotMask
	ReadOnly bool
	// Relay: the network is on. The spawner relays the holder's loopback
	// proxy ports to the bridge sockets (as RunRelay does in front of a
	// per-call command).
	Relay bool
	// SharedNet: the slots share the holder's network namespace (the
	// relay's, or the session loopback's) instead of making their own
	// (docs/security.md, "Session sandbox").
	SharedNet bool
	// Tmp: the fresh /tmp and /dev/shm each slot mounts, as the spawner
	// read them from its mount table (the server leaves it empty).
	Tmp []tmpPlan
}

// parseProcPlan reads the spawner's and a slot's one argument.
func parseProcPlan(args []string) (procPlan, error) {
	var pp procPlan
	if len(args) != 1 {
		return pp, fmt.Errorf("want one argument, got %d", len(args))
	}
	err := json.Unmarshal([]byte(args[0]), &pp)
	return pp, err
}

type slotMask struct {
	Path string
	Dir  bool
}

// Slot messages on the control socket. A slot that took a call says hello
// (its credentials carry its pid), then either execs the command (the
// socket is close-on-exec: the server reads its end) or says why it could
// not. It never waits for the server: what the server must do before the
// command runs (a root server's pids.max) is done before the call is sent,
// and the two round trips this took before cost a call about 1 ms on a
// slow machine (docs/speed.md, "Session sandbox").
const (
	slotHello = 'h' // the slot took the request: its pid in the holder follows, its credentials ride along
	slotFail  = 'f' // followed by why the command could not start
)

// RunSessionSpawner is the holder's command: it reports ready, waits for
// the server's go-ahead (a root server's pids cgroup is joined first), then
// keeps slotsIdle slots waiting until the server closes stdin.
func RunSessionSpawner(args []string) int {
	if err := insideOnly(spawnerReqFD); err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp spawner:", err)
		return 125
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp spawner:", err)
		return 125
	}
	unix.CloseOnExec(3)
	pp, err := parseProcPlan(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp spawner: the plan:", err)
		return 125
	}
	// Every slot makes a network namespace of its own (a loopback only),
	// unless the slots share the holder's: with the network on, where the
	// relay listens before the first call, or the session loopback's.
	netFlag := uintptr(unix.CLONE_NEWNET)
	if pp.Relay {
		if code := listenRelays(relayHTTPSock, relaySOCKSSock); code != 0 {
			return code
		}
	}
	if pp.SharedNet {
		netFlag = 0
	}
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return 125
	}
	var b [1]byte
	if n, _ := os.Stdin.Read(b[:]); n != 1 || b[0] != 'g' {
		return 0
	}
	var outMu sync.Mutex // guards writes of reports to stdout
	report := func(pid int, ws uint32) {
		outMu.Lock()
		defer outMu.Unlock()
		_, _ = fmt.Fprintf(os.Stdout, "%d %d\n", pid, ws)
	}
	// The slots' fresh /tmp and /dev/shm, read once from the holder's
	// mount table (each slot's is a copy of it).
	ms, err := readMountinfo()
	if err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp spawner: the mount table:", err)
		return 125
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		tp, err := planTmpfs(ms, d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "evener-mcp spawner: a private "+d+":", err)
			return 125
		}
		if tp != nil {
			pp.Tmp = append(pp.Tmp, *tp)
		}
	}
	slotPlan, err := json.Marshal(pp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp spawner:", err)
		return 125
	}
	var failing atomic.Bool // the last slot start failed (said once)
	// backoff is the wait before a slot that died idle is replaced: a
	// slot started while the session's calls hold its process bound
	// fails to make the threads the Go runtime needs and dies; it is
	// replaced after 50 ms, doubling up to a second while slots keep
	// dying, and back to 50 ms once one takes a call.
	var backoff atomic.Int64
	const backoffMin, backoffMax = int64(50 * time.Millisecond), int64(time.Second)
	backoff.Store(backoffMin)
	var start func()
	// startFailed retries a slot start that failed: the session is at its
	// process bound (EAGAIN), so again while calls end; a call waits for
	// a slot meanwhile.
	startFailed := func(err error) {
		if failing.CompareAndSwap(false, true) {
			fmt.Fprintln(os.Stderr, "evener-mcp spawner: start a slot:", err)
		}
		time.AfterFunc(time.Duration(backoffMin), start)
	}
	start = func() {
		// A pipe of the slot's own: one byte once it took a call, end of
		// file with no byte when it ended (or exec'd) without one.
		var taken [2]int
		if err := unix.Pipe2(taken[:], unix.O_CLOEXEC); err != nil {
			startFailed(err)
			return
		}
		attr := &syscall.ProcAttr{
			Dir:   "/",
			Env:   []string{"GOMAXPROCS=1", "GOGC=400"},
			Files: []uintptr{0, 1, 2, spawnerReqFD, uintptr(taken[1])},
			Sys: &syscall.SysProcAttr{
				// Per call, as a bubblewrap of its own would have them:
				// PID, mount, network (a loopback of its own; the
				// holder's with the network on), IPC and UTS
				// namespaces; made ahead of the call.
				Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS | netFlag | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
				Pdeathsig:  syscall.SIGKILL,
			},
		}
		pid, err := syscall.ForkExec(exe, []string{exe, SlotSubcommand, string(slotPlan)}, attr)
		unix.Close(taken[1])
		if err != nil {
			unix.Close(taken[0])
			startFailed(err)
			return
		}
		failing.Store(false)
		go func() {
			var t [1]byte
			n, err := unix.Read(taken[0], t[:])
			for err == unix.EINTR {
				n, err = unix.Read(taken[0], t[:])
			}
			unix.Close(taken[0])
			took := n == 1
			if took {
				// One new slot for every one taken.
				backoff.Store(backoffMin)
				start()
			}
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if err == syscall.EINTR {
					continue
				}
				if err != nil {
					return
				}
				break
			}
			switch {
			case took:
				// How the call ended (the slot became its command):
				// its pid here and its wait status, to the server.
				report(pid, uint32(ws))
			case ws.Exited() && ws.ExitStatus() == 0:
				// The request socket closed: the holder is ending.
			default:
				// Died idle (see backoff): replaced, or no call of the
				// session would find a slot again.
				d := backoff.Load()
				backoff.Store(min(2*d, backoffMax))
				time.AfterFunc(time.Duration(d), start)
			}
		}()
	}
	for range slotsIdle {
		start()
	}
	for {
		if _, err := os.Stdin.Read(b[:]); err != nil {
			return 0
		}
	}
}

// RunSessionSlot is one slot: PID 1 of its own PID namespace.
func RunSessionSlot(args []string) int {
	if err := insideOnly(slotReqFD); err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp slot:", err)
		return 125
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	die := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "evener-mcp slot: %s: %v\n", what, err)
		return 125
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return die("make mounts private", err)
	}
	// Its pid in the holder's PID namespace, read from the holder's /proc
	// before its own covers it: the spawner reports the call's end under
	// it, and the hello tells the server (the command may be over before
	// the server could look it up).
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return die("its pid in the holder", err)
	}
	const procFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("proc", "/proc", "proc", procFlags, ""); err != nil {
		return die("mount /proc", err)
	}
	pp, err := parseProcPlan(args)
	if err != nil {
		return die("the /proc plan", err)
	}
	if !pp.SharedNet {
		if err := loopbackUp(); err != nil {
			return die("bring up the loopback", err)
		}
	}
	// A /tmp and a /dev/shm of the call's own, as a bubblewrap of its own
	// would have: what the plan mounts below /tmp moves onto the new one.
	for _, tp := range pp.Tmp {
		if err := tp.apply(); err != nil {
			return die("a private "+tp.Dir, err)
		}
	}
	// What bubblewrap covers in every procfs it mounts: read-only.
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"} {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := roBind(p, p); err != nil {
			return die("cover "+p, err)
		}
	}
	// The holder's /proc plan (the same for every call of this holder:
	// a plan that differs builds a new one), applied ahead of the call.
	for _, m := range pp.Masks {
		if err := procMask(m); err != nil && !os.IsNotExist(err) {
			return die("mask "+m.Path, err)
		}
	}
	if pp.ReadOnly {
		if err := unix.Mount("", "/proc", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|procFlags, ""); err != nil {
			return die("remount /proc read-only", err)
		}
	}
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var n, oobn int
	for {
		n, oobn, _, _, err = unix.Recvmsg(slotReqFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil || n == 0 {
		return 0 // the holder is ending
	}
	_, _ = unix.Write(slotTakenFD, []byte{1})
	unix.Close(slotReqFD)
	unix.Close(slotTakenFD)
	fds, err := rightsOf(oob[:oobn])
	if err != nil || len(fds) != 4 {
		return die("request descriptors", fmt.Errorf("%d received: %v", len(fds), err))
	}
	ctl := fds[0]
	var rq slotRequest
	if err := json.Unmarshal(buf[:n], &rq); err != nil {
		return die("request", err)
	}
	fail := func(what string, err error) int {
		_, _ = unix.Write(ctl, append([]byte{slotFail}, fmt.Sprintf("%s: %v", what, err)...))
		return 125
	}
	// The server learns the call's pid from this message's credentials;
	// the slot goes on without waiting for an answer (what the server
	// must do before the command runs, it did before sending the call).
	if _, err := unix.Write(ctl, append([]byte{slotHello}, self...)); err != nil {
		return 0
	}
	// The process limit: a user server's adds the holder's own tasks to
	// procs (RLIMIT_NPROC counts them too).
	nproc := rq.Nproc
	var nprocLimit unix.Rlimit
	for _, l := range rq.Limits {
		if l[0] == unix.RLIMIT_NPROC {
			// Set last, by execConfined, right before execve: with it
			// set, the Go runtime could not start a thread it needs.
			if nproc >= 0 {
				l[1] = uint64(nproc)
			}
			// Never above the hard limit the holder got (in a session
			// loopback's user namespace its bubblewrap has procs): a
			// raise would fail.
			var cur unix.Rlimit
			if unix.Getrlimit(unix.RLIMIT_NPROC, &cur) == nil && cur.Max < l[1] {
				l[1] = cur.Max
			}
			nprocLimit = unix.Rlimit{Cur: l[1], Max: l[1]}
			continue
		}
		rl := syscall.Rlimit{Cur: l[1], Max: l[1]}
		if err := syscall.Setrlimit(int(l[0]), &rl); err != nil {
			return fail(fmt.Sprintf("resource limit %d", l[0]), err)
		}
	}
	for i, fd := range fds[1:] {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return fail("standard descriptors", err)
		}
	}
	if err := unix.Chdir(rq.Dir); err != nil {
		return fail("working directory", err)
	}
	if !rq.NoSession {
		if _, err := unix.Setsid(); err != nil {
			return fail("new session", err)
		}
	}
	path, err := lookInside(rq.Args[0], rq.Env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: execvp %s: %v\n", rq.Args[0], err)
		return 127
	}
	err = execConfined(path, rq, ctl, &nprocLimit)
	return fail("exec "+filepath.Base(path), err)
}

// insideOnly refuses to go on anywhere but where the server starts the
// spawner and the slots: as PID 1 of a PID namespace of their own, with the
// request socket (a SOCK_SEQPACKET Unix socket) at fd. Run by hand on a
// host, a slot would otherwise mount over the host's /proc and /dev/shm.
func insideOnly(fd int) error {
	if os.Getpid() != 1 {
		return fmt.Errorf("runs only inside a session sandbox (started by the server)")
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_SEQPACKET {
		return fmt.Errorf("runs only inside a session sandbox (no request socket)")
	}
	return nil
}

// execConfined execs the command from a locked thread that first gives up
// every capability and loads the seccomp filter: execve keeps the calling
// thread's credentials and filter (the slot's other threads end with it).
// It returns only on failure.
func execConfined(path string, rq slotRequest, ctl int, nproc *unix.Rlimit) error {
	runtime.LockOSThread()
	if err := dropThreadCaps(); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	// The second layer, as the per-call path's helper applies it
	// (landlock_linux.go): on this thread, before the filter, after the
	// slot's own /tmp and /proc are mounted.
	if rq.Landlock != "" {
		r, err := ParseLandlockRules(rq.Landlock)
		if err == nil {
			err = applyLandlock(r)
		}
		if err != nil {
			return fmt.Errorf("the sandbox's Landlock layer could not be applied: %w", err)
		}
	}
	if err := loadSeccomp(rq.Seccomp); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	argv, err := syscall.SlicePtrFromStrings(rq.Args)
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(rq.Env)
	if err != nil {
		return err
	}
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	// A server that gave up on the call (no hello in time) has closed
	// its end: then the command never starts.
	var b [1]byte
	if n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(ctl), uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0); e == 0 && n == 0 {
		return fmt.Errorf("the server gave up on the call")
	}
	if nproc.Max > 0 || nproc.Cur > 0 {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NPROC, uintptr(unsafe.Pointer(nproc)), 0, 0, 0); e != 0 {
			return fmt.Errorf("process limit: %w", e)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return e
}

// dropThreadCaps empties the calling thread's bounding, ambient,
// inheritable, permitted and effective sets.
func dropThreadCaps() error {
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if err == unix.EINVAL {
				break // past the last capability
			}
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// loadSeccomp installs prog on the calling thread (no_new_privs is set:
// bubblewrap set it for the whole holder).
func loadSeccomp(prog []byte) error {
	if len(prog) == 0 || len(prog)%8 != 0 {
		return fmt.Errorf("bad program (%d bytes)", len(prog))
	}
	fp := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, 0, uintptr(unsafe.Pointer(&fp)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return e
	}
	return nil
}

// procMask covers one entry of the slot's /proc as bubblewrap would: a
// file by /dev/null, a directory by an empty mode-0000 tmpfs.
func procMask(m slotMask) error {
	if _, err := os.Lstat(m.Path); err != nil {
		return err
	}
	if m.Dir {
		return unix.Mount("tmpfs", m.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0000,size=4096")
	}
	return roBind("/dev/null", m.Path)
}

// roBind binds src over dst read-only.
func roBind(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	flags := uintptr(0)
	if unix.Statfs(dst, &st) == nil {
		flags = uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	}
	return unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|flags, "")
}

// lookInside is execvp's search, with the command's own PATH.
func lookInside(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", unix.ENOENT
}

// rightsOf parses the descriptors of an SCM_RIGHTS message.
func rightsOf(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, r...)
		}
	}
	return fds, nil
}

// loopbackUp brings up the interface lo of the slot's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// mountEntry is one line of mountinfo: where, its mount options, its
// filesystem type and its superblock options.
type mountEntry struct {
	point, opts, fstype, super string
}

func readMountinfo() ([]mountEntry, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		sep := slices.Index(f, "-")
		if sep < 6 || sep+3 >= len(f) {
			continue
		}
		out = append(out, mountEntry{point: unescapeMount(f[4]), opts: f[5], fstype: f[sep+1], super: f[sep+3]})
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tmpPlan is how a slot gives its call a fresh tmpfs in place of one of the
// holder's (/tmp, /dev/shm), with the same options; what the plan mounts
// below it (Keep) is moved onto the new one. The spawner reads it from its
// mount table once, for every slot it starts (the slots' mount namespaces
// are copies of its own): read per slot, it was a tenth of a slot's start.
type tmpPlan struct {
	Dir   string
	Flags uintptr
	Data  string
	Keep  []tmpKeep
}

type tmpKeep struct {
	Point string
	Dir   bool
}

// planTmpfs is the tmpPlan for dir in the mount table ms, or nil when dir
// is not a tmpfs of the plan's (left as it is).
func planTmpfs(ms []mountEntry, dir string) (*tmpPlan, error) {
	var top *mountEntry
	var below []string
	for i := range ms {
		m := &ms[i]
		switch {
		case m.point == dir:
			top = m
			below = below[:0] // mounted over: what was below is hidden
		case strings.HasPrefix(m.point, dir+"/"):
			below = append(below, m.point)
		}
	}
	if top == nil || top.fstype != "tmpfs" {
		return nil, nil
	}
	slices.Sort(below)
	tp := &tmpPlan{Dir: dir}
	for _, p := range below {
		if n := len(tp.Keep); n > 0 && (p == tp.Keep[n-1].Point || strings.HasPrefix(p, tp.Keep[n-1].Point+"/")) {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		tp.Keep = append(tp.Keep, tmpKeep{p, fi.IsDir()})
	}
	for _, o := range strings.Split(top.opts, ",") {
		switch o {
		case "nosuid":
			tp.Flags |= unix.MS_NOSUID
		case "nodev":
			tp.Flags |= unix.MS_NODEV
		case "noexec":
			tp.Flags |= unix.MS_NOEXEC
		}
	}
	var data []string
	for _, o := range strings.Split(top.super, ",") {
		if k, _, _ := strings.Cut(o, "="); k == "size" || k == "mode" || k == "uid" || k == "gid" || k == "nr_inodes" {
			data = append(data, o)
		}
	}
	tp.Data = strings.Join(data, ",")
	return tp, nil
}

// apply mounts the fresh tmpfs (in the slot's own mount namespace).
func (tp *tmpPlan) apply() error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, k := range tp.Keep {
		fd, err := unix.OpenTree(unix.AT_FDCWD, k.Point, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("clone %s: %w", k.Point, err)
		}
		fds = append(fds, fd)
	}
	if err := unix.Mount("tmpfs", tp.Dir, "tmpfs", tp.Flags, tp.Data); err != nil {
		return err
	}
	for i, k := range tp.Keep {
		if err := os.MkdirAll(filepath.Dir(k.Point), 0o755); err != nil {
			return err
		}
		var err error
		if k.Dir {
			err = os.Mkdir(k.Point, 0o755)
		} else {
			var f *os.File
			if f, err = os.OpenFile(k.Point, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil && !os.IsExist(err) {
			return err
		}
		if err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, k.Point, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("move %s: %w", k.Point, err)
		}
	}
	return nil
}
