package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel never applies RLIMIT_NPROC to processes of host uid 0, and a
// sandbox started by a root server still runs as host uid 0. For such a
// server the process limit is one pids cgroup per session (per Launcher)
// instead, whose pids.max is the policy's procs: every sandbox of the
// session is born in it (cgroup v1: the thread that starts bwrap entered
// it) or moved into it while bubblewrap holds it on the block descriptor
// (cgroup v2), so every process any command of the session ever forks is
// counted against the one limit.
//
// The parent of the session cgroups is made by a server while it still has
// every capability (DropServerCapabilities calls PidsCgroup before it
// drops them): a cgroupfs root is often mode 0555, writable to uid 0 only
// through CAP_DAC_OVERRIDE, and the parent made (0755, owned by uid 0) is
// writable to it without.

// pidsController is where a pids cgroup can be created, or nil.
type pidsController struct {
	dir string // parent directory of the session cgroups
	v2  bool   // the unified hierarchy (a process moves whole, never one thread)
}

var (
	pidsOnce sync.Once
	pidsCtl  *pidsController
	pidsErr  error
	pidsSeq  atomic.Uint64
)

// pidsParentEnv names, for tests only, the parent of the session cgroups
// in place of "evener-mcp" (one path component): a test can then start a
// root server whose parent does not exist yet without touching the one
// other servers on the host use.
const pidsParentEnv = "EVENER_MCP_TEST_PIDS_PARENT"

func pidsParentName() string {
	n := os.Getenv(pidsParentEnv)
	if n == "" || n == "." || n == ".." || len(n) > 64 || strings.ContainsFunc(n, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		return "evener-mcp"
	}
	return n
}

// PidsCgroup reports whether session pids cgroups are available (root
// servers only) and, when not, why. The first call prepares their parent:
// DropServerCapabilities makes it before it drops the capabilities.
func PidsCgroup() (string, error) {
	pidsOnce.Do(func() { pidsCtl, pidsErr = findPidsController() })
	if pidsErr != nil {
		return "", pidsErr
	}
	return pidsCtl.dir, nil
}

// errNotRoot: RLIMIT_NPROC binds the server's sandboxes, no cgroup needed.
var errNotRoot = errors.New("not root: RLIMIT_NPROC applies")

func findPidsController() (*pidsController, error) {
	if os.Geteuid() != 0 {
		return nil, errNotRoot
	}
	name := pidsParentName()
	// cgroup v1 with a pids hierarchy.
	v1 := "/sys/fs/cgroup/pids"
	if isFS(v1, unix.CGROUP_SUPER_MAGIC) {
		return prepare(filepath.Join(v1, name), false)
	}
	// cgroup v2: the unified hierarchy, wherever it is mounted.
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if !isFS(root, unix.CGROUP2_SUPER_MAGIC) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil || !strings.Contains(" "+string(b)+" ", " pids") {
			continue
		}
		if err := enable(root); err != nil {
			return nil, err
		}
		return prepare(filepath.Join(root, name), true)
	}
	return nil, errors.New("no pids cgroup controller mounted")
}

func isFS(p string, magic int64) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && int64(st.Type) == magic
}

func enable(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
		return fmt.Errorf("enable pids in %s: %w", dir, err)
	}
	return nil
}

func prepare(dir string, v2 bool) (*pidsController, error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// Usable once the capabilities are gone: a directory uid 0 owns and
	// may write by its mode, on a writable mount.
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Uid != 0 || st.Mode&0o300 != 0o300 {
		return nil, fmt.Errorf("%s (mode %#o, owner %d) is not writable without CAP_DAC_OVERRIDE", dir, st.Mode&0o7777, st.Uid)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || fs.Flags&unix.ST_RDONLY != 0 {
		return nil, fmt.Errorf("%s is on a read-only mount", dir)
	}
	if v2 {
		if err := enable(dir); err != nil {
			return nil, err
		}
	}
	sweepStale(dir)
	return &pidsController{dir: dir, v2: v2}, nil
}

// newSessionCgroup creates one session's cgroup limited to max processes.
func newSessionCgroup(max int64) (string, error) {
	parent, err := PidsCgroup()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(parent, fmt.Sprintf("%d-%d", os.Getpid(), pidsSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the session pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(max, 10)), 0); err != nil {
		removePidsCgroup(dir)
		return "", fmt.Errorf("set pids.max: %w", err)
	}
	return dir, nil
}

func joinPidsCgroup(dir string, pids ...int) error {
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("move %d into the pids cgroup: %w", pid, err)
		}
	}
	return nil
}

// inCgroup reports whether pid is a member of the cgroup directory dir.
func inCgroup(pid int, dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	want := strconv.Itoa(pid)
	for _, l := range strings.Split(string(b), "\n") {
		if l == want {
			return true
		}
	}
	return false
}

// killCgroup sends SIGKILL to every process in the cgroup dir but this
// server (a thread of it may still be there: startInCgroup).
func killCgroup(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, l := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(l); err == nil && pid > 1 && pid != os.Getpid() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// removePidsCgroup removes a cgroup once its processes are gone: the
// kernel may take a while to release the last exited task (hundreds of
// killed processes under load), so it retries with backoff for up to 10 s.
func removePidsCgroup(dir string) {
	deadline := time.Now().Add(10 * time.Second)
	// The sandbox's init usually finishes exiting (its mount namespace
	// torn down) within a millisecond of bwrap: the first retries are
	// short.
	for wait := 100 * time.Microsecond; ; wait = min(wait*2, 200*time.Millisecond) {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return
		}
		time.Sleep(wait)
	}
}

