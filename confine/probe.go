package confine

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// BwrapEnv names the environment variable that points at a specific
// bubblewrap binary (absolute path; unset, bwrap is looked up on PATH). It
// has no effect outside Linux.
const BwrapEnv = "EVENER_MCP_BWRAP"

// ProbeDepth says how hard Probe tries. Every depth refuses to claim a
// sandbox it did not see work.
type ProbeDepth int

const (
	// ProbeFull starts a real sandbox as the current user: on Linux a
	// bubblewrap sandbox with the namespace flags every spawn uses, on
	// macOS a trivial profile under sandbox-exec (server start, `probe`).
	ProbeFull ProbeDepth = iota
	// ProbeQuick, on Linux, creates a real user namespace for a trivial
	// child (about a millisecond) unless an LSM judges bwrap differently
	// from other programs, in which case it runs the full probe; on macOS
	// it is ProbeFull.
	ProbeQuick
	// ProbeStatic starts nothing: for a one-shot command with an explicit
	// mode, the launch itself is the probe. A sandbox that cannot be created
	// never runs the command, and the startup line is printed only once the
	// sandbox exists.
	ProbeStatic
)

// HostReport is what the host can enforce, measured once at start: the
// probe is the gate that decides enforcement (Resolve reads it).
type HostReport struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// Kernel is the running kernel release.
	Kernel string `json:"kernel"`
	// Bwrap is the absolute path of the bubblewrap binary, or "".
	Bwrap        string `json:"bwrap"`
	BwrapVersion string `json:"bwrap_version"`
	// BwrapError says why no bubblewrap was found.
	BwrapError string `json:"bwrap_error,omitempty"`
	// UserNS is true when a real sandbox was started with a new user
	// namespace as the current user (not merely "the binary exists").
	UserNS      bool   `json:"userns"`
	UserNSError string `json:"userns_error,omitempty"`
	// UserNSDeferred means UserNS was not measured before the launch: the
	// first sandbox created is the probe (ProbeStatic).
	UserNSDeferred bool `json:"userns_deferred,omitempty"`
	// Overlay is true when this bubblewrap can mount overlays (0.10+).
	Overlay bool `json:"overlay"`
	// Landlock is the kernel's Landlock ABI version, 0 when unavailable.
	Landlock int `json:"landlock_abi"`
	// Seccomp is true when the seccomp filter could be built for this arch.
	Seccomp      bool   `json:"seccomp"`
	SeccompError string `json:"seccomp_error,omitempty"`
	// RunAsRoot records that the server runs as kernel uid 0, which the
	// sandbox answers with a dropped capability set, seccomp and procfs masks.
	RunAsRoot bool `json:"run_as_root"`
	// ProcessLimit says what caps the processes of a session (procs):
	// ProcessLimitSessionRlimit (unprivileged servers: RLIMIT_NPROC in
	// one user namespace per session), ProcessLimitSessionCgroup (root
	// servers, for which the kernel ignores RLIMIT_NPROC: one pids cgroup
	// per session), "rlimit per sandbox: why" (nsenter or prlimit missing:
	// each sandbox has its own procs) or "none: why".
	ProcessLimit string `json:"process_limit"`
	// InstallHint names the missing package, when one is missing.
	InstallHint string `json:"install_hint,omitempty"`
	// Microvm is always false: no microVM runtime is supported.
	Microvm bool `json:"microvm"`
	// SandboxExec is /usr/bin/sandbox-exec when it exists and ran a
	// profile (macOS), else "".
	SandboxExec      string `json:"sandbox_exec,omitempty"`
	SandboxExecError string `json:"sandbox_exec_error,omitempty"`
	// DeveloperDir is what `xcode-select -p` printed (macOS): untrusted,
	// judged by DeveloperToolchain before anything is granted.
	DeveloperDir string `json:"developer_dir,omitempty"`
}

