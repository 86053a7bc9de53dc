package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Landlock layer's Linux half (landlock.go): the launcher's hook that
// puts the helper in front of the command, the helper itself, and the
// system calls.

// Test hooks, set only by this package's tests before any spawn:
// widenPlanForTest changes the mount plan after the Landlock rules were
// derived (a mount-plan bug), widenArgsForTest bubblewrap's namespace
// options (a dropped --unshare-net or --unshare-pid), landlockOffForTest
// leaves the layer out.
var (
	widenPlanForTest   func(MountPlan) MountPlan
	widenArgsForTest   func([]string) []string
	landlockOffForTest bool
)

// landlockOn reports whether spawns under p get the Landlock layer.
func landlockOn(p *Policy) bool {
	return !landlockOffForTest && strings.HasPrefix(p.SecondLayer(), "landlock")
}

// landlockWrap is prepare's hook: it derives the spawn's rules, puts the
// helper in front of cmdArgs (unless the egress relay already runs there:
// it applies them itself) and returns the plan (with this binary bound
// where the relay would be, when it is not) and the rules for the
// command's environment ("" when the layer is off).
func (s *Launcher) landlockWrap(p *Policy, l Layout, plan MountPlan, cmdArgs []string, network Network) (MountPlan, []string, string, error) {
	if !landlockOn(p) {
		return widenIfTest(plan), cmdArgs, "", nil
	}
	r := RulesForLandlock(p, l, network)
	r.HostNetNS = hostNetNS()
	if len(cmdArgs) > 1 && cmdArgs[0] == relayExe && cmdArgs[1] == RelaySubcommand {
		return widenIfTest(plan), cmdArgs, r.Encode(), nil
	}
	helper := relayExe // bound already with the network on
	if l.Egress == nil {
		helper = landlockExe
		exe, err := landlockHelper()
		if err != nil {
			return nil, nil, "", fmt.Errorf("%w: %v", ErrSandboxSetup, err)
		}
		if k, _ := lstatKind(exe); k != PathFile {
			return nil, nil, "", fmt.Errorf("%w: the Landlock helper %s is missing or not what it was", ErrUnsafeLayout, exe)
		}
		plan = append(plan, Mount{Kind: MountROBind, Src: exe, Dst: landlockExe, Why: "second layer: the Landlock helper (this binary)"})
	}
	cmdArgs = append([]string{helper, LandlockSubcommand, "--"}, cmdArgs...)
	return widenIfTest(plan), cmdArgs, r.Encode(), nil
}

func widenArgsIfTest(args []string) []string {
	if widenArgsForTest != nil {
		return widenArgsForTest(args)
	}
	return args
}

func widenIfTest(plan MountPlan) MountPlan {
	if widenPlanForTest != nil {
		return widenPlanForTest(plan)
	}
	return plan
}

// withLandlockEnv sets LandlockEnv in env to spec, dropping any value a
// caller put there ("" drops it only).
func withLandlockEnv(env []string, spec string) []string {
	out := env[:0:0]
	for _, e := range env {
		// The backend's variable too (landlock_backend_linux.go): only
		// the launcher sets either.
		if !strings.HasPrefix(e, LandlockEnv+"=") && !strings.HasPrefix(e, LandlockBackendEnv+"=") {
			out = append(out, e)
		}
	}
	if spec != "" {
		out = append(out, LandlockEnv+"="+spec)
	}
	return out
}

// landlockExe is where the helper is bound in a sandbox with no egress
// relay (which would carry it).
const landlockExe = "/tmp/.evener-landlock/evener-mcp"

var landlockHelperOnce struct {
	sync.Once // guards exe and err, set once
	exe       string
	err       error
}

// landlockHelper is the binary that carries the helper (the relay's).
func landlockHelper() (string, error) {
	h := &landlockHelperOnce
	h.Do(func() { h.exe, h.err = relayBinary() })
	return h.exe, h.err
}

var hostNetNSOnce struct {
	sync.Once // guards id, set once
	id        string
}

// hostNetNS identifies this process's network namespace ("dev:ino").
func hostNetNS() string {
	h := &hostNetNSOnce
	h.Do(func() { h.id = netNSID() })
	return h.id
}

