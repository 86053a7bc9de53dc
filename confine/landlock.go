package confine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Landlock is a second layer under bubblewrap (docs/security.md, "Landlock,
// the second layer"): every sandboxed spawn also runs under a Landlock
// ruleset derived from the policy and the inspected layout, not from the
// mount plan, so a mount-plan bug alone does not widen it. A helper inside
// the sandbox (this binary, re-executed; or the egress relay, which
// already runs in front of the command) applies it to itself after
// bubblewrap has built the sandbox, then runs the command. Rules name paths
// as the sandbox sees them.

// LandlockMinABI is the oldest Landlock ABI the second layer uses: ABI 1
// refuses every rename or link across directories (no REFER right), which
// would break ordinary tools.
const LandlockMinABI = 2

// LandlockEnv carries the rules from the launcher to the helper in the
// sandbox; the helper removes it before the command runs.
const LandlockEnv = "EVENER_LANDLOCK"

// LandlockSubcommand is the hidden helper that applies the rules and execs
// the command.
const LandlockSubcommand = "__landlock"

// LandlockRules is one spawn's ruleset, paths as the sandbox sees them.
type LandlockRules struct {
	// Read: read files, list directories, execute, beneath each.
	Read []string
	// List: list directories beneath, no file contents (restricted mode's
	// empty root, so the worktree's ancestors can still be listed).
	List []string
	// Write: everything Read allows, and create, write, truncate, remove,
	// rename beneath each (no device nodes).
	Write []string
	// Dev: device files (and /dev/pts): read, write, truncate.
	Dev []string
	// Proc: procfs, read and write as the mount plan lets (a root
	// server's is read-only).
	Proc []string
	// GuardTCP: should the spawn find itself in the server's own network
	// namespace (the plan gave it one of its own), TCP connect is allowed
	// only to TCPPorts (the relay's, with the network on; none with it off).
	GuardTCP bool
	TCPPorts []uint16
	// GuardBind refuses every TCP bind as well (the landlock backend,
	// whose commands share the host's network: docs/security.md, "The
	// landlock backend").
	GuardBind bool
	// HostNetNS identifies the server's network namespace ("dev:ino" of
	// /proc/self/ns/net), set by the launcher at spawn.
	HostNetNS string
}

// RulesForLandlock derives a spawn's Landlock rules from the policy, the
// layout Inspect found and the spawn's network (on: through the proxies;
// off; host: the host's, for an MCP server behind this one). Pure: no I/O.
func RulesForLandlock(p *Policy, l Layout, net Network) LandlockRules {
	var r LandlockRules
	if p.Mode() == ModeRestricted {
		r.List = []string{"/"}
		for _, e := range l.SystemRoots {
			r.Read = append(r.Read, e.Path)
		}
		r.Read = append(r.Read, l.GitConfig...)
		r.Read = append(r.Read, l.HookDirs...)
		r.Read = append(r.Read, "/dev")
		for _, g := range l.Git {
			r.Read = append(r.Read, g.Dir)
		}
		if p.WritesBlocked() {
			r.Read = append(r.Read, p.Workdir())
		}
	} else {
		r.Read = []string{"/"}
	}
	r.Proc = []string{"/proc"}
	r.Dev = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts"}
	// The sandbox's private /tmp and /dev/shm (tmpfs of the sandbox's own),
	// the write roots, the scratch, the runner state, the cache overlays
	// (private writes) and git metadata bound writable outside the roots.
	r.Write = []string{"/tmp", "/dev/shm"}
	r.Write = append(r.Write, p.WriteRoots()...)
	if l.Scratch != "" {
		r.Write = append(r.Write, l.Scratch)
	}
	r.Write = append(r.Write, p.StateRW()...)
	r.Write = append(r.Write, l.CacheRoots...)
	if p.writes() {
		for _, g := range l.Git {
			if g.BindWritable {
				r.Write = append(r.Write, g.Dir)
			}
		}
	}
	if net != NetworkHost {
		r.GuardTCP = true
		if net == NetworkOn {
			r.TCPPorts = []uint16{RelayHTTPPort, RelaySOCKSPort}
		}
	}
	for _, s := range []*[]string{&r.Read, &r.List, &r.Write} {
		slices.Sort(*s)
		*s = slices.Compact(*s)
	}
	return r
}

// Encode renders r for LandlockEnv: semicolon-separated fields, each path
// in hex (a path may hold any byte but NUL).
func (r LandlockRules) Encode() string {
	var b strings.Builder
	b.WriteString("v1")
	put := func(k string, paths []string) {
		for _, p := range paths {
			b.WriteString(";" + k + "=" + hex.EncodeToString([]byte(p)))
		}
	}
	put("r", r.Read)
	put("l", r.List)
	put("w", r.Write)
	put("d", r.Dev)
	put("p", r.Proc)
	if r.GuardTCP {
		ports := make([]string, len(r.TCPPorts))
		for i, p := range r.TCPPorts {
			ports[i] = strconv.Itoa(int(p))
		}
		b.WriteString(";tcp=" + strings.Join(ports, ","))
	}
	if r.GuardBind {
		b.WriteString(";bind=none")
	}
	if r.HostNetNS != "" {
		b.WriteString(";netns=" + r.HostNetNS)
	}
	return b.String()
}

// ParseLandlockRules reads what Encode wrote.
func ParseLandlockRules(s string) (LandlockRules, error) {
	var r LandlockRules
	fields := strings.Split(s, ";")
	if fields[0] != "v1" {
		return r, errors.New("landlock rules: unknown version")
	}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return r, fmt.Errorf("landlock rules: bad field %q", f)
		}
		var dst *[]string
		switch k {
		case "r":
			dst = &r.Read
		case "l":
			dst = &r.List
		case "w":
			dst = &r.Write
		case "d":
			dst = &r.Dev
		case "p":
			dst = &r.Proc
		case "tcp":
			r.GuardTCP = true
			if v == "" {
				continue
			}
			for _, ps := range strings.Split(v, ",") {
				n, err := strconv.ParseUint(ps, 10, 16)
				if err != nil {
					return r, fmt.Errorf("landlock rules: bad port %q", ps)
				}
				r.TCPPorts = append(r.TCPPorts, uint16(n))
			}
			continue
		case "netns":
			r.HostNetNS = v
			continue
		case "bind":
			r.GuardBind = true
			continue
		default:
			return r, fmt.Errorf("landlock rules: unknown field %q", k)
		}
		p, err := hex.DecodeString(v)
		if err != nil || len(p) == 0 || p[0] != '/' {
			return r, fmt.Errorf("landlock rules: bad path in %q", f)
		}
		*dst = append(*dst, string(p))
	}
	return r, nil
}

