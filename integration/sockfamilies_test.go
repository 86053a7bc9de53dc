//go:build linux

package integration

import (
	"strings"
	"testing"
)

// sockProbe tries one socket(2) or socketpair(2) per line and prints
// "name=0" on success or "name=ERRNO" (the number) on failure. Perl is used
// because it is on every machine the suite runs on, in every mode's view
// (/usr/bin is a system read root).
const sockProbe = `
use strict;
my @t = (
  ["unix",           1,  1, 0],
  ["inet",           2,  1, 0],
  ["inet6",          10, 2, 0],
  ["netlink_route",  16, 3, 0],
  ["netlink_audit",  16, 3, 9],
  ["netlink_uevent", 16, 2, 15],
  ["netlink_sockdiag", 16, 3, 4],
  ["vsock",          40, 1, 0],
  ["alg",            38, 5, 0],
  ["key",            15, 3, 2],
  ["tipc",           30, 4, 0],
  ["packet",         17, 2, 0],
  ["mptcp",          2,  1, 262],
  ["mptcp6",         10, 1, 262],
);
for my $c (@t) {
  my ($n, $d, $ty, $p) = @$c;
  $! = 0;
  if (socket(my $s, $d, $ty, $p)) { print "$n=0\n"; close $s } else { print "$n=", $!+0, "\n" }
}
for my $c (["pair_unix", 1], ["pair_tipc", 30], ["pair_vsock", 40]) {
  my ($n, $d) = @$c;
  if (socketpair(my $a, my $b, $d, 1, 0)) { print "$n=0\n" } else { print "$n=", $!+0, "\n" }
}
`

// TestSocketFamilies (issue 13 item 8): inside a real sandbox of every mode,
// as root and as the user, only AF_UNIX, AF_INET, AF_INET6 and netlink's
// routing protocol can be created; every other family (AF_VSOCK reaches a
// VM's host services; netlink's audit, uevent and sock_diag protocols are
// kernel interfaces) fails with EAFNOSUPPORT, other netlink protocols and
// MPTCP with EPROTONOSUPPORT. The same refusals hold whatever the host
// kernel has built in: the filter answers before the kernel looks.
func TestSocketFamilies(t *testing.T) {
	const eafnosupport, eprotonosupport = "97", "93"
	want := map[string]string{
		"unix": "0", "inet": "0", "inet6": "0", "netlink_route": "0",
		"netlink_audit": eprotonosupport, "netlink_uevent": eprotonosupport, "netlink_sockdiag": eprotonosupport,
		"vsock": eafnosupport, "alg": eafnosupport, "key": eafnosupport, "tipc": eafnosupport,
		"packet": eafnosupport, "mptcp": eprotonosupport, "mptcp6": eprotonosupport,
		"pair_unix": "0", "pair_tipc": eafnosupport, "pair_vsock": eafnosupport,
	}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				r := e.run(t, "exec", "--sandbox", mode, "--sandbox-net", "off", "--", "/usr/bin/perl", "-e", sockProbe)
				if r.code != 0 {
					t.Fatalf("probe failed:\n%s", r)
				}
				got := map[string]string{}
				for _, l := range strings.Split(r.stdout, "\n") {
					if k, v, ok := strings.Cut(l, "="); ok {
						got[k] = v
					}
				}
				for k, w := range want {
					if got[k] != w {
						t.Errorf("%s: errno %q, want %q", k, got[k], w)
					}
				}
			})
		}
	})
}
