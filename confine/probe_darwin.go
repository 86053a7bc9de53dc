//go:build darwin

package confine

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Probe reports what this Mac can enforce: Seatbelt through
// /usr/bin/sandbox-exec (a hard-coded path, so a PATH entry cannot
// substitute another), and the active developer directory for restricted
// mode's toolchain grant. env is the server's environment.
func Probe(depth ProbeDepth, env []string) HostReport {
	h := HostReport{OS: runtime.GOOS, Arch: runtime.GOARCH, RunAsRoot: os.Geteuid() == 0,
		ProcessLimit: "none: resource limits are not applied on macOS in this build"}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	fi, err := os.Stat(SeatbeltExec)
	switch {
	case err != nil:
		h.SandboxExecError = SeatbeltExec + " not found"
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		h.SandboxExecError = SeatbeltExec + " is not an executable file"
	case depth == ProbeStatic:
		h.SandboxExec = SeatbeltExec
	default:
		if out, err := probeRun(nil, SeatbeltExec, "-p", "(version 1)(allow default)(deny network*)", "/usr/bin/true"); err != nil {
			h.SandboxExecError = "sandbox-exec could not run a profile: " + firstLine(strings.TrimSpace(string(out))+" "+err.Error())
		} else {
			h.SandboxExec = SeatbeltExec
		}
	}
	// xcode-select -p honours DEVELOPER_DIR: what it prints is judged by
	// DeveloperToolchain (the shared-tree guard) before anything is granted.
	var xenv []string
	if d := envLookup(env, "DEVELOPER_DIR"); d != "" {
		xenv = append(xenv, "DEVELOPER_DIR="+d)
	}
	if out, err := probeRun(xenv, "/usr/bin/xcode-select", "-p"); err == nil {
		h.DeveloperDir = strings.TrimSpace(string(out))
	}
	return h
}

// probeRun runs a host helper with a minimal environment and a deadline.
func probeRun(env []string, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.Bytes(), err
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
