//go:build !linux && !darwin

package confine

import "runtime"

// Probe reports a host with no native backend in this build.
func Probe(depth ProbeDepth, env []string) HostReport {
	return HostReport{OS: runtime.GOOS, Arch: runtime.GOARCH}
}
