//go:build linux

package confine

import "golang.org/x/sys/unix"

// seccompAuditArch is the only ABI the filter admits on amd64: i386 (int
// 0x80) is killed by the arch check, x32 by seccompX32Bit.
const seccompAuditArch = unix.AUDIT_ARCH_X86_64

// seccompX32Bit is __X32_SYSCALL_BIT: x32 syscalls carry AUDIT_ARCH_X86_64
// but number nr|0x40000000, which would slip past the number checks.
const seccompX32Bit = 0x40000000

// denyArch are the amd64-only legacy syscalls (absent from arm64's table).
var denyArch = []syscallNr{
	{"uselib", unix.SYS_USELIB},
	{"create_module", unix.SYS_CREATE_MODULE},
	{"get_kernel_syms", unix.SYS_GET_KERNEL_SYMS},
	{"query_module", unix.SYS_QUERY_MODULE},
}

// argRulesArch: amd64 still has mknod(path, mode, dev), mode in arg 1.
var argRulesArch = []argRule{
	mknodDevice("mknod", unix.SYS_MKNOD, 1),
}
