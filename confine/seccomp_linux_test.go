//go:build amd64 || arm64

package confine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

func TestSeccompProgramAssembles(t *testing.T) {
	b, err := SeccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || len(b)%8 != 0 {
		t.Fatalf("program is %d bytes, want a non-empty multiple of 8", len(b))
	}
	if n := len(b) / 8; n >= bpfMaxInsns {
		t.Fatalf("program has %d instructions, kernel limit %d", n, bpfMaxInsns)
	}
	t.Logf("%d instructions", len(b)/8)
	b[0] ^= 0xff // callers get a copy: scribbling on it must not reach the cache
	if again, _ := SeccompProgram(); again[0] == b[0] {
		t.Fatal("SeccompProgram returned the cached slice itself")
	}

	denied := SeccompDenied()
	for _, want := range []string{
		"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
		"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
		"keyctl", "add_key", "request_key",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"bpf", "perf_event_open", "userfaultfd", "unshare", "setns",
		"kexec_load", "kexec_file_load", "init_module", "finit_module",
		"delete_module", "reboot", "swapon", "swapoff", "acct", "syslog",
		"open_by_handle_at", "name_to_handle_at", "quotactl", "lookup_dcookie",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "vhangup",
		"nfsservctl", "clone3(ENOSYS)", "ioctl(TIOCSTI|TIOCLINUX)",
		"mknodat(S_IFCHR|S_IFBLK)", "clone(CLONE_NEW*)", "personality(!=PER_LINUX)",
		"socket" + socketFamiliesLabel, "socketpair" + socketFamiliesLabel,
	} {
		if !slices.Contains(denied, want) {
			t.Errorf("SeccompDenied() lacks %q", want)
		}
	}
	if runtime.GOARCH == "amd64" {
		for _, want := range []string{"uselib", "create_module", "mknod(S_IFCHR|S_IFBLK)", "x32 ABI"} {
			if !slices.Contains(denied, want) {
				t.Errorf("SeccompDenied() lacks %q on amd64", want)
			}
		}
	}
}

