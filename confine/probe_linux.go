package confine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Probe measures what this host can enforce. env is the server's
// environment (for PATH and the bwrap override).
func Probe(depth ProbeDepth, env []string) HostReport {
	Phase("probe")
	defer Phase("probe-done")
	h := HostReport{OS: runtime.GOOS, Arch: runtime.GOARCH, RunAsRoot: os.Geteuid() == 0}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	h.Landlock = landlockABI()
	h.ProcessLimit = ProcessLimitSessionRlimit
	if why := sessionRlimitMissing(); why != "" {
		h.ProcessLimit = processLimitSandboxRlimit + why
	}
	if h.RunAsRoot {
		h.ProcessLimit = ProcessLimitSessionCgroup
		if _, err := PidsCgroup(); err != nil {
			h.ProcessLimit = processLimitNone + err.Error()
		}
	}
	if _, err := SeccompProgram(); err != nil {
		h.SeccompError = err.Error()
	} else {
		h.Seccomp = true
	}
	bw, err := findBwrap(env)
	if err != nil {
		h.BwrapError = err.Error()
		h.InstallHint = "apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora), pacman -S bubblewrap (Arch)"
		return h
	}
	h.Bwrap = bw
	switch {
	case depth == ProbeStatic:
		// Overlay support is claimed only once a real overlay was mounted;
		// a one-shot command uses the private redirect instead, and needs
		// no version.
		h.UserNS, h.UserNSDeferred = true, true
		return h
	case depth == ProbeQuick && !lsmRestrictsUserns():
		h.BwrapVersion, h.Overlay = bwrapVersionStatic(bw)
		h.UserNS, h.UserNSError = quickUserns()
	default:
		h.BwrapVersion, h.Overlay = bwrapVersion(bw)
		h.UserNS, h.UserNSError = fullUserns(bw)
	}
	if h.Overlay && h.UserNS {
		h.Overlay = overlayWorks(bw)
	}
	return h
}

func findBwrap(env []string) (string, error) {
	if p := envLookup(env, BwrapEnv); p != "" {
		if !filepath.IsAbs(p) {
			return "", errors.New(BwrapEnv + " must be an absolute path")
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", errors.New(BwrapEnv + "=" + p + " is not an executable file")
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(envLookup(env, "PATH")) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry is a classic injection
		}
		p := filepath.Join(dir, "bwrap")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("bubblewrap (bwrap) not found on PATH")
}

// versionRE is compiled on first use: only the full and quick probes read
// a version, and a one-shot `exec` should not pay for it at start.
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`) })

// bwrapVersion runs `bwrap --version`; overlay support arrived in 0.10.0
// and is confirmed from --help so a patched build is judged by what it has.
func bwrapVersion(bw string) (string, bool) {
	out, err := probeOutput(bw, "--version")
	if err != nil {
		return "", false
	}
	m := versionRE().FindStringSubmatch(string(out))
	if m == nil {
		return strings.TrimSpace(string(out)), false
	}
	maj, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if maj == 0 && minor < 10 {
		return m[0], false
	}
	help, _ := probeOutput(bw, "--help")
	return m[0], bytes.Contains(help, []byte("--overlay-src")) && bytes.Contains(help, []byte("--tmp-overlay"))
}

// bwrapVersionStatic reads the version and overlay support out of the
// binary instead of running it: bubblewrap embeds its package string and its
// option names. Used where a spawn would double a one-shot command's cost.
func bwrapVersionStatic(bw string) (string, bool) {
	b, err := os.ReadFile(bw)
	if err != nil || len(b) > 16<<20 {
		return bwrapVersion(bw)
	}
	i := bytes.Index(b, []byte("bubblewrap "))
	if i < 0 {
		return bwrapVersion(bw)
	}
	m := versionRE().FindSubmatch(b[i:min(len(b), i+40)])
	if m == nil {
		return bwrapVersion(bw)
	}
	return string(m[0]), bytes.Contains(b, []byte("tmp-overlay")) && bytes.Contains(b, []byte("overlay-src"))
}

// probeOutput runs a host helper with an empty environment and a deadline.
func probeOutput(bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.Bytes(), err
}

// fullUserns starts a real sandbox with the namespace flags every spawn uses,
// the hostname included: a container runtime's default seccomp profile may
// allow the namespaces and refuse sethostname(2), and every spawn would
// then fail after a probe that passed (docs/deploy.md).
func fullUserns(bw string) (bool, string) {
	out, err := probeOutput(bw, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--unshare-net", "--disable-userns", "--assert-userns-disabled", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--hostname", "evener-sandbox", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true")
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return false, firstLine(msg)
	}
	return true, ""
}

// overlayWorks mounts a real read-real, write-private overlay the way a
// cache is served; an unprivileged overlay can still be refused by the
// kernel or the filesystem.
func overlayWorks(bw string) bool {
	dir, err := os.MkdirTemp("", "evener-overlay-probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	_, err = probeOutput(bw, "--unshare-user", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
		"--overlay-src", dir, "--tmp-overlay", dir, "--", "sh", "-c", "echo x > \"$0\"/probe", dir)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "probe"))
	return os.IsNotExist(err) // the write stayed in the private layer
}

// quickUserns creates a user namespace for a trivial child: the kernel check
// that decides whether bubblewrap can run unprivileged.
func quickUserns() (bool, string) {
	cmd := exec.Command("/proc/self/exe")
	if t, err := exec.LookPath("true"); err == nil {
		cmd = exec.Command(t)
	}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		return false, "creating a user namespace failed: " + err.Error()
	}
	return true, ""
}

// lsmRestrictsUserns is true where AppArmor restricts unprivileged user
// namespaces per program (Ubuntu 24.04): there only bwrap itself can tell.
func lsmRestrictsUserns() bool {
	b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	return err == nil && strings.TrimSpace(string(b)) != "0"
}

func landlockABI() int {
	const createRulesetVersion = 1 // LANDLOCK_CREATE_RULESET_VERSION
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(r)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
