//go:build linux && cgo

package confine

/*
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

// The capget(2)/capset(2) structures, version 3 (two 32-bit words), spelt
// out here so the build needs no kernel headers (musl systems ship them
// apart).
struct evener_cap_header { uint32_t version; int pid; };
struct evener_cap_data { uint32_t effective, permitted, inheritable; };

// 0: no request; 1: dropped; otherwise minus the errno of the failure.
static int evener_early_caps;

// Runs when the dynamic loader initialises the binary, before the Go
// runtime starts its first thread: the one thread there is holds the
// process's credentials, and every thread made later copies them. See
// caps_linux.go, "A build with cgo".
__attribute__((constructor)) static void evener_drop_caps_early(void) {
	const char *v = getenv("EVENER_MCP_DROP_CAPS");
	if (v == NULL || *v == 0 || geteuid() != 0) {
		return;
	}
	char *end;
	unsigned long long mask = strtoull(v, &end, 16);
	if (*end != 0) {
		evener_early_caps = -EINVAL;
		return;
	}
	struct evener_cap_header h = { 0x20080522, 0 };
	struct evener_cap_data d[2];
	if (syscall(SYS_capget, &h, d) != 0) {
		evener_early_caps = -errno;
		return;
	}
	for (int i = 0; i < 2; i++) {
		uint32_t m = (uint32_t)(mask >> (32 * i));
		d[i].effective &= ~m;
		d[i].permitted &= ~m;
	}
	if (syscall(SYS_capset, &h, d) != 0) {
		evener_early_caps = -errno;
		return;
	}
	evener_early_caps = 1;
}

static int evener_early_caps_status(void) { return evener_early_caps; }
*/
import "C"

import "syscall"

// cgoBuild: this binary's threads are not all the Go runtime's, so
// syscall.AllThreadsSyscall refuses, and the drop happens in the
// constructor above after a re-execution.
const cgoBuild = true

// earlyDrop reports what the constructor did with dropCapsEnv: whether it
// was asked to drop, and the error when dropping failed.
func earlyDrop() (asked bool, err error) {
	switch s := int(C.evener_early_caps_status()); {
	case s == 0:
		return false, nil
	case s == 1:
		return true, nil
	default:
		return true, syscall.Errno(-s)
	}
}
