package confine

import (
	"fmt"
	"strings"
)

// The landlock backend (docs/security.md, "The landlock backend"): for
// hosts where bubblewrap cannot create a user namespace (a container's
// seccomp profile or AppArmor, a hardened CI runner), commands are started
// by a plain fork/exec of this binary's Landlock helper, which applies to
// itself, before it execs the command, the Landlock file and TCP rules and
// scopes, the seccomp filter (the native one and a second filter of this
// backend's own), the resource limits and, for a root server, an empty
// capability set; the launcher gives it the environment floor. What it
// cannot give (no PID namespace, no mount masking, no private /tmp, no
// per-session process limit) is named wherever the backend is reported.

// backendLandlock is Policy.backend for the landlock backend.
const backendLandlock = "landlock"

// LandlockBackendMinABI is the oldest Landlock ABI the landlock backend
// runs on: ABI 4 brings the TCP rules, without which neither network mode
// could be enforced without a network namespace.
const LandlockBackendMinABI = 4

// LandlockUnusable returns why the landlock backend cannot enforce a mode
// on this host, or "".
func (h HostReport) LandlockUnusable() string {
	switch {
	case h.OS != "linux":
		return "the landlock backend is Linux-only"
	case h.Landlock == 0:
		return "this kernel has no Landlock, or it is disabled (CONFIG_SECURITY_LANDLOCK, the lsm= boot parameter)"
	case h.Landlock < LandlockBackendMinABI:
		return fmt.Sprintf("landlock ABI %d is too old: the landlock backend needs ABI %d (TCP rules)", h.Landlock, LandlockBackendMinABI)
	case !h.Seccomp:
		return "seccomp filter unavailable: " + h.SeccompError
	}
	return ""
}

// chooseBackend picks the backend of a sandboxed mode: an explicit
// landlock, or native where it can enforce; the default (auto) falls back
// to landlock where bubblewrap cannot create a user namespace and landlock
// can enforce; otherwise an explicit mode is refused and an unset one
// degrades to off.
func (p *Policy) chooseBackend(b Backend) error {
	if b == BackendLandlock {
		if r := p.landlockUnusable(); r != "" {
			return fmt.Errorf("%w: --sandbox-backend landlock: %s", ErrUnenforceable, r)
		}
		p.backend = backendLandlock
		return nil
	}
	reason := p.host.Unusable()
	if reason == "" {
		return nil
	}
	// The fallback is for a host whose bubblewrap cannot create a user
	// namespace; a missing bubblewrap is an installation to make, which
	// the refusal names.
	auto := b == "" || b == BackendAuto
	if auto && p.host.OS == "linux" && p.host.Bwrap != "" && !p.host.UserNS {
		ll := p.landlockUnusable()
		if ll == "" {
			p.backend, p.fellBack = backendLandlock, reason
			return nil
		}
		if p.explicit {
			reason += "; nor can the landlock backend: " + ll
		}
		p.noLandlock = ll
	}
	if p.explicit {
		return fmt.Errorf("%w: --sandbox %s: %s", ErrUnenforceable, p.mode, reason)
	}
	p.degraded = reason
	p.mode = ModeOff
	return nil
}

// landlockUnusable is why the landlock backend cannot enforce p here:
// the host's reason, or a protected path inside a write root (Landlock
// cannot take a right away beneath a granted tree, and there is no mount
// to pin it read-only).
func (p *Policy) landlockUnusable() string {
	if r := p.host.LandlockUnusable(); r != "" {
		return r
	}
	roots := p.WriteRoots()
	for _, pp := range p.protect {
		if underAny(pp.real, roots) || underAny(pp.lit, roots) {
			return "a protected path lies inside a write root: only the native backend's read-only mounts keep it so (Landlock cannot take a right away beneath a granted tree)"
		}
	}
	return ""
}

// landlockAlsoUnusable is the off line's account of why the default did
// not fall back to the landlock backend ("" when that does not apply).
func (p *Policy) landlockAlsoUnusable() string {
	if p.degraded == "" || p.noLandlock == "" {
		return ""
	}
	return "; nor can the landlock backend: " + p.noLandlock
}

// FellBack is why the default chose the landlock backend instead of
// bubblewrap, or "".
func (p *Policy) FellBack() string { return p.fellBack }

// landlockStartupLine is the startup line under the landlock backend: what
// holds, and, always, what this backend does not give.
func (p *Policy) landlockStartupLine(mode string) string {
	net := "network off: no TCP connect, no UDP"
	if p.network == NetworkOn {
		net = "network on via allowlist proxies: TCP connect only to their two loopback ports, no UDP"
	}
	line := fmt.Sprintf("sandbox: landlock enforcing %s (%s, secrets not granted, cache %s)", mode, net, p.cache)
	if p.fellBack != "" {
		line += "; chosen because " + p.fellBack
	}
	line += p.protectFacts()
	line += fmt.Sprintf("; landlock ABI %d", p.host.Landlock)
	line += "; NOT given by this backend: " + strings.Join(p.LandlockGaps(), "; ")
	return line
}

