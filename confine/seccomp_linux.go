//go:build amd64 || arm64

package confine

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The filter is a classic-BPF program over struct seccomp_data, handed to
// bubblewrap's --seccomp FD. bwrap reads the raw struct sock_filter array
// (u16 code, u8 jt, u8 jf, u32 k; native endian) and installs it with
// PR_SET_NO_NEW_PRIVS just before exec'ing the sandboxed command.
//
// Shape, chosen so no jump ever needs more than an 8-bit offset:
//
//	ld arch; jeq NATIVE ? next : KILL_PROCESS
//	ld nr
//	[amd64] jset x32-bit -> EPERM
//	per refused syscall:   jeq nr ? next : skip 1 ; ret EPERM
//	clone3:                jeq nr ? next : skip 1 ; ret ENOSYS
//	per argument rule:     jeq nr ? next : skip block ; ld arg ; [and mask] ;
//	                       tests... -> ret onMatch ; ret otherwise
//	socket, socketpair:    jeq nr ? next : skip block ; ld domain ; family
//	                       tests ; ld protocol ; protocol tests ; returns
//	ret ALLOW
//
// Every argument rule ends in a return, so the accumulator never has to be
// reloaded with the syscall number.

// seccomp_data offsets (include/uapi/linux/seccomp.h).
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16 // args[i] is a u64 at 16+8*i
)

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	// clone3 gets ENOSYS rather than EPERM: its flags live in user memory,
	// which BPF cannot inspect, and glibc (and others) fall back to clone(2),
	// whose flags we can check, only on ENOSYS.
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// bpfMaxInsns is BPF_MAXINSNS; the kernel refuses longer programs.
const bpfMaxInsns = 4096

type syscallNr struct {
	name string
	nr   uint32
}

// argRule refuses (or, for personality, allows) one syscall depending on
// the low 32 bits of one argument. Reading only the low word is enough for
// every rule here: the kernel itself truncates ioctl's cmd, personality's
// persona and mknod's mode to 32 bits or fewer, and clone(2) uses only the
// lower 32 bits of its flags.
type argRule struct {
	sys       syscallNr
	label     string // how SeccompDenied reports it
	arg       int
	mask      uint32 // ANDed into the argument first when non-zero
	tests     []bpf.JumpIf
	onMatch   uint32 // returned when any test holds
	otherwise uint32
}

// denyCommon are refused with EPERM on every supported arch.
var denyCommon = []syscallNr{
	// Inspecting or tampering with other processes.
	{"ptrace", unix.SYS_PTRACE},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	{"kcmp", unix.SYS_KCMP},
	// Reshaping the filesystem view bwrap built (old and new mount APIs).
	{"mount", unix.SYS_MOUNT},
	{"umount2", unix.SYS_UMOUNT2},
	{"pivot_root", unix.SYS_PIVOT_ROOT},
	{"chroot", unix.SYS_CHROOT},
	{"move_mount", unix.SYS_MOVE_MOUNT},
	{"open_tree", unix.SYS_OPEN_TREE},
	{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR},
	{"fsopen", unix.SYS_FSOPEN},
	{"fsconfig", unix.SYS_FSCONFIG},
	{"fsmount", unix.SYS_FSMOUNT},
	{"fspick", unix.SYS_FSPICK},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR},
	// The kernel keyring is not namespaced: it would leak host secrets.
	{"keyctl", unix.SYS_KEYCTL},
	{"add_key", unix.SYS_ADD_KEY},
	{"request_key", unix.SYS_REQUEST_KEY},
	// Large kernel attack surface, and io_uring bypasses seccomp entirely
	// for the operations it submits.
	{"io_uring_setup", unix.SYS_IO_URING_SETUP},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER},
	{"bpf", unix.SYS_BPF},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
	{"userfaultfd", unix.SYS_USERFAULTFD},
	// Namespace escapes; bwrap already limits these, keep a second wall.
	{"unshare", unix.SYS_UNSHARE},
	{"setns", unix.SYS_SETNS},
	// Host administration a build or a tool never needs.
	{"kexec_load", unix.SYS_KEXEC_LOAD},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE},
	{"finit_module", unix.SYS_FINIT_MODULE},
	{"delete_module", unix.SYS_DELETE_MODULE},
	{"reboot", unix.SYS_REBOOT},
	{"swapon", unix.SYS_SWAPON},
	{"swapoff", unix.SYS_SWAPOFF},
	{"acct", unix.SYS_ACCT},
	{"syslog", unix.SYS_SYSLOG},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT}, // escapes bind mounts by inode handle
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	{"quotactl", unix.SYS_QUOTACTL},
	{"quotactl_fd", unix.SYS_QUOTACTL_FD},
	{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
	{"nfsservctl", unix.SYS_NFSSERVCTL},
	{"settimeofday", unix.SYS_SETTIMEOFDAY},
	{"clock_settime", unix.SYS_CLOCK_SETTIME},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME},
	{"adjtimex", unix.SYS_ADJTIMEX},
	{"vhangup", unix.SYS_VHANGUP},
}

