//go:build linux

package confine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// serverDroppedCaps are the capabilities a server started by root gives up
// at start, in every thread: those that let a process read, write or
// relabel files its uid does not own (docs/security.md, "What is enforced"). The
// in-process file layer then reaches exactly what kernel uid 0 without
// capabilities reaches, which is what a root server's sandboxed commands
// get; a root server's read_file of another user's 0600 file fails as `cat`
// does in the sandbox. The bounding set is untouched: bubblewrap, exec'd by
// uid 0, gets its full permitted set back from it (execve(2), "Capabilities
// and execution of programs by root"); the pids cgroup code needs no
// capability but uid 0's ownership of the cgroup parent it made before the
// drop.
var serverDroppedCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER,
	unix.CAP_FSETID, unix.CAP_LINUX_IMMUTABLE, unix.CAP_MKNOD,
}

// capHeader and capData are the capset(2) arguments, kept at package level
// so the addresses handed to every thread stay valid during the call.
var (
	capHeader unix.CapUserHeader
	capData   [2]unix.CapUserData
)

// DropServerCapabilities removes serverDroppedCaps from the effective and
// permitted sets of every thread of this process when it runs as euid 0,
// and checks that they are gone from each. For any other euid it does
// nothing. It must run before any file access; it fails when it cannot
// drop (a build with cgo cannot change every thread's credentials).
func DropServerCapabilities() error {
	if os.Geteuid() != 0 {
		return nil
	}
	// The one step that needs them: the parent of the sessions' pids
	// cgroups, in a cgroupfs root uid 0 may write only through
	// CAP_DAC_OVERRIDE (often mode 0555). Its outcome is kept for the
	// probe and every spawn (cgroup_linux.go).
	_, _ = PidsCgroup()
	capHeader = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&capHeader, &capData[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	for _, c := range serverDroppedCaps {
		capData[c/32].Effective &^= 1 << (c % 32)
		capData[c/32].Permitted &^= 1 << (c % 32)
	}
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&capHeader)), uintptr(unsafe.Pointer(&capData[0])), 0)
	runtime.KeepAlive(&capHeader)
	runtime.KeepAlive(&capData)
	if e != 0 {
		if e == syscall.ENOTSUP {
			return fmt.Errorf("drop capabilities of a server started by root: this build uses cgo, which cannot change every thread's credentials (build with CGO_ENABLED=0)")
		}
		return fmt.Errorf("drop capabilities of a server started by root: %w", e)
	}
	return verifyThreadCaps()
}

// verifyThreadCaps reads every thread's CapEff and CapPrm from procfs.
func verifyThreadCaps() error {
	var mask uint64
	for _, c := range serverDroppedCaps {
		mask |= 1 << c
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("verify dropped capabilities: %w", err)
	}
	for _, t := range tasks {
		eff, prm, err := threadCaps("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread exited
			}
			return fmt.Errorf("verify dropped capabilities: %w", err)
		}
		if eff&mask != 0 || prm&mask != 0 {
			return fmt.Errorf("drop capabilities of a server started by root: thread %s still holds %#x", t.Name(), (eff|prm)&mask)
		}
	}
	return nil
}

// threadCaps parses CapEff and CapPrm of one /proc status file.
func threadCaps(path string) (eff, prm uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var seen int
	for l := range strings.Lines(string(b)) {
		for i, key := range []string{"CapEff:", "CapPrm:"} {
			if v, ok := strings.CutPrefix(l, key); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("%s: %s %w", path, key, err)
				}
				if i == 0 {
					eff = n
				} else {
					prm = n
				}
				seen |= 1 << i
			}
		}
	}
	if seen != 3 {
		return 0, 0, fmt.Errorf("%s: no CapEff/CapPrm", path)
	}
	return eff, prm, nil
}
