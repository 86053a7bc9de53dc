//go:build linux

package confine

import "golang.org/x/sys/unix"

// seccompAuditArch is the only ABI the filter admits on arm64; AArch32
// compat tasks (AUDIT_ARCH_ARM) are killed by the arch check.
const seccompAuditArch = unix.AUDIT_ARCH_AARCH64

// seccompX32Bit: arm64 has no x32-style alias ABI.
const seccompX32Bit = 0

// arm64 uses the generic syscall table: no uselib, mknod or the old module
// calls, so nothing extra to refuse.
var (
	denyArch     []syscallNr
	argRulesArch []argRule
)