// LandlockGaps names what the landlock backend does not enforce on this
// host, per guarantee (startup line, probe, preamble); nil under another
// backend.
func (p *Policy) LandlockGaps() []string {
	if p.backend != backendLandlock {
		return nil
	}
	g := []string{
		"no PID namespace (commands see the host's processes and their command lines)",
		"no mount masking (a secret is kept out only by not granting the tree it is in)",
		"no private /tmp (TMPDIR is the session scratch; /tmp is not writable)",
		"no per-session process limit",
		"no loopback of its own (TCP bind refused: a server inside the command cannot listen)",
		"git metadata (.git/config, hooks, commondir, gitdir) not pinned read-only: the server sets aside what a command changed there and puts the recorded one back when it ends (not the kernel; a git run meanwhile sees the change)",
	}
	if p.host.Landlock < 6 {
		g = append(g, fmt.Sprintf("signals to the user's other processes not scoped (landlock ABI %d < 6)", p.host.Landlock))
	}
	if p.network == NetworkOn {
		g = append(g, "TCP is filtered by port only (Landlock): a host elsewhere listening on a proxy's port is reachable")
	}
	return g
}

// Guarantee is one row of `probe`'s per-backend table: what holds, and by
// which mechanism ("mount", "landlock", "seccomp", "rlimit", "namespace",
// "capabilities", "environment"); Mechanism "" means it does not hold here,
// and Why says why.
type Guarantee struct {
	What      string `json:"what"`
	Mechanism string `json:"mechanism,omitempty"`
	Why       string `json:"why,omitempty"`
}

// BackendGuarantees is, for each Linux backend, which guarantee holds on
// the host h reports and by which mechanism (probe; docs/security.md, "The
// landlock backend"). A backend that cannot run here has every row
// unheld, with the reason. Pure: read from the host report only.
func BackendGuarantees(h HostReport) map[Backend][]Guarantee {
	out := map[Backend][]Guarantee{}
	if h.OS != "linux" {
		return out
	}
	hold := func(what, mech string) Guarantee { return Guarantee{What: what, Mechanism: mech} }
	not := func(what, why string) Guarantee { return Guarantee{What: what, Why: why} }
	second := ""
	if h.Landlock >= LandlockMinABI {
		second = " + landlock"
	}
	native := []Guarantee{
		hold("writes only beneath the write roots and the scratch", "mount"+second),
		hold("secrets unreadable", "mount"),
		hold("network only through the session's proxies, or none", "namespace"),
		hold("UDP and raw sockets reach nothing outside the sandbox", "namespace"),
		hold("host Unix sockets (docker, D-Bus) unreachable", "mount"),
		hold("host processes hidden", "namespace"),
		hold("host processes cannot be signalled or traced", "namespace"),
		hold("private /tmp", "mount"),
		hold("git metadata (.git/config, hooks) read-only", "mount"),
		hold("protected paths read-only", "mount"),
		hold("dangerous system calls refused", "seccomp"),
		hold("file size, memory and descriptor limits", "rlimit"),
	}
	switch {
	case h.ProcessLimit == ProcessLimitSessionRlimit:
		native = append(native, hold("process count per session", "rlimit (in one user namespace)"))
	case h.ProcessLimit == ProcessLimitSessionCgroup:
		native = append(native, hold("process count per session", "pids cgroup"))
	case strings.HasPrefix(h.ProcessLimit, processLimitSandboxRlimit):
		native = append(native, hold("process count per sandbox (not per session)", "rlimit"))
	default:
		native = append(native, not("process count per session", strings.TrimPrefix(h.ProcessLimit, processLimitNone)))
	}
	native = append(native, hold("no capabilities", "namespace"), hold("environment floor", "environment"))
	if r := h.Unusable(); r != "" {
		native = unheld(native, r)
	}
	out[BackendNative] = native

	abi := h.Landlock
	ll := []Guarantee{
		hold("writes only beneath the write roots and the scratch", "landlock"),
		hold("secrets unreadable (their trees are not granted)", "landlock"),
		hold("network only through the session's proxies (by port), or none", "landlock"),
		hold("UDP, raw and SCTP sockets refused", "seccomp"),
		hold("host Unix sockets (docker, D-Bus) unreachable: socket(AF_UNIX) refused", "seccomp"),
		not("host processes hidden", "no PID namespace"),
	}
	if abi >= 6 {
		ll = append(ll, hold("host processes cannot be signalled or traced", "landlock (scopes, ptrace)"))
	} else {
		ll = append(ll, hold("host processes cannot be traced", "landlock (ptrace)"),
			not("host processes cannot be signalled", fmt.Sprintf("landlock ABI %d < 6 has no signal scope", abi)))
	}
	ll = append(ll,
		not("private /tmp", "no mount namespace: TMPDIR is the session scratch"),
		not("git metadata (.git/config, hooks) read-only", "no mount to pin it: the server puts back what a command changed when it ends"),
		hold("protected paths read-only", "landlock (never granted a write; one inside a write root refuses this backend)"),
		hold("dangerous system calls refused; System V IPC refused", "seccomp"),
		hold("file size, memory and descriptor limits", "rlimit"),
		not("process count per session", "no user namespace or cgroup for this backend"),
		hold("no capabilities", "capabilities (dropped, no_new_privs)"),
		hold("environment floor", "environment"),
	)
	if r := h.LandlockUnusable(); r != "" {
		ll = unheld(ll, r)
	}
	out[BackendLandlock] = ll
	return out
}

// unheld marks every row of gs as not holding: the backend cannot run
// here (BackendUnusable says why).
func unheld(gs []Guarantee, why string) []Guarantee {
	for i := range gs {
		gs[i] = Guarantee{What: gs[i].What, Why: "backend unusable here"}
	}
	return gs
}

// BackendUnusable is why backend b cannot run on the host h reports, or "".
func BackendUnusable(h HostReport, b Backend) string {
	switch b {
	case BackendNative:
		return h.Unusable()
	case BackendLandlock:
		return h.LandlockUnusable()
	}
	return ""
}