// TestSeccompDecisions runs the program in x/net/bpf's interpreter over
// hand-built seccomp_data, covering every branch quickly and on any kernel.
// The interpreter loads words big-endian, so the fake seccomp_data is
// written big-endian: the filter then sees the same values the kernel would
// give it natively.
func TestSeccompDecisions(t *testing.T) {
	vm, err := bpf.NewVM(seccompInstructions())
	if err != nil {
		t.Fatal(err)
	}
	run := func(arch, nr uint32, args ...uint64) uint32 {
		var d [64]byte
		binary.BigEndian.PutUint32(d[seccompDataNr:], nr)
		binary.BigEndian.PutUint32(d[seccompDataArch:], arch)
		for i, a := range args {
			binary.BigEndian.PutUint32(d[seccompDataArgs+8*i:], uint32(a))       // low word
			binary.BigEndian.PutUint32(d[seccompDataArgs+8*i+4:], uint32(a>>32)) // high word
		}
		v, err := vm.Run(d[:])
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	native := uint32(seccompAuditArch)
	type decision struct {
		name string
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}
	cases := []decision{
		{"foreign arch", unix.AUDIT_ARCH_I386, unix.SYS_GETPID, nil, retKill},
		{"getpid", native, unix.SYS_GETPID, nil, retAllow},
		{"ptrace", native, unix.SYS_PTRACE, nil, retEPERM},
		{"vhangup (last plain)", native, unix.SYS_VHANGUP, nil, retEPERM},
		{"clone3", native, unix.SYS_CLONE3, nil, retENOSYS},
		{"ioctl TIOCSTI", native, unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, retEPERM},
		{"ioctl TIOCSTI high bits", native, unix.SYS_IOCTL, []uint64{0, 1<<32 | unix.TIOCSTI}, retEPERM},
		{"ioctl TIOCLINUX", native, unix.SYS_IOCTL, []uint64{0, unix.TIOCLINUX}, retEPERM},
		{"ioctl TCGETS", native, unix.SYS_IOCTL, []uint64{0, unix.TCGETS}, retAllow},
		{"ioctl fd=TIOCSTI", native, unix.SYS_IOCTL, []uint64{unix.TIOCSTI, unix.TCGETS}, retAllow},
		{"mknodat chr", native, unix.SYS_MKNODAT, []uint64{0, 0, unix.S_IFCHR | 0o600}, retEPERM},
		{"mknodat blk", native, unix.SYS_MKNODAT, []uint64{0, 0, unix.S_IFBLK | 0o600}, retEPERM},
		{"mknodat fifo", native, unix.SYS_MKNODAT, []uint64{0, 0, unix.S_IFIFO | 0o600}, retAllow},
		{"mknodat sock", native, unix.SYS_MKNODAT, []uint64{0, 0, unix.S_IFSOCK | 0o600}, retAllow},
		{"mknodat reg", native, unix.SYS_MKNODAT, []uint64{0, 0, unix.S_IFREG | 0o600}, retAllow},
		{"clone thread", native, unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD}, retAllow},
		{"clone fork", native, unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, retAllow},
		{"clone newnet", native, unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET | uint64(unix.SIGCHLD)}, retEPERM},
		{"clone newuser", native, unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, retEPERM},
		{"clone newcgroup", native, unix.SYS_CLONE, []uint64{unix.CLONE_NEWCGROUP}, retEPERM},
		{"personality 0", native, unix.SYS_PERSONALITY, []uint64{0}, retAllow},
		{"personality query", native, unix.SYS_PERSONALITY, []uint64{0xffffffff}, retAllow},
		{"personality PER_BSD", native, unix.SYS_PERSONALITY, []uint64{6}, retEPERM},
		{"personality ADDR_NO_RANDOMIZE", native, unix.SYS_PERSONALITY, []uint64{0x0040000}, retEPERM},
		{"socket unix", native, unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, retAllow},
		{"socket inet tcp", native, unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP}, retAllow},
		{"socket inet6 udp", native, unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, 0}, retAllow},
		{"socket inet mptcp", native, unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP}, retEPROTONOSUPPORT},
		{"socket inet6 mptcp", native, unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_STREAM, ipprotoMPTCP}, retEPROTONOSUPPORT},
		{"socket netlink route", native, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, retAllow},
		{"socket netlink audit", native, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, retEPROTONOSUPPORT},
		{"socket netlink route high bits", native, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 1 << 32}, retAllow},
		{"socket vsock", native, unix.SYS_SOCKET, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, retEAFNOSUPPORT},
		{"socket alg", native, unix.SYS_SOCKET, []uint64{unix.AF_ALG, unix.SOCK_SEQPACKET, 0}, retEAFNOSUPPORT},
		{"socket key", native, unix.SYS_SOCKET, []uint64{unix.AF_KEY, unix.SOCK_RAW, 2}, retEAFNOSUPPORT},
		{"socket tipc", native, unix.SYS_SOCKET, []uint64{unix.AF_TIPC, unix.SOCK_RDM, 0}, retEAFNOSUPPORT},
		{"socket packet", native, unix.SYS_SOCKET, []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, retEAFNOSUPPORT},
		{"socket unix|1<<32", native, unix.SYS_SOCKET, []uint64{1<<32 | unix.AF_UNIX, unix.SOCK_STREAM, 0}, retAllow},
		{"socketpair unix", native, unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, retAllow},
		{"socketpair tipc", native, unix.SYS_SOCKETPAIR, []uint64{unix.AF_TIPC, unix.SOCK_STREAM, 0}, retEAFNOSUPPORT},
		{"socketpair vsock", native, unix.SYS_SOCKETPAIR, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, retEAFNOSUPPORT},
	}
	if runtime.GOARCH == "amd64" {
		mknod := legacyMknodNr(t)
		cases = append(cases,
			decision{"x32 getpid", native, seccompX32Bit | unix.SYS_GETPID, nil, retEPERM},
			decision{"mknod chr", native, mknod, []uint64{0, unix.S_IFCHR}, retEPERM},
			decision{"mknod fifo", native, mknod, []uint64{0, unix.S_IFIFO}, retAllow})
	}
	for _, c := range cases {
		if got := run(c.arch, c.nr, c.args...); got != c.want {
			t.Errorf("%s: filter returned %#x, want %#x", c.name, got, c.want)
		}
	}
}

