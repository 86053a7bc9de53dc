//go:build !linux && !darwin

package confine

import "runtime"

// BwrapEnv names the environment variable that points at a specific
// bubblewrap binary; it has no effect outside Linux.
const BwrapEnv = "EVENER_MCP_BWRAP"

// ProbeDepth says how hard Probe tries.
type ProbeDepth int

const (
	ProbeFull ProbeDepth = iota
	ProbeQuick
	ProbeStatic
)

// Probe reports a host with no native backend in this build.
func Probe(depth ProbeDepth, env []string) HostReport {
	return HostReport{OS: runtime.GOOS, Arch: runtime.GOARCH}
}