func netNSID() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// RunLandlock is the hidden helper's body: apply the rules LandlockEnv
// carries to this thread, then exec the command (looked up in PATH as
// bubblewrap's execvp would, failing as it did: exit 1).
func RunLandlock(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp landlock: no command")
		return 125
	}
	if _, ok := os.LookupEnv(LandlockEnv); !ok {
		// The helper runs only in front of a command the layer binds.
		fmt.Fprintln(os.Stderr, "evener-mcp: the sandbox's Landlock layer could not be applied: no rules")
		return 125
	}
	runtime.LockOSThread() // the ruleset binds this thread, which execs
	backend, code := landlockBackendPre()
	if code != 0 {
		return code
	}
	if code := landlockSelf(); code != 0 {
		return code
	}
	if backend != nil {
		if err := backend.post(); err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: the landlock backend could not confine the command: %v\n", err)
			return 125
		}
	}
	path := args[0]
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			fmt.Fprintf(os.Stderr, "evener-mcp: execvp %s: %v\n", path, syscall.ENOENT)
			return 1
		}
		path = lp
	}
	err := syscall.Exec(path, args, os.Environ())
	if errors.Is(err, syscall.ENOEXEC) {
		// A script without an interpreter line: execvp hands it to sh.
		err = syscall.Exec("/bin/sh", append([]string{"sh", path}, args[1:]...), os.Environ())
	}
	fmt.Fprintf(os.Stderr, "evener-mcp: execvp %s: %v\n", args[0], err)
	return 1
}

// landlockSelf applies LandlockEnv's rules to the calling thread (locked by
// the caller) and removes the variable; non-zero is the exit code of a
// failure. Without the variable it does nothing.
func landlockSelf() int {
	spec, ok := os.LookupEnv(LandlockEnv)
	if !ok {
		return 0
	}
	os.Unsetenv(LandlockEnv)
	r, err := ParseLandlockRules(spec)
	if err == nil {
		err = applyLandlock(r)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: the sandbox's Landlock layer could not be applied: %v\n", err)
		return 125
	}
	return 0
}

// Landlock access rights (include/uapi/linux/landlock.h).
const (
	llFSv1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llRead  = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llWrite = llRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_SYM |
		unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	llDev = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llProc = llRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	llList = unix.LANDLOCK_ACCESS_FS_READ_DIR
	// llFile are the rights a rule on a file (not a directory) may carry.
	llFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	llRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT
)

// llNetPortAttr is struct landlock_net_port_attr.
type llNetPortAttr struct {
	allowed uint64
	port    uint64
}

// applyLandlock restricts the calling thread (and what it execs) by r.
func applyLandlock(r LandlockRules) error {
	abi := landlockABI()
	if abi < LandlockMinABI {
		return fmt.Errorf("landlock ABI %d (need %d)", abi, LandlockMinABI)
	}
	handled := uint64(llFSv1 | unix.LANDLOCK_ACCESS_FS_REFER)
	if abi >= 3 {
		handled |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	size := unsafe.Offsetof(attr.Handled_access_net)
	guardTCP := abi >= 4 && r.GuardTCP && r.HostNetNS != "" && netNSID() == r.HostNetNS
	if guardTCP {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		if r.GuardBind {
			attr.Handled_access_net |= unix.LANDLOCK_ACCESS_NET_BIND_TCP
		}
	}
	if abi >= 4 {
		size = unsafe.Offsetof(attr.Scoped)
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Offsetof(attr.Quiet_access_fs)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, g := range []struct {
		paths  []string
		access uint64
	}{
		{r.Read, llRead}, {r.List, llList}, {r.Write, llWrite}, {r.Dev, llDev}, {r.Proc, llProc},
	} {
		for _, p := range g.paths {
			if err := addPathRule(int(fd), p, g.access&handled); err != nil {
				return err
			}
		}
	}
	if guardTCP {
		for _, port := range r.TCPPorts {
			a := llNetPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
			if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, llRuleNetPort, uintptr(unsafe.Pointer(&a)), 0, 0, 0); errno != 0 {
				return fmt.Errorf("landlock_add_rule port %d: %w", port, errno)
			}
		}
	}
	// bubblewrap set no_new_privs for the seccomp filter; set again, so
	// the helper never depends on it.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// addPathRule grants access beneath path (following a link, as the
// sandbox resolves it); a path this sandbox does not have is granted
// nothing.
func addPathRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EACCES) {
			return nil
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFile
	}
	if access == 0 {
		return nil
	}
	a := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&a)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", path, errno)
	}
	return nil
}