// legacyMknodNr finds amd64's mknod(2) number in the arch table (unix has
// no SYS_MKNOD on arm64, so it cannot be named here directly).
func legacyMknodNr(t *testing.T) uint32 {
	for _, r := range argRulesArch {
		if r.sys.name == "mknod" {
			return r.sys.nr
		}
	}
	t.Fatal("no mknod rule in argRulesArch")
	return 0
}

const seccompChildEnv = "EVENER_SECCOMP_CHILD" // value: probe directory
const probePrefix = "seccomp-probe "

// TestSeccompBwrap runs TestSeccompChild under the real kernel in bwrap,
// twice: once without the filter (the baseline shows each probe would
// otherwise succeed or fail differently, so the assertions can fail) and
// once with it. Both runs are root with --cap-add ALL inside the sandbox's
// own user namespace, so that mount, chroot, CLONE_NEWUTS and friends would
// succeed were it not for the filter.
func TestSeccompBwrap(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skipf("bubblewrap not installed: %v", err)
	}
	prog, err := SeccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	base := runSeccompChild(t, bwrap, nil, dir)
	got := runSeccompChild(t, bwrap, prog, dir)

	want := map[string]string{
		"getpid": "ok", "exec_true": "ok", "exec_newuts": "EPERM",
		"mount": "EPERM", "fsopen": "EPERM", "chroot": "EPERM",
		"unshare_user": "EPERM", "setns": "EPERM",
		"keyctl": "EPERM", "io_uring_setup": "EPERM", "bpf": "EPERM",
		"perf_event_open": "EPERM", "userfaultfd": "EPERM",
		"ptrace_traceme": "EPERM", "process_vm_readv": "EPERM",
		"ioctl_tiocsti": "EPERM", "ioctl_tiocsti_hi": "EPERM",
		"ioctl_tioclinux": "EPERM", "ioctl_tcgets": "ENOTTY",
		"mknodat_chr": "EPERM", "mknodat_blk": "EPERM",
		"mknodat_fifo": "ok", "mknodat_sock": "ok",
		"personality_bsd": "EPERM", "personality_query": "ok", "personality_zero": "ok",
		"clone3":      "ENOSYS",
		"socket_unix": "ok", "socket_inet": "ok", "socket_inet6": "ok",
		"socket_netlink_route": "ok", "socket_netlink_audit": "EPROTONOSUPPORT",
		"socket_netlink_kobject": "EPROTONOSUPPORT", "socket_vsock": "EAFNOSUPPORT",
		"socket_alg": "EAFNOSUPPORT", "socket_key": "EAFNOSUPPORT", "socket_tipc": "EAFNOSUPPORT",
		"socket_packet": "EAFNOSUPPORT", "socket_mptcp": "EPROTONOSUPPORT",
		"socketpair_unix": "ok", "socketpair_tipc": "EAFNOSUPPORT",
	}
	// Probes whose unfiltered result does not depend on host sysctls
	// (io_uring_disabled, unprivileged_bpf_disabled, perf_event_paranoid,
	// ...): the baseline must differ from the filtered expectation, proving
	// the filter, not the host, produced it.
	discriminating := []string{
		"exec_newuts", "mount", "fsopen", "chroot", "unshare_user", "setns",
		"process_vm_readv", "ioctl_tiocsti", "ioctl_tiocsti_hi", "ioctl_tioclinux",
		"mknodat_chr", "personality_bsd", "clone3",
		// The unfiltered child is root with every capability in its own
		// namespaces, so each of these is created (or fails otherwise)
		// where the host kernel has the family.
		"socket_netlink_audit", "socket_netlink_kobject",
	}
	for _, name := range []string{"socket_vsock", "socket_alg", "socket_key", "socket_tipc", "socket_packet", "socket_mptcp", "socketpair_tipc"} {
		// Only where the host kernel has the family (a module may be
		// absent): then the filter, not the kernel, produced the refusal.
		if base[name] != want[name] {
			discriminating = append(discriminating, name)
		} else {
			t.Logf("%s: the host kernel refuses it unfiltered too (%s)", name, base[name])
		}
	}
	if runtime.GOARCH == "amd64" {
		want["mknod_chr"], want["mknod_fifo"], want["x32_getpid"] = "EPERM", "ok", "EPERM"
		discriminating = append(discriminating, "mknod_chr", "x32_getpid")
	}

	for name, w := range want {
		if got[name] != w {
			t.Errorf("filtered %s = %q, want %q (unfiltered: %q)", name, got[name], w, base[name])
		}
	}
	for _, name := range discriminating {
		if base[name] == "" || base[name] == want[name] {
			t.Errorf("unfiltered %s = %q: the probe cannot tell the filter's %q from the host's", name, base[name], want[name])
		}
	}
	for name, w := range want {
		if w == "ok" && base[name] != "ok" {
			t.Errorf("unfiltered control %s = %q, want ok", name, base[name])
		}
	}
}