// cloneNamespaces are the clone(2) flags that create namespaces; a sandboxed
// process must not build its own (CLONE_NEWTIME only exists for clone3 and
// unshare, both refused outright).
const cloneNamespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWNET | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP

// mknodDevice refuses creating character or block devices; FIFOs, sockets
// and regular files made through mknod stay allowed (mkfifo uses mknodat).
func mknodDevice(name string, nr uint32, modeArg int) argRule {
	return argRule{
		sys:   syscallNr{name, nr},
		label: name + "(S_IFCHR|S_IFBLK)",
		arg:   modeArg,
		mask:  unix.S_IFMT,
		tests: []bpf.JumpIf{
			{Cond: bpf.JumpEqual, Val: unix.S_IFCHR},
			{Cond: bpf.JumpEqual, Val: unix.S_IFBLK},
		},
		onMatch: retEPERM, otherwise: retAllow,
	}
}

var argRulesCommon = []argRule{
	{
		// TIOCSTI pushes bytes into the terminal's input queue (typing
		// commands into the user's shell once the sandbox exits);
		// TIOCLINUX can do the same on a virtual console.
		sys:   syscallNr{"ioctl", unix.SYS_IOCTL},
		label: "ioctl(TIOCSTI|TIOCLINUX)",
		arg:   1,
		tests: []bpf.JumpIf{
			{Cond: bpf.JumpEqual, Val: unix.TIOCSTI},
			{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX},
		},
		onMatch: retEPERM, otherwise: retAllow,
	},
	mknodDevice("mknodat", unix.SYS_MKNODAT, 2),
	{
		// On amd64 and arm64 the flags are clone's first argument (s390x
		// swaps them; it is not supported here).
		sys:       syscallNr{"clone", unix.SYS_CLONE},
		label:     "clone(CLONE_NEW*)",
		arg:       0,
		tests:     []bpf.JumpIf{{Cond: bpf.JumpBitsSet, Val: cloneNamespaces}},
		onMatch:   retEPERM,
		otherwise: retAllow,
	},
	{
		// Personality flags such as READ_IMPLIES_EXEC or ADDR_NO_RANDOMIZE
		// weaken exploit mitigations; only PER_LINUX and the query are allowed.
		sys:   syscallNr{"personality", unix.SYS_PERSONALITY},
		label: "personality(!=PER_LINUX)",
		arg:   0,
		tests: []bpf.JumpIf{
			{Cond: bpf.JumpEqual, Val: 0},          // PER_LINUX
			{Cond: bpf.JumpEqual, Val: 0xffffffff}, // query only
		},
		onMatch: retAllow, otherwise: retEPERM,
	},
}

var clone3Nr = syscallNr{"clone3", unix.SYS_CLONE3}

// Socket families, which the network namespace does not cover (docs/security.md, "What
// is enforced", "Process hygiene"): socket(2) and socketpair(2) may create
// AF_UNIX, AF_INET and AF_INET6 sockets, and netlink sockets of the routing
// protocol only (what getifaddrs and `ip` use). Everything else (AF_VSOCK
// reaching a VM's host, AF_ALG, AF_KEY, AF_TIPC, AF_PACKET, every other
// netlink protocol) fails with EAFNOSUPPORT, as from a kernel built without
// it; MPTCP (AF_INET or AF_INET6 with IPPROTO_MPTCP) with EPROTONOSUPPORT,
// on which Go and glibc users fall back to TCP. Both syscalls take (domain,
// type, protocol).
var socketSyscalls = []syscallNr{
	{"socket", unix.SYS_SOCKET},
	{"socketpair", unix.SYS_SOCKETPAIR},
}

const (
	retEAFNOSUPPORT    = unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)
	retEPROTONOSUPPORT = unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)
	ipprotoMPTCP       = 262 // IPPROTO_MPTCP (include/uapi/linux/in.h)
)

// socketFamiliesLabel is how SeccompDenied reports the socket rules.
const socketFamiliesLabel = "(family not AF_UNIX|AF_INET|AF_INET6|AF_NETLINK/NETLINK_ROUTE; IPPROTO_MPTCP)"

// socketRule is the code for one of socketSyscalls, entered with the
// syscall number in the accumulator: it returns for that syscall and falls
// through for every other. Only the low 32 bits of domain and protocol are
// read: the kernel takes both as int.
func socketRule(s syscallNr) []bpf.Instruction {
	body := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: seccompDataArgs, Size: 4}, // domain
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipTrue: 9}, // -> 11 allow
		/* 2 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: 4}, // -> 7 inet
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6, SkipTrue: 3}, // -> 7 inet
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_NETLINK, SkipFalse: 4}, // -> 5 netlink, else 9
		/* 5 */ bpf.LoadAbsolute{Off: seccompDataArgs + 8*2, Size: 4}, // protocol
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.NETLINK_ROUTE, SkipTrue: 4, SkipFalse: 3}, // -> 11 or 10
		/* 7 */ bpf.LoadAbsolute{Off: seccompDataArgs + 8*2, Size: 4}, // protocol
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: ipprotoMPTCP, SkipTrue: 1, SkipFalse: 2}, // -> 10 or 11
		/* 9 */ bpf.RetConstant{Val: retEAFNOSUPPORT},
		/* 10 */ bpf.RetConstant{Val: retEPROTONOSUPPORT},
		/* 11 */ bpf.RetConstant{Val: retAllow},
	}
	return append([]bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpEqual, Val: s.nr, SkipFalse: uint8(len(body))}}, body...)
}