// Unusable returns why no native backend can enforce a mode here, or "".
func (h HostReport) Unusable() string {
	switch {
	case h.OS == "darwin":
		if h.SandboxExec == "" {
			msg := h.SandboxExecError
			if msg == "" {
				msg = SeatbeltExec + " not found"
			}
			return "no Seatbelt on this darwin host: " + msg
		}
		return ""
	case h.OS != "linux":
		return fmt.Sprintf("no native sandbox backend for %s in this build", h.OS)
	case h.Bwrap == "":
		msg := h.BwrapError
		if msg == "" {
			msg = "bubblewrap (bwrap) not found"
		}
		return msg + hint(h.InstallHint)
	case !h.UserNS:
		msg := "bubblewrap cannot create an unprivileged user namespace"
		if h.UserNSError != "" {
			msg += ": " + h.UserNSError
		}
		return msg
	case !h.Seccomp:
		return "seccomp filter unavailable: " + h.SeccompError
	}
	return ""
}

func hint(h string) string {
	if h == "" {
		return ""
	}
	return " (install it: " + h + ")"
}

// Backend names a sandbox backend as --sandbox-backend spells them (docs/reference.md,
// "Command line").
type Backend string

const (
	BackendNative  Backend = "native"
	BackendNone    Backend = "none"
	BackendMicrovm Backend = "microvm"
	// BackendAuto (the default): native where it can enforce, else
	// landlock where the kernel has it (landlock_backend.go).
	BackendAuto Backend = "auto"
	// BackendLandlock: no namespaces, Landlock, seccomp and rlimits on a
	// plain fork/exec (docs/security.md, "The landlock backend").
	BackendLandlock Backend = "landlock"
)

// ParseBackend accepts the --sandbox-backend names; "docker", an older
// spelling, maps to native.
func ParseBackend(s string) (Backend, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return BackendAuto, nil
	case "native", "docker":
		return BackendNative, nil
	case "landlock":
		return BackendLandlock, nil
	case "none":
		return BackendNone, nil
	case "microvm":
		return BackendMicrovm, nil
	}
	return "", fmt.Errorf("unknown sandbox backend %q (want auto, native, landlock, none or microvm)", s)
}

// CheckBackend refuses an explicit request for a backend this host lacks.
// microvm never degrades silently: no microVM runtime is supported by this
// server, so asking for it always fails loudly.
func (h HostReport) CheckBackend(b Backend) error {
	switch b {
	case BackendMicrovm:
		return fmt.Errorf("%w: backend microvm requested, but this host has no microVM runtime (evener-mcp supports native, landlock and none)", ErrUnenforceable)
	case BackendNative:
		if r := h.Unusable(); r != "" {
			return fmt.Errorf("%w: backend native requested: %s", ErrUnenforceable, r)
		}
	case BackendLandlock:
		if r := h.LandlockUnusable(); r != "" {
			return fmt.Errorf("%w: backend landlock requested: %s", ErrUnenforceable, r)
		}
	}
	return nil
}

// PerSession stands in, in a probe's output, for what every session makes
// anew: the bridge's socket directory and the proxies' credentials.
const PerSession = "<per-session>"

// EgressPlan is the egress part of a prepared sandbox with the network on,
// as `evener-mcp probe` shows it (docs/network.md, "Network"): how the command's
// tools reach the session's proxies.
type EgressPlan struct {
	// Relay is the argv prefix that starts the relay inside the sandbox
	// before the command (Linux; empty where the sandbox shares the host's
	// loopback).
	Relay []string `json:"relay,omitempty"`
	// HTTPProxy and SOCKSProxy are where the command's tools find the
	// proxies: the relay's loopback listeners inside the sandbox (Linux) or
	// the session's loopback forwarders (macOS).
	HTTPProxy  string `json:"http_proxy"`
	SOCKSProxy string `json:"socks_proxy"`
	// Mounts are the plan's egress entries: the relay binary and the two
	// bridge sockets (Linux).
	Mounts MountPlan `json:"mounts,omitempty"`
	// Env are the proxy variables the command gets.
	Env map[string]string `json:"env"`
}