// runSeccompChild re-executes this test binary as TestSeccompChild inside
// bwrap, with prog (if any) on fd 3 for --seccomp, and parses its report.
func runSeccompChild(t *testing.T, bwrap string, prog []byte, dir string) map[string]string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		// --uid 0 keeps bwrap from stacking a second user namespace for the
		// sandbox uid (it does when caps are added for a non-root uid); that
		// inner namespace would not own the mount namespace, and mount would
		// fail with EPERM even unfiltered.
		"--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL",
		"--unshare-pid", "--die-with-parent",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap)
	if prog != nil {
		// A pipe holds the whole program (well under 64 KiB), so write it
		// and close the write end before bwrap reads to EOF.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := w.Write(prog); err != nil {
			t.Fatalf("writing seccomp program to pipe: %v", err)
		}
		w.Close()
		cmd.ExtraFiles = []*os.File{r} // fd 3 in bwrap
		args = append(args, "--seccomp", "3")
	}
	cmd.Args = append(append([]string{bwrap}, args...), "--", self, "-test.run=^TestSeccompChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), seccompChildEnv+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr // stdin stays /dev/null: TIOCSTI on it is ENOTTY unless filtered
	if err := cmd.Run(); err != nil {
		t.Fatalf("bwrap child (filter=%v): %v\nstdout:\n%s\nstderr:\n%s", prog != nil, err, stdout.String(), stderr.String())
	}
	res := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), probePrefix), "="); ok && strings.HasPrefix(sc.Text(), probePrefix) {
			res[name] = val
		}
	}
	if len(res) == 0 {
		t.Fatalf("bwrap child (filter=%v) reported nothing\nstdout:\n%s\nstderr:\n%s", prog != nil, stdout.String(), stderr.String())
	}
	t.Logf("filter=%v: %v", prog != nil, res)
	return res
}