// denyTree returns code that answers EPERM when the syscall number in the
// accumulator is one of nrs (sorted, unique) and otherwise falls through to
// the instruction after it. It is a binary search over the numbers, so an
// allowed syscall runs about a dozen instructions instead of one compare per
// refused syscall: the kernel evaluates the filter for every syscall nr when
// it is attached, and for each argument-dependent syscall at every call.
func denyTree(nrs []uint32) []bpf.Instruction {
	if len(nrs) <= 3 {
		var out []bpf.Instruction
		for _, nr := range nrs {
			out = append(out,
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1},
				bpf.RetConstant{Val: retEPERM})
		}
		return out
	}
	mid := len(nrs) / 2
	left, right := denyTree(nrs[:mid]), denyTree(nrs[mid:])
	if len(left)+1 > 255 {
		panic("bug: seccomp deny tree too deep for an 8-bit jump")
	}
	out := []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: nrs[mid], SkipTrue: uint8(len(left) + 1)}}
	out = append(out, left...)
	out = append(out, bpf.Jump{Skip: uint32(len(right))})
	return append(out, right...)
}

// seccompInstructions builds the program for the running arch.
func seccompInstructions() []bpf.Instruction {
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompDataArch, Size: 4},
		// Another ABI (i386 via int 0x80, arm32 compat) has its own syscall
		// numbers, which would dodge every check below: kill outright.
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompAuditArch, SkipTrue: 1},
		bpf.RetConstant{Val: retKill},
		bpf.LoadAbsolute{Off: seccompDataNr, Size: 4},
	}
	if seccompX32Bit != 0 {
		// x32 syscalls report AUDIT_ARCH_X86_64 but set this bit in nr, so
		// they would not match the numbers below.
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: seccompX32Bit, SkipFalse: 1},
			bpf.RetConstant{Val: retEPERM})
	}
	var nrs []uint32
	for _, s := range slices.Concat(denyCommon, denyArch) {
		nrs = append(nrs, s.nr)
	}
	slices.Sort(nrs)
	p = append(p, denyTree(slices.Compact(nrs))...)
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: clone3Nr.nr, SkipFalse: 1},
		bpf.RetConstant{Val: retENOSYS})
	for _, r := range slices.Concat(argRulesCommon, argRulesArch) {
		body := []bpf.Instruction{bpf.LoadAbsolute{Off: uint32(seccompDataArgs + 8*r.arg), Size: 4}}
		if r.mask != 0 {
			body = append(body, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: r.mask})
		}
		// Test i jumps over the remaining tests and the "otherwise" return
		// to land on the "onMatch" return.
		n := len(r.tests)
		for i, t := range r.tests {
			t.SkipTrue, t.SkipFalse = uint8(n-i), 0
			body = append(body, t)
		}
		body = append(body, bpf.RetConstant{Val: r.otherwise}, bpf.RetConstant{Val: r.onMatch})
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.sys.nr, SkipFalse: uint8(len(body))})
		p = append(p, body...)
	}
	for _, s := range socketSyscalls {
		p = append(p, socketRule(s)...)
	}
	return append(p, bpf.RetConstant{Val: retAllow})
}

func buildSeccomp() ([]byte, error) {
	insns := seccompInstructions()
	if len(insns) >= bpfMaxInsns {
		return nil, fmt.Errorf("confine: seccomp filter has %d instructions, kernel limit is %d", len(insns), bpfMaxInsns)
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("confine: assembling seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

var seccompProgram = sync.OnceValues(buildSeccomp)

// SeccompProgram returns the filter as the raw bytes bwrap's --seccomp
// expects: an array of struct sock_filter in native byte order. It is built
// once; each call returns a fresh copy the caller may keep or modify.
func SeccompProgram() ([]byte, error) {
	b, err := seccompProgram()
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// SeccompDenied lists the syscall names the filter refuses (for docs and
// the probe report). Unconditional refusals are bare names; conditional
// ones carry the condition in parentheses, e.g. "ioctl(TIOCSTI|TIOCLINUX)";
// clone3 is listed as "clone3(ENOSYS)" and, on amd64, "x32 ABI" stands for
// every x32 syscall.
func SeccompDenied() []string {
	var names []string
	for _, s := range slices.Concat(denyCommon, denyArch) {
		names = append(names, s.name)
	}
	names = append(names, "clone3(ENOSYS)")
	for _, r := range slices.Concat(argRulesCommon, argRulesArch) {
		names = append(names, r.label)
	}
	for _, s := range socketSyscalls {
		names = append(names, s.name+socketFamiliesLabel)
	}
	if seccompX32Bit != 0 {
		names = append(names, "x32 ABI")
	}
	return names
}
