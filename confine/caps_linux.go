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

// dropCapsEnv carries, in hex, the mask of capabilities a binary is to
// drop before its Go runtime starts (caps_cgo_linux.go): set by a build
// with cgo that re-executes itself (below), and by evener-mcp for the
// server binary it execs in its place (DropBeforeExec). It is read and
// removed when the package initialises, so no process the server starts
// inherits it.
const dropCapsEnv = "EVENER_MCP_DROP_CAPS"

// dropCapsAsked: this image was started with dropCapsEnv set. Written once
// at init, read only after.
var dropCapsAsked bool

func init() {
	if _, ok := os.LookupEnv(dropCapsEnv); ok {
		dropCapsAsked = true
		_ = os.Unsetenv(dropCapsEnv)
	}
}

// droppedMask is serverDroppedCaps as a 64-bit capability mask.
func droppedMask() uint64 {
	var mask uint64
	for _, c := range serverDroppedCaps {
		mask |= 1 << c
	}
	return mask
}

// DropServerCapabilities removes serverDroppedCaps from the effective and
// permitted sets of every thread of this process when it runs as euid 0,
// and checks that they are gone from each. For any other euid it does
// nothing. It must run before any file access, and before anything reads
// stdin (it may re-execute the binary); it fails when it cannot drop.
//
// A build without cgo changes every thread at once
// (syscall.AllThreadsSyscall). A build with cgo cannot: threads the C
// side may have made are not the Go runtime's. It re-executes itself
// (/proc/self/exe, same pid, arguments and descriptors) with dropCapsEnv
// set, and a constructor drops the capabilities in the new image while it
// still has one thread, before the runtime starts any other; every thread
// made afterwards copies that thread's sets. Dropping before the execve
// would not do: a program exec'd by uid 0 gets its permitted set refilled
// from the bounding set (execve(2), "Capabilities and execution of
// programs by root"), which is left whole so bubblewrap keeps getting what
// it needs. The new image ends with exactly the sets a build without cgo
// has, and never re-executes again: an image started with dropCapsEnv
// that still holds the capabilities refuses to start.
func DropServerCapabilities() error {
	if os.Geteuid() != 0 {
		return nil
	}
	// The one step that needs them: the parent of the sessions' pids
	// cgroups, in a cgroupfs root uid 0 may write only through
	// CAP_DAC_OVERRIDE (often mode 0555). Its outcome is kept for the
	// probe and every spawn (cgroup_linux.go). An image that starts
	// without them finds the parent its predecessor made.
	_, _ = PidsCgroup()
	mask := droppedMask()
	capHeader = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&capHeader, &capData[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	held := (uint64(capData[0].Effective|capData[0].Permitted) | uint64(capData[1].Effective|capData[1].Permitted)<<32) & mask
	if held == 0 {
		// Dropped before the runtime started, or by the process that
		// exec'd this one with no way back (its bounding set): every
		// thread inherited the sets. Check them all.
		return verifyThreadCaps()
	}
	for _, c := range serverDroppedCaps {
		capData[c/32].Effective &^= 1 << (c % 32)
		capData[c/32].Permitted &^= 1 << (c % 32)
	}
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&capHeader)), uintptr(unsafe.Pointer(&capData[0])), 0)
	runtime.KeepAlive(&capHeader)
	runtime.KeepAlive(&capData)
	if e == syscall.ENOTSUP && cgoBuild {
		if dropCapsAsked {
			return earlyDropFailed(held)
		}
		return reexecDropping(mask)
	}
	if e != 0 {
		return fmt.Errorf("drop capabilities of a server started by root: %w", e)
	}
	return verifyThreadCaps()
}

// reexecDropping replaces this image with a new one of the same binary
// that drops mask before its runtime starts. It returns only on failure.
func reexecDropping(mask uint64) error {
	env := append(os.Environ(), dropCapsEnv+"="+strconv.FormatUint(mask, 16))
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	return fmt.Errorf("drop capabilities of a server started by root: re-execute this cgo build without them: %w", err)
}

// earlyDropFailed is why an image started with dropCapsEnv still holds
// the capabilities held: never a reason to re-execute once more.
func earlyDropFailed(held uint64) error {
	asked, err := earlyDrop()
	switch {
	case err != nil:
		return fmt.Errorf("drop capabilities of a server started by root: before the runtime started: %w", err)
	case !asked:
		// The constructor never ran: a binary linked by Go's internal
		// linker runs no C constructors.
		return fmt.Errorf("drop capabilities of a server started by root: this cgo build ran no C constructor (linked with -linkmode=internal?); build with the default linker or with CGO_ENABLED=0")
	}
	return fmt.Errorf("drop capabilities of a server started by root: still holding %#x after dropping before the runtime started", held)
}

// DropBeforeExec is DropServerCapabilities for a process that is about to
// exec, in its place, a binary that drops for itself (evener-mcp's server
// binary), and returns the environment entries for that exec. When this
// process runs as euid 0, the entry asks the next binary, if built with
// cgo, to drop before its runtime starts (so it need not re-execute). A
// build without cgo drops here at once, as DropServerCapabilities does; a
// build with cgo only makes the pids cgroup parent, which needs the
// capabilities, and leaves them to the next image rather than pay a
// re-execution of its own for the few path lookups before the exec.
func DropBeforeExec() ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if cgoBuild {
		_, _ = PidsCgroup()
	} else if err := DropServerCapabilities(); err != nil {
		return nil, err
	}
	return []string{dropCapsEnv + "=" + strconv.FormatUint(droppedMask(), 16)}, nil
}

// verifyThreadCaps reads every thread's CapEff and CapPrm from procfs.
func verifyThreadCaps() error {
	mask := droppedMask()
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