// TestSeccompChild is the probe half of TestSeccompBwrap; it only runs
// when re-executed by it.
func TestSeccompChild(t *testing.T) {
	root := os.Getenv(seccompChildEnv)
	if root == "" {
		t.Skip("helper process for TestSeccompBwrap")
	}
	dir, err := os.MkdirTemp(root, "probe")
	if err != nil {
		t.Fatal(err)
	}
	filtered := seccompIsActive()
	report := func(name string, err error) {
		s := "ok"
		if err != nil {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				s = unix.ErrnoName(errno)
			} else {
				s = err.Error()
			}
		}
		fmt.Printf("%s%s=%s\n", probePrefix, name, s)
	}
	// errnoOf and closeFd take a raw Syscall's three results.
	errnoOf := func(_, _ uintptr, e syscall.Errno) error {
		if e != 0 {
			return e
		}
		return nil
	}
	closeFd := func(fd, _ uintptr, e syscall.Errno) error {
		if e == 0 {
			unix.Close(int(fd))
			return nil
		}
		return e
	}

	report("getpid", errnoOf(unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)))
	report("exec_true", exec.Command("/bin/true").Run())
	newuts := exec.Command("/bin/true")
	newuts.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	report("exec_newuts", newuts.Run())

	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	report("mount", unix.Mount("none", mnt, "tmpfs", 0, ""))
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err == nil {
		unix.Close(fsfd)
	}
	report("fsopen", err)
	report("chroot", unix.Chroot("/"))
	// The test binary is multi-threaded, so an unfiltered unshare of the
	// user namespace fails with EINVAL, never EPERM.
	report("unshare_user", unix.Unshare(unix.CLONE_NEWUSER))
	report("setns", unix.Setns(-1, 0)) // EBADF unless filtered
	_, err = unix.KeyctlGetKeyringID(unix.KEY_SPEC_PROCESS_KEYRING, false)
	report("keyctl", err)

	var uringParams [120]byte // struct io_uring_params
	report("io_uring_setup", closeFd(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&uringParams[0])), 0)))
	var bpfAttr [128]byte
	report("bpf", closeFd(unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&bpfAttr[0])), uintptr(len(bpfAttr)))))
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_TASK_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	pfd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(pfd)
	}
	report("perf_event_open", err)
	const uffdUserModeOnly = 1 // UFFD_USER_MODE_ONLY: allowed unprivileged since 5.11
	report("userfaultfd", closeFd(unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)))
	if filtered {
		// Unfiltered, TRACEME would really make bwrap our tracer and the
		// next signal would stop us; only probe it behind the filter.
		report("ptrace_traceme", errnoOf(unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)))
	}
	report("process_vm_readv", errnoOf(unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), 0, 0, 0, 0, 0)))

	// fd 0 is /dev/null: unfiltered these ioctls fail with ENOTTY.
	var c byte = 'x'
	report("ioctl_tiocsti", errnoOf(unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))))
	report("ioctl_tiocsti_hi", errnoOf(unix.Syscall(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))))
	sub := [2]byte{6, 0} // TIOCL_GETSHIFTSTATE
	report("ioctl_tioclinux", errnoOf(unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub[0])))))
	_, err = unix.IoctlGetTermios(0, unix.TCGETS)
	report("ioctl_tcgets", err)

	// Char device 0:0 is an overlayfs whiteout, which the kernel lets even
	// unprivileged users create, so unfiltered it succeeds.
	report("mknodat_chr", unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "chr"), unix.S_IFCHR|0o600, 0))
	report("mknodat_blk", unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
	report("mknodat_fifo", unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600)) // mknodat on both arches
	report("mknodat_sock", unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "sock"), unix.S_IFSOCK|0o600, 0))
	if runtime.GOARCH == "amd64" {
		nr := uintptr(legacyMknodNr(t))
		mknod := func(name string, mode uint32) error {
			p, err := unix.BytePtrFromString(filepath.Join(dir, name))
			if err != nil {
				return err
			}
			return errnoOf(unix.Syscall(nr, uintptr(unsafe.Pointer(p)), uintptr(mode), 0))
		}
		report("mknod_chr", mknod("chr2", unix.S_IFCHR|0o600))
		report("mknod_fifo", mknod("fifo2", unix.S_IFIFO|0o600))
		// x32 getpid: unfiltered it either works or is ENOSYS (no x32 ABI).
		report("x32_getpid", errnoOf(unix.RawSyscall(seccompX32Bit|unix.SYS_GETPID, 0, 0, 0)))
	}

	const perBSD = 0x0006
	old, _, e := unix.Syscall(unix.SYS_PERSONALITY, perBSD, 0, 0)
	report("personality_bsd", errnoOf(0, 0, e))
	if e == 0 {
		unix.Syscall(unix.SYS_PERSONALITY, old, 0, 0)
	}
	report("personality_query", errnoOf(unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)))
	report("personality_zero", errnoOf(unix.Syscall(unix.SYS_PERSONALITY, 0, 0, 0)))

	sock := func(name string, domain, typ, proto int) {
		fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		if err == nil {
			unix.Close(fd)
		}
		report(name, err)
	}
	sock("socket_unix", unix.AF_UNIX, unix.SOCK_STREAM, 0)
	sock("socket_inet", unix.AF_INET, unix.SOCK_STREAM, 0)
	sock("socket_inet6", unix.AF_INET6, unix.SOCK_DGRAM, 0)
	sock("socket_netlink_route", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	sock("socket_netlink_audit", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
	sock("socket_netlink_kobject", unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_KOBJECT_UEVENT)
	sock("socket_vsock", unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	sock("socket_alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0)
	sock("socket_key", unix.AF_KEY, unix.SOCK_RAW, 2) // PF_KEY_V2
	sock("socket_tipc", unix.AF_TIPC, unix.SOCK_RDM, 0)
	sock("socket_packet", unix.AF_PACKET, unix.SOCK_DGRAM, 0)
	sock("socket_mptcp", unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP)
	pair := func(name string, domain int) {
		fds, err := unix.Socketpair(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		report(name, err)
	}
	pair("socketpair_unix", unix.AF_UNIX)
	pair("socketpair_tipc", unix.AF_TIPC)

	// struct clone_args (CLONE_ARGS_SIZE_VER2, 88 bytes), zeroed but for an
	// invalid exit_signal: should the filter fail to stop clone3, the kernel
	// answers EINVAL instead of forking a copy of this Go runtime.
	var cloneArgs [11]uint64
	cloneArgs[4] = 1 << 40 // exit_signal
	report("clone3", errnoOf(unix.Syscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&cloneArgs[0])), unsafe.Sizeof(cloneArgs), 0)))
}

// seccompIsActive reads the Seccomp: line of /proc/self/status (2 = filter).
func seccompIsActive() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "Seccomp:"); ok {
			return strings.TrimSpace(v) == "2"
		}
	}
	return false
}