// RedactEgress returns a copy of pr with every per-session value of b (the
// bridge's socket directory, the credentials) replaced by PerSession, and
// the egress part of that copy. pr must have been prepared with the network
// on and b set as the session's egress.
func RedactEgress(pr *Prepared, b EgressBridge) (*Prepared, EgressPlan) {
	var pairs []string
	for _, s := range []string{b.HTTPSocket, b.SOCKSSocket} {
		if d := filepath.Dir(s); s != "" && d != "/" && d != "." {
			pairs = append(pairs, d, PerSession)
		}
	}
	for _, s := range []string{b.HTTPUser, b.HTTPPassword, b.SOCKSUser, b.SOCKSPassword} {
		if s != "" {
			pairs = append(pairs, s, PerSession)
		}
	}
	r := strings.NewReplacer(pairs...)
	out := *pr
	out.Args = make([]string, len(pr.Args))
	for i, a := range pr.Args {
		out.Args[i] = r.Replace(a)
	}
	out.Env = make([]string, len(pr.Env))
	for i, e := range pr.Env {
		out.Env[i] = r.Replace(e)
	}
	out.Plan = make(MountPlan, len(pr.Plan))
	for i, m := range pr.Plan {
		m.Src, m.Dst = r.Replace(m.Src), r.Replace(m.Dst)
		out.Plan[i] = m
	}
	out.Profile = r.Replace(pr.Profile)

	plan := EgressPlan{Env: map[string]string{}}
	proxyVars := egressEnvAt(EgressBridge{}, RelayHTTPPort, RelaySOCKSPort, relayExe)
	for i, e := range pr.Env {
		k, v, _ := strings.Cut(e, "=")
		if _, ok := proxyVars[k]; !ok {
			continue
		}
		_, plan.Env[k], _ = strings.Cut(out.Env[i], "=")
		switch k {
		case "HTTP_PROXY":
			plan.HTTPProxy = proxyHost(v)
		case "ALL_PROXY":
			plan.SOCKSProxy = proxyHost(v)
		}
	}
	for _, m := range out.Plan {
		if strings.HasPrefix(m.Dst, RelayDir+"/") {
			plan.Mounts = append(plan.Mounts, m)
		}
	}
	for i := 1; i+1 < len(out.Args); i++ {
		if out.Args[i] == RelaySubcommand && out.Args[i-1] == relayExe && out.Args[i+1] == "--" {
			plan.Relay = append([]string(nil), out.Args[i-1:i+2]...)
			break
		}
	}
	return &out, plan
}

// proxyHost is the host:port of a proxy URL, or "".
func proxyHost(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Host
	}
	return ""
}

// The HostReport.ProcessLimit values; the sandbox-wide and missing ones
// are followed by why.
const (
	ProcessLimitSessionRlimit = "rlimit per session"
	ProcessLimitSessionCgroup = "pids cgroup per session"
	processLimitSandboxRlimit = "rlimit per sandbox: "
	processLimitNone          = "none: "
)

// ProcessLimit says what bounds the processes of one session under p, as
// the probe and the startup line print it: "1024 per session (pids
// cgroup)", "none (why)"; "" when the host report does not say.
func (p *Policy) ProcessLimit() string {
	pl := p.host.ProcessLimit
	n := p.limits.Procs
	switch {
	case p.mode == ModeOff:
		return "none (sandbox off)"
	case p.backend == backendLandlock:
		return "none (the landlock backend has no user namespace or cgroup per session)"
	case pl == "":
		return ""
	case pl == ProcessLimitSessionRlimit:
		return fmt.Sprintf("%d per session (RLIMIT_NPROC in one user namespace)", n)
	case pl == ProcessLimitSessionCgroup:
		return fmt.Sprintf("%d per session (pids cgroup)", n)
	case strings.HasPrefix(pl, processLimitSandboxRlimit):
		return fmt.Sprintf("%d per sandbox, not per session (RLIMIT_NPROC; %s)", n, strings.TrimPrefix(pl, processLimitSandboxRlimit))
	case strings.HasPrefix(pl, processLimitNone):
		return "none (" + strings.TrimPrefix(pl, processLimitNone) + ")"
	}
	return pl
}