// SecondLayer says what the Landlock layer enforces under p on this host,
// as the startup line and `probe` print it: "landlock ABI 7", or
// "none (why)"; "" where the backend has no such layer (mode off, macOS).
func (p *Policy) SecondLayer() string {
	if p.mode == ModeOff || p.backend != "bwrap" {
		return ""
	}
	abi := p.host.Landlock
	switch {
	case abi == 0:
		return "none (this kernel has no Landlock, or it is disabled)"
	case abi < LandlockMinABI:
		return fmt.Sprintf("none (landlock ABI %d is too old: it refuses every rename across directories)", abi)
	}
	return fmt.Sprintf("landlock ABI %d", abi)
}

// SecondLayerDetail names, per guarantee, what the Landlock layer holds on
// this host (for `probe`); nil when SecondLayer is not Landlock.
func (p *Policy) SecondLayerDetail() []string {
	abi := p.host.Landlock
	if p.mode == ModeOff || p.backend != "bwrap" || abi < LandlockMinABI {
		return nil
	}
	reads := "reads anywhere the mount plan shows (the masks are the mount layer's)"
	if p.mode == ModeRestricted {
		reads = "file reads only beneath the system roots, the write roots, the scratch, the hook dirs, /dev, /proc and /tmp; directories listable anywhere"
	}
	d := []string{
		"files: writes only beneath the write roots, the scratch, runner state, cache overlays, git metadata bound writable, the private /tmp and /dev/shm, /dev/{null,zero,full,random,urandom,tty,pts} and procfs (as its mount lets)",
		"files: " + reads,
	}
	if abi < 3 {
		d = append(d, "files: truncate not covered (landlock ABI < 3)")
	}
	if abi >= 4 {
		d = append(d, "tcp: connect only to the relay's ports (network on) or none (off) should a sandbox find itself on the server's network; its own namespace's loopback is left to it")
	} else {
		d = append(d, "tcp: not covered (landlock ABI < 4)")
	}
	if abi >= 6 {
		d = append(d, "scopes: abstract Unix sockets and signals confined to the sandboxed command's own processes")
	} else {
		d = append(d, "scopes: not covered (landlock ABI < 6)")
	}
	return d
}