// TestSeccompEveryNumber: for every syscall number, the filter's answer
// (with zeroed arguments) is exactly what the lists say: EPERM for the
// refused ones, ENOSYS for clone3, EAFNOSUPPORT for socket and socketpair
// (domain 0 is AF_UNSPEC), and allow for all the others (the other
// argument rules allow zero arguments; personality(0) is PER_LINUX).
// Guards the binary-search layout. Then, for socket and socketpair, every
// domain below 64 against every protocol of interest: only the four
// allowed (family, protocol) shapes pass.
func TestSeccompEveryNumber(t *testing.T) {
	vm, err := bpf.NewVM(seccompInstructions())
	if err != nil {
		t.Fatal(err)
	}
	denied := map[uint32]bool{}
	for _, s := range append(append([]syscallNr{}, denyCommon...), denyArch...) {
		denied[s.nr] = true
	}
	for nr := uint32(0); nr < 1024; nr++ {
		var d [64]byte
		binary.BigEndian.PutUint32(d[seccompDataNr:], nr)
		binary.BigEndian.PutUint32(d[seccompDataArch:], uint32(seccompAuditArch))
		v, err := vm.Run(d[:])
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(retAllow)
		switch {
		case denied[nr]:
			want = retEPERM
		case nr == clone3Nr.nr:
			want = retENOSYS
		case nr == unix.SYS_SOCKET || nr == unix.SYS_SOCKETPAIR:
			want = retEAFNOSUPPORT
		}
		if uint32(v) != want {
			t.Errorf("syscall %d: filter answers %#x, want %#x", nr, v, want)
		}
	}
	for _, s := range socketSyscalls {
		for domain := uint32(0); domain < 64; domain++ {
			for _, proto := range []uint32{0, 1, 2, 6, 9, 17, 255, ipprotoMPTCP, 0xffffffff} {
				var d [64]byte
				binary.BigEndian.PutUint32(d[seccompDataNr:], s.nr)
				binary.BigEndian.PutUint32(d[seccompDataArch:], uint32(seccompAuditArch))
				binary.BigEndian.PutUint32(d[seccompDataArgs:], domain)
				binary.BigEndian.PutUint32(d[seccompDataArgs+8:], unix.SOCK_STREAM)
				binary.BigEndian.PutUint32(d[seccompDataArgs+16:], proto)
				v, err := vm.Run(d[:])
				if err != nil {
					t.Fatal(err)
				}
				want := uint32(retEAFNOSUPPORT)
				switch domain {
				case unix.AF_UNIX:
					want = retAllow
				case unix.AF_INET, unix.AF_INET6:
					want = retAllow
					if proto == ipprotoMPTCP {
						want = retEPROTONOSUPPORT
					}
				case unix.AF_NETLINK:
					want = retEPROTONOSUPPORT
					if proto == unix.NETLINK_ROUTE {
						want = retAllow
					}
				}
				if uint32(v) != want {
					t.Errorf("%s(%d, SOCK_STREAM, %d): filter answers %#x, want %#x", s.name, domain, proto, v, want)
				}
			}
		}
	}
}
