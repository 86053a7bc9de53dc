// Package confine is the confinement core: it turns the configuration into
// an immutable policy, and every process the server starts and every file a
// tool touches goes through it. It imports nothing else of this module.
//
// The boundary it enforces is described in docs/security.md, "What is enforced"
// (and "macOS (Seatbelt)" for the macOS backend). The pipeline, with the file
// for each stage:
//
// # Spec to policy, once
//
// A Spec (policy.go) is what the configuration asks for; Probe
// (probe.go, probe_linux.go, probe_darwin.go) measures what the host can
// enforce, as a HostReport. Resolve (policy.go) joins the two into a Policy,
// built once and never relaxed: an explicit mode the host cannot enforce is
// refused (ErrUnenforceable), an unset one degrades to off and says why. A
// session may only narrow it: Narrow, NarrowWorkdir, BlockWrites and
// FileToolsReadOnly each return a new, narrower Policy. The inputs it is
// resolved from: the denylist and the system read roots (paths.go), hook
// commands and the directories they are granted (hookgrants.go), the
// environment floor (env.go) and the cache strategy (cache.go).
//
// # Per spawn: inspect, plan, argv, launch
//
// A Launcher (launcher*.go) holds one sandbox session: a policy, a private
// scratch directory and the processes started under it. For each command:
//
//  1. Inspect (inspect.go) looks at the filesystem as it is now, with lstat:
//     the denylisted paths that exist, the git directories and gitlinks to
//     pin (linked worktrees, submodules, nested repositories), the host's
//     Unix sockets (mountplan_sockets.go), the hook directories and the
//     cache roots, as a Layout.
//     It runs at every spawn, so what an earlier command planted is seen
//     before a mount relies on it; what it cannot protect refuses the spawn
//     (ErrUnsafeLayout).
//  2. Plan (mountplan.go) is a pure function from the Policy and that Layout
//     to an ordered MountPlan, masks last; it is golden-tested
//     (testdata/plan-*.golden; `go test ./confine -run TestPlanGolden
//     -update` rewrites them).
//  3. The bubblewrap argv is the fixed namespace and hygiene flags,
//     MountPlan.Args, the working directory and the command, with the
//     environment floor (EnvFloor, env.go) as bubblewrap's own environment
//     (Launcher.Prepare).
//  4. Launcher.Run starts it, hands bubblewrap the seccomp filter, applies
//     the resource limits (and, for a root server, a pids cgroup:
//     cgroup_linux.go), and kills the whole PID namespace on a timeout.
//
// After each sandboxed command ends, the git sweep (gitsweep.go) sets aside
// every repository the command created or changed in the write roots (docs/security.md,
// "What is enforced", "Nested repositories").
//
// # The file layer
//
// FileAccess (files.go for the types and rules, files_linux.go for the core)
// is the only way a tool touches the filesystem. A path is cleaned and
// checked lexically once, then opened by the kernel relative to a directory
// handle held since construction, with openat2 and RESOLVE_BENEATH,
// RESOLVE_NO_MAGICLINKS and, where the mode refuses symlinked directories,
// RESOLVE_NO_SYMLINKS; what was opened is judged by what it is and where it
// really is, so a path swapped between check and use cannot escape. By
// concern: the denylist's real locations (files_deny_linux.go), reads
// (files_read_linux.go), directory browsing (files_dir_linux.go), writes,
// removals and renames (files_write_linux.go), and the staged multi-file
// transaction of apply_patch (files_stage_linux.go). Outside Linux it is a
// stub (files_other.go, ErrNoFileLayer). A root-started server first drops
// the capabilities that would let it reach files its commands cannot
// (caps_linux.go).
//
// # Seccomp
//
// SeccompProgram (seccomp_linux.go, with the per-architecture ABI checks in
// seccomp_amd64.go and seccomp_arm64.go) builds the classic-BPF filter
// bubblewrap installs before exec'ing the command: ptrace, the mount API,
// namespace creation, io_uring, bpf and the rest, and socket families
// beyond Unix, IPv4, IPv6 and netlink routing.
//
// # Egress relay helpers
//
// With the network on, a sandbox still has its own network namespace; its
// only way out is the session's egress proxies (package egress), reached
// through Unix sockets bind-mounted into the sandbox (EgressBridge, relay.go).
// evener-mcp re-executes itself inside the sandbox as hidden helpers: the
// relay from the namespace's loopback to those sockets (RunRelay,
// relay_linux.go) and the SOCKS5 connect helper git's SSH runs (RunConnect,
// relay_connect.go).
//
// # The Seatbelt backend (macOS)
//
// On macOS the Launcher (launcher_darwin.go) runs each command under
// /usr/bin/sandbox-exec with a profile that SeatbeltProfile (seatbelt.go), a
// pure function like Plan, renders from the same Policy and from the facts
// InspectSeatbelt gathers at that spawn (seatbelt_inspect.go). It builds on
// every OS, so its golden files (testdata/seatbelt/*.sb) and the parity test
// against the mount plan run on Linux.
package confine