// spawner is one locked OS thread living in a session's pids cgroup (cgroup
// v1, where a single thread can be moved): every bubblewrap it starts is
// born in that cgroup, so a spawn pays no thread of its own entering it
// (startInCgroup).
type spawner struct {
	dir  string
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// newSpawner moves a dedicated thread into the session cgroup dir (cgroup
// v1 only: v2 moves whole processes).
func newSpawner(dir string) (*spawner, error) {
	if pidsCtl == nil || pidsCtl.v2 {
		return nil, errors.New("no cgroup v1 pids hierarchy")
	}
	sp := &spawner{dir: dir, reqs: make(chan spawnReq), done: make(chan struct{})}
	ready := make(chan error, 1)
	onOwnThread(func() { sp.serve(ready) })
	if err := <-ready; err != nil {
		<-sp.done
		return nil, err
	}
	return sp, nil
}

// serve runs on a locked thread that is not the main thread: it moves the
// thread into the cgroup and starts commands until stop. Returning while
// locked ends the thread (it lives in the session's cgroup and must not go
// back to the runtime's pool).
func (sp *spawner) serve(ready chan<- error) {
	defer close(sp.done)
	if err := joinSelf(sp.dir); err != nil {
		runtime.UnlockOSThread() // never moved: the thread may serve others again
		ready <- fmt.Errorf("move the spawner thread: %w", err)
		return
	}
	ready <- nil
	for r := range sp.reqs {
		r.err <- r.cmd.Start()
	}
}

// start starts cmd from the spawner's thread.
func (sp *spawner) start(cmd *exec.Cmd) error {
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	sp.reqs <- r
	return <-r.err
}

// stop ends the thread, which leaves the session cgroup. Callers kill the
// session's processes first (they would get SIGKILL anyway: their parent
// death signal follows the thread that started them), then remove it.
func (sp *spawner) stop() {
	close(sp.reqs)
	<-sp.done
}

// onOwnThread runs f on a goroutine locked to an OS thread that is not the
// main thread. If f returns still locked, the thread ends with it (a
// thread left in a spawn's cgroup must never start anything else); f
// unlocks it to give it back to the runtime. The main thread is never
// terminated (a locked goroutine that ends on it only parks it), so it is
// not used: it is held while another goroutine, which therefore cannot be
// scheduled there, locks a thread of its own.
func onOwnThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// joinSelf moves the calling thread, alone, into the cgroup v1 directory
// dir. Written as "0" (the writer itself), the move takes no global lock:
// it costs no RCU grace period, unlike moving another task.
func joinSelf(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte("0"), 0); err != nil {
		return fmt.Errorf("move a thread into %s: %w", dir, err)
	}
	return nil
}

// threadPidsCgroup is the cgroup v1 pids directory the calling thread is in.
func threadPidsCgroup() (string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(string(b)) {
		// "ID:CONTROLLERS:PATH", CONTROLLERS a comma list.
		_, rest, _ := strings.Cut(strings.TrimSpace(l), ":")
		ctl, path, ok := strings.Cut(rest, ":")
		if ok && slices.Contains(strings.Split(ctl, ","), "pids") && filepath.IsAbs(path) {
			return filepath.Join(filepath.Dir(pidsCtl.dir), path), nil
		}
	}
	return "", errors.New("no pids cgroup in /proc/thread-self/cgroup")
}

// startInCgroup starts cmd (cgroup v1) from a thread of its own that first
// moved itself into dir, so the process is born there and no task is ever
// migrated into dir by another (see joinSelf). The thread then moves back
// where it came from and returns to the runtime. If it cannot, it stays
// apart and ends once stuck is closed (after cmd ended: bwrap's parent
// death signal follows the thread that started it). joined is false when
// the thread could not enter dir (cmd was not started: the caller starts it
// the usual way); otherwise err is cmd.Start's.
func startInCgroup(dir string, cmd *exec.Cmd, stuck <-chan struct{}) (joined bool, err error) {
	type result struct {
		joined bool
		err    error
	}
	res := make(chan result, 1)
	onOwnThread(func() {
		from, err := threadPidsCgroup()
		if err == nil {
			err = joinSelf(dir)
		}
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{false, err}
			return
		}
		err = cmd.Start()
		if joinSelf(from) == nil {
			runtime.UnlockOSThread()
			res <- result{true, err}
			return
		}
		res <- result{true, err}
		if err == nil {
			<-stuck
		}
	})
	r := <-res
	return r.joined, r.err
}

// sweepStale removes the empty cgroups of servers that are gone (killed
// before they could remove their own): each is named after its server's
// pid. A cgroup still holding tasks is left (rmdir refuses it).
func sweepStale(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, _, ok := strings.Cut(e.Name(), "-")
		if !e.IsDir() || !ok {
			continue
		}
		if n, err := strconv.Atoi(pid); err != nil || n == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // alive (or the pid was reused): not ours to judge
		}
		_ = unix.Rmdir(filepath.Join(dir, e.Name()))
	}
}
