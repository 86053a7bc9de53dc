//go:build linux

package integration

// Threat cases for the process layer and secrets (docs/security.md, "What is enforced"): each one
// tries the attack for real, against the built binary, in every sandboxed
// mode, as root and as the unprivileged user. Where a probe could pass for
// the wrong reason (a typo in a syscall number, a tool that is missing), the
// same probe is first shown to succeed outside the sandbox: --sandbox off,
// or straight on the host. Host-side proofs are only ever harmless (no
// mount, umount or sysctl change on the host).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ---------------------------------------------------------------------------
// Helpers private to this file (prefixed thr so they cannot collide with
// helpers other files add to the package).

// thrNeedAmd64 skips a case that issues raw x86_64 syscall numbers.
func thrNeedAmd64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("raw syscall probes use x86_64 syscall numbers; this is %s", runtime.GOARCH)
	}
}

// thrPerl writes a perl probe into the worktree (readable in every mode,
// restricted included) and returns its path quoted for sh.
func thrPerl(t *testing.T, e *env, name, code string) string {
	t.Helper()
	p := filepath.Join(e.work, ".probes", name)
	writeFile(t, p, code)
	return q(p)
}

// thrConfig writes a trusted --config file into the fixture and returns its
// path (the fixture is handed to the identity before each run).
func thrConfig(t *testing.T, e *env, name, body string) string {
	t.Helper()
	p := filepath.Join(e.root, "cfg", name)
	writeFile(t, p, body)
	return p
}

// thrLines returns the "key:value" lines of out as a map (last one wins).
func thrLines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// thrCountArgv counts host processes whose argv is exactly want, but for
// those under another evener-mcp server (foreign). It reads /proc
// directly, so the shell script that merely mentions "sleep 317" in its
// own argv is not counted.
func thrCountArgv(want ...string) int {
	ents, _ := os.ReadDir("/proc")
	table := procTable()
	n := 0
	for _, d := range ents {
		if pid, err := strconv.Atoi(d.Name()); err != nil || foreign(table, pid) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(argv) != len(want) {
			continue
		}
		match := true
		for i := range want {
			a := argv[i]
			if i == 0 {
				a = filepath.Base(a)
			}
			if a != want[i] {
				match = false
				break
			}
		}
		if match {
			n++
		}
	}
	return n
}

// thrWaitCount polls thrCountArgv until cond holds or d passes.
func thrWaitCount(d time.Duration, cond func(int) bool, want ...string) int {
	deadline := time.Now().Add(d)
	for {
		n := thrCountArgv(want...)
		if cond(n) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// thrKillArgv SIGKILLs leftovers a failing case left on the host, so one
// product bug does not poison the next case.
func thrKillArgv(want ...string) {
	ents, _ := os.ReadDir("/proc")
	table := procTable()
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || foreign(table, pid) {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if strings.TrimSuffix(string(b), "\x00") == strings.Join(want, "\x00") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func thrRand(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// thrSpawnOpts extends the harness runner with what these cases need: extra
// inherited descriptors, a terminal as stdin and controlling terminal, and
// access to the running process.
type thrSpawnOpts struct {
	extraFiles []*os.File
	stdin      *os.File // nil: /dev/null
	ctty       bool     // make stdin the controlling terminal of a new session
	direct     bool     // run args directly (no evener-mcp): host-side proofs
}

type thrRunning struct {
	cmd    *exec.Cmd
	so, se *lockedBuffer
	cancel context.CancelFunc
	start  time.Time
}

// thrStart starts the binary (or, with o.direct, args themselves) as the
// fixture's identity in the worktree.
func thrStart(t *testing.T, e *env, o thrSpawnOpts, args ...string) *thrRunning {
	t.Helper()
	e.chown(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var cmd *exec.Cmd
	if o.direct {
		cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	} else {
		cmd = exec.CommandContext(ctx, binPath, args...)
	}
	cmd.Dir = e.work
	cmd.Env = e.serverEnv(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if !e.id.root && os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}
	}
	if o.stdin != nil {
		cmd.Stdin = o.stdin
	}
	if o.ctty {
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0 // stdin, in the child
	}
	cmd.ExtraFiles = o.extraFiles
	r := &thrRunning{cmd: cmd, so: &lockedBuffer{}, se: &lockedBuffer{}, cancel: cancel}
	cmd.Stdout, cmd.Stderr = r.so, r.se
	cmd.WaitDelay = 5 * time.Second
	r.start = time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %v: %v", args, err)
	}
	return r
}

func (r *thrRunning) wait(t *testing.T) (result, time.Duration) {
	t.Helper()
	defer r.cancel()
	_ = r.cmd.Wait()
	res := result{stdout: r.so.String(), stderr: r.se.String(), code: r.cmd.ProcessState.ExitCode()}
	return res, time.Since(r.start)
}

// thrTimed is e.run with its wall-clock duration.
func thrTimed(t *testing.T, e *env, args ...string) (result, time.Duration) {
	t.Helper()
	start := time.Now()
	r := e.run(t, args...)
	return r, time.Since(start)
}

func thrSecretEnv() []string {
	return []string{
		"OPENAI_API_KEY=sk-secret-1",
		"github_token=ghp_secret2",
		"DATABASE_URL=postgres://u:secret3@h/db",
		"AWS_SECRET_ACCESS_KEY=secret4",
		"SSH_AUTH_SOCK=/run/x",
	}
}

var thrSecretValues = []string{"sk-secret-1", "ghp_secret2", "secret3", "secret4", "SSH_AUTH_SOCK", "/run/x"}

// ---------------------------------------------------------------------------

// TestThreats runs the process-layer threat cases.
func TestThreats(t *testing.T) {
	t.Run("01_capabilities_and_privileges", thrCapabilities)
	t.Run("02_kernel_uid0_writes", thrKernelWrites)
	t.Run("03_nested_user_namespaces", thrNestedUserns)
	t.Run("04_TIOCSTI", thrTIOCSTI)
	t.Run("05_shared_kernel_objects", thrSharedKernelObjects)
	t.Run("06_inherited_descriptors", thrInheritedFDs)
	t.Run("07_resources", thrResources)
	t.Run("08_timeouts_and_detached_children", thrTimeouts)
	t.Run("09_no_controlling_terminal", thrNoCtty)
	t.Run("10_bwrap_own_environment", thrBwrapEnviron)
}

// 1. No capability of any kind, no_new_privs, a seccomp filter.
func thrCapabilities(t *testing.T) {
	script := `grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|CapInh|NoNewPrivs|Seccomp):' /proc/self/status`
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		// Proof: outside the sandbox the same read shows what the sandbox
		// must remove (root: full capabilities; everyone: no filter).
		off := thrLines(e.sh(t, "off", script).stdout)
		if off["Seccomp"] != "0" {
			t.Errorf("probe: Seccomp outside the sandbox is %q, want 0 (cannot tell the sandbox's filter apart)", off["Seccomp"])
		}
		if id.root && off["CapEff"] == "0000000000000000" {
			t.Errorf("probe: root outside the sandbox has CapEff 0; the probe cannot tell")
		}
		for _, mode := range modes {
			r := e.sh(t, mode, script)
			st := thrLines(r.stdout)
			for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"} {
				if st[k] != "0000000000000000" {
					t.Errorf("%s: %s = %q, want 0\n%s", mode, k, st[k], r)
				}
			}
			if st["NoNewPrivs"] != "1" {
				t.Errorf("%s: NoNewPrivs = %q, want 1\n%s", mode, st["NoNewPrivs"], r)
			}
			if st["Seccomp"] != "2" {
				t.Errorf("%s: Seccomp = %q, want 2 (filter mode)\n%s", mode, st["Seccomp"], r)
			}
		}
	})
}

// 2. A process that is still kernel uid 0 (root server) must not reach
// global sysctls, sysrq, the mount table or device nodes.
func thrKernelWrites(t *testing.T) {
	const swp = "/proc/sys/vm/swappiness"
	forEachIdentity(t, func(t *testing.T, id runAs) {
		before, err := os.ReadFile(swp)
		if err != nil {
			t.Fatalf("read %s: %v", swp, err)
		}
		orig := strings.TrimSpace(string(before))
		n, _ := strconv.Atoi(orig)
		evil := strconv.Itoa((n + 7) % 100)
		t.Cleanup(func() {
			if now, _ := os.ReadFile(swp); strings.TrimSpace(string(now)) != orig {
				_ = os.WriteFile(swp, []byte(orig+"\n"), 0o644) // undo a leaked write
			}
		})
		e := newEnv(t, id)
		if id.root {
			// Proof, harmless: root outside the sandbox may write the
			// sysctl (the value it already has).
			r := e.sh(t, "off", "echo "+orig+" > "+swp+" && echo sysctl:written")
			if !strings.Contains(r.stdout, "sysctl:written") {
				t.Errorf("probe: root could not write %s outside the sandbox either:\n%s", swp, r)
			}
			// Proof, harmless: root outside may mknod into its own scratch.
			r = e.sh(t, "off", `mknod "$TMPDIR/blk" b 7 0 && echo mknod:ok`)
			if !strings.Contains(r.stdout, "mknod:ok") {
				t.Errorf("probe: root could not mknod outside the sandbox either:\n%s", r)
			}
		}
		_, sysrqErr := os.Stat("/proc/sysrq-trigger")
		if sysrqErr != nil {
			t.Log("/proc/sysrq-trigger is absent on this host: that write is not tried")
		}
		script := strings.Join([]string{
			`try() { name=$1; shift; if ( "$@" ) 2>/dev/null; then echo "$name:ok"; else echo "$name:refused"; fi; }`,
			`try swappiness sh -c 'echo ` + evil + ` > ` + swp + `'`,
			`try domainname sh -c 'echo evener-evil > /proc/sys/kernel/domainname'`,
			`if [ -e /proc/sysrq-trigger ]; then try sysrq sh -c 'echo h > /proc/sysrq-trigger'; fi`,
			`try umount_proc umount /proc`,
			`try umount_proc_lazy umount -l /proc`,
			`try umount_sys umount /sys`,
			`try mount_tmpfs mount -t tmpfs x /mnt`,
			`if grep -q ' /mnt tmpfs ' /proc/self/mounts; then echo mnt_is_tmpfs:yes; else echo mnt_is_tmpfs:no; fi`,
			`if test -r /proc/self/status; then echo proc_still_there:yes; else echo proc_still_there:no; fi`,
			`try mknod_block mknod /tmp/blk b 7 0`,
			`try mknod_char mknod /tmp/chr c 1 3`,
			`try mkfifo mkfifo /tmp/fifo`,
			`if [ -p /tmp/fifo ]; then echo fifo_exists:yes; fi`,
			`if [ -b /tmp/blk ] || [ -c /tmp/chr ]; then echo device_exists:yes; else echo device_exists:no; fi`,
		}, "\n")
		for _, mode := range modes {
			r := e.sh(t, mode, script)
			o := thrLines(r.stdout)
			for _, k := range []string{"swappiness", "domainname", "umount_proc", "umount_proc_lazy", "umount_sys", "mount_tmpfs", "mknod_block", "mknod_char"} {
				if o[k] != "refused" {
					t.Errorf("%s: %s = %q, want refused\n%s", mode, k, o[k], r)
				}
			}
			if sysrqErr == nil && o["sysrq"] != "refused" {
				t.Errorf("%s: write to /proc/sysrq-trigger = %q, want refused\n%s", mode, o["sysrq"], r)
			}
			if o["mnt_is_tmpfs"] != "no" || o["proc_still_there"] != "yes" || o["device_exists"] != "no" {
				t.Errorf("%s: mount table or device nodes changed\n%s", mode, r)
			}
			if o["mkfifo"] != "ok" || o["fifo_exists"] != "yes" {
				t.Errorf("%s: mkfifo refused (FIFOs must stay allowed; the probe needs the mknod path to work)\n%s", mode, r)
			}
			after, _ := os.ReadFile(swp)
			if got := strings.TrimSpace(string(after)); got != orig {
				t.Errorf("%s: host %s changed from %s to %s", mode, swp, orig, got)
			}
		}
	})
}

// 3. No nested user namespaces.
func thrNestedUserns(t *testing.T) {
	script := `for f in -U -r; do if unshare $f true 2>/dev/null; then echo "unshare$f:ok"; else echo "unshare$f:refused"; fi; done`
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		off := thrLines(e.sh(t, "off", script).stdout)
		if off["unshare-U"] != "ok" || off["unshare-r"] != "ok" {
			t.Logf("probe: unshare fails outside the sandbox too (%v); the sandbox result proves less", off)
		}
		for _, mode := range modes {
			r := e.sh(t, mode, script)
			o := thrLines(r.stdout)
			if o["unshare-U"] != "refused" || o["unshare-r"] != "refused" {
				t.Errorf("%s: nested user namespace allowed\n%s", mode, r)
			}
		}
	})
}

const thrTIOCSTIPerl = `my $c = "x";
if (ioctl(STDIN, 0x5412, $c)) { print "tiocsti:ok\n" } else { printf "tiocsti:errno=%d\n", $!+0 }
`

// 4. TIOCSTI is refused by the filter itself: EPERM even on a descriptor
// that is not a terminal (the kernel alone would say ENOTTY).
func thrTIOCSTI(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		pl := thrPerl(t, e, "tiocsti.pl", thrTIOCSTIPerl)
		// Proof: outside, stdin /dev/null gives ENOTTY, a different error.
		off := thrLines(e.sh(t, "off", "perl "+pl).stdout)
		if off["tiocsti"] != fmt.Sprintf("errno=%d", unix.ENOTTY) {
			t.Errorf("probe: TIOCSTI on /dev/null outside the sandbox gave %q, want ENOTTY", off["tiocsti"])
		}
		for _, mode := range modes {
			r := e.sh(t, mode, "perl "+pl)
			if got := thrLines(r.stdout)["tiocsti"]; got != fmt.Sprintf("errno=%d", unix.EPERM) {
				t.Errorf("%s: TIOCSTI gave %q, want errno=%d (EPERM from the filter)\n%s", mode, got, unix.EPERM, r)
			}
		}
	})
}

const thrSyscallPerl = `sub r { my ($n, $r) = @_; printf "%s:%s\n", $n, ($r == -1 ? "errno=" . ($!+0) : "ok"); }
$! = 0; r("keyctl", syscall(250, 0, -3, 0));            # KEYCTL_GET_KEYRING_ID, session keyring
$! = 0; r("io_uring_setup", syscall(425, 1, 0));        # params NULL: EFAULT when allowed
$! = 0; r("bpf", syscall(321, 0, 0, 8));                # attr NULL: EFAULT when allowed
$! = 0; r("perf_event_open", syscall(298, 0, 0, -1, -1, 0)); # attr NULL: EFAULT
$! = 0; r("userfaultfd", syscall(323, 1));              # UFFD_USER_MODE_ONLY
$! = 0; r("ptrace_traceme", syscall(101, 0, 0, 0, 0));  # PTRACE_TRACEME
`

const thrMemPerl = `# read 16 bytes of a process's memory at its first readable mapping
my $pid = shift;
open(my $m, "<", "/proc/$pid/maps") or do { print "mem:maps-refused\n"; exit 0 };
my $addr;
while (<$m>) { if (/^([0-9a-f]+)-[0-9a-f]+ r/) { $addr = hex($1); last } }
close $m;
defined $addr or do { print "mem:maps-empty\n"; exit 0 };
open(my $f, "<", "/proc/$pid/mem") or do { print "mem:open-refused\n"; exit 0 };
binmode $f;
sysseek($f, $addr, 0) or do { print "mem:seek-refused\n"; exit 0 };
my $n = sysread($f, my $buf, 16);
if (!defined $n || $n <= 0) { print "mem:read-refused\n"; exit 0 }
print "mem:read\n";
`

const thrAbstractPerl = `use Socket;
my $name = shift;
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or do { print "abstract:socket-failed\n"; exit 0 };
if (connect($s, pack_sockaddr_un("\0" . $name))) { print "abstract:connected\n" } else { printf "abstract:refused errno=%d\n", $!+0 }
`

// 5. Kernel objects that namespaces do not separate, or that the sandbox
// must not reach.
func thrSharedKernelObjects(t *testing.T) {
	t.Run("syscalls", func(t *testing.T) {
		thrNeedAmd64(t)
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			pl := thrPerl(t, e, "syscalls.pl", thrSyscallPerl)
			names := []string{"keyctl", "io_uring_setup", "bpf", "perf_event_open", "userfaultfd", "ptrace_traceme"}
			// Proof: outside, each call gets past the permission check
			// (success, or EFAULT on the NULL argument).
			off := e.sh(t, "off", "perl "+pl)
			oo := thrLines(off.stdout)
			for _, n := range names {
				if oo[n] == "" || oo[n] == fmt.Sprintf("errno=%d", unix.EPERM) {
					t.Errorf("probe: %s outside the sandbox gave %q; the sandbox's EPERM would prove nothing\n%s", n, oo[n], off)
				}
			}
			for _, mode := range modes {
				r := e.sh(t, mode, "perl "+pl)
				o := thrLines(r.stdout)
				for _, n := range names {
					if o[n] != fmt.Sprintf("errno=%d", unix.EPERM) {
						t.Errorf("%s: %s gave %q, want EPERM\n%s", mode, n, o[n], r)
					}
				}
			}
		})
	})

	t.Run("sysv_ipc", func(t *testing.T) {
		out, err := exec.Command("ipcmk", "-M", "4096").CombinedOutput()
		if err != nil {
			t.Fatalf("ipcmk: %v: %s", err, out)
		}
		m := regexp.MustCompile(`id:\s*(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("ipcmk printed no id: %s", out)
		}
		shmid := string(m[1])
		t.Cleanup(func() { _ = exec.Command("ipcrm", "-m", shmid).Run() })
		listed := regexp.MustCompile(`(?m)^0x[0-9a-f]+\s+` + shmid + `\s`)
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			if r := e.sh(t, "off", "ipcs -m"); !listed.MatchString(r.stdout) {
				t.Errorf("probe: host segment %s not listed outside the sandbox\n%s", shmid, r)
			}
			for _, mode := range modes {
				r := e.sh(t, mode, "ipcs -m")
				if r.code != 0 || !strings.Contains(r.stdout, "Shared Memory") {
					t.Errorf("%s: ipcs did not run\n%s", mode, r)
				}
				if listed.MatchString(r.stdout) {
					t.Errorf("%s: the host's SysV segment %s is visible\n%s", mode, shmid, r)
				}
			}
		})
	})

	t.Run("abstract_unix_socket", func(t *testing.T) {
		name := "evener-test-" + thrRand(t)
		ln, err := net.Listen("unix", "@"+name)
		if err != nil {
			t.Fatalf("listen @%s: %v", name, err)
		}
		defer ln.Close()
		var accepted sync.WaitGroup
		var mu sync.Mutex // guards conns
		conns := 0
		accepted.Add(1)
		go func() {
			defer accepted.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns++
				mu.Unlock()
				c.Close()
			}
		}()
		count := func() int { mu.Lock(); defer mu.Unlock(); return conns }
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			pl := thrPerl(t, e, "abstract.pl", thrAbstractPerl)
			before := count()
			r := e.sh(t, "off", "perl "+pl+" "+name)
			if thrLines(r.stdout)["abstract"] != "connected" {
				t.Errorf("probe: could not reach @%s outside the sandbox\n%s", name, r)
			}
			for _, mode := range modes {
				r := e.sh(t, mode, "perl "+pl+" "+name)
				if got := thrLines(r.stdout)["abstract"]; !strings.HasPrefix(got, "refused") {
					t.Errorf("%s (network off): the host's abstract socket @%s is reachable: %q\n%s", mode, name, got, r)
				}
				// Known residual: with the network on, the sandbox shares
				// the host's network namespace (and so its abstract socket
				// namespace) until egress control lands. Recorded, not
				// asserted.
				rn := e.run(t, "exec", "--sandbox", mode, "--sandbox-net", "on", "--", "perl", filepath.Join(e.work, ".probes", "abstract.pl"), name)
				t.Logf("known residual: %s with --sandbox-net on: abstract socket probe says %q", mode, thrLines(rn.stdout)["abstract"])
			}
			if count() == before {
				t.Errorf("probe: the listener saw no connection at all")
			}
		})
		ln.Close()
		accepted.Wait()
	})

	t.Run("other_process_memory", func(t *testing.T) {
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			e.extra = append(e.extra, thrSecretEnv()...)
			pl := thrPerl(t, e, "mem.pl", thrMemPerl)
			script := `echo "self-$(perl ` + pl + ` self)"; echo "init-$(perl ` + pl + ` 1)"; ` +
				`if tr '\0' '\n' < /proc/1/environ > /tmp/environ 2>/dev/null; then echo environ:readable; cat /tmp/environ | sed 's/^/env1 /'; else echo environ:refused; fi`
			for _, mode := range modes {
				r := e.sh(t, mode, script)
				o := thrLines(r.stdout)
				// Proof: the reader works on memory it may read.
				if o["self-mem"] != "read" {
					t.Errorf("%s: probe: reading our own memory through /proc/self/mem failed (%q)\n%s", mode, o["self-mem"], r)
				}
				if o["init-mem"] == "read" {
					t.Errorf("%s: /proc/1/mem (the sandbox's init, bwrap) is readable from the command\n%s", mode, r)
				}
				for _, s := range thrSecretValues {
					if strings.Contains(r.stdout, s) {
						t.Errorf("%s: /proc/1/environ shows secret %q\n%s", mode, s, r)
					}
				}
				if o["environ"] == "readable" && !strings.Contains(r.stdout, "env1 HOME=") {
					t.Errorf("%s: /proc/1/environ was readable but showed no HOME: the probe read nothing\n%s", mode, r)
				}
			}
		})
	})
}

// 6. A descriptor the server inherited without close-on-exec must not
// reach the sandbox.
func thrInheritedFDs(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		secret := filepath.Join(baseDir, "inherited-secret-"+thrRand(t))
		const secretText = "inherited-fd-secret-d41d8"
		if err := os.WriteFile(secret, []byte(secretText+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(secret)
		script := `ls -l /proc/self/fd | sed 's/^/ls /'; if cat <&3 2>/dev/null; then echo fd3:read; else echo fd3:refused; fi; if cat /proc/self/fd/3 2>/dev/null; then echo procfd3:read; fi`
		open := func() *os.File {
			f, err := os.Open(secret)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		// Proof: the runner really hands fd 3 over (a plain shell reads it).
		f := open()
		pr, _ := thrStart(t, e, thrSpawnOpts{extraFiles: []*os.File{f}, direct: true}, "/bin/sh", "-c", script).wait(t)
		f.Close()
		if !strings.Contains(pr.stdout, secretText) {
			t.Fatalf("probe: a plain shell given the same fd 3 did not read it:\n%s", pr)
		}
		lsLine := regexp.MustCompile(`^ls .* (\d+) -> (.*)$`)
		for _, mode := range modes {
			f := open()
			r, _ := thrStart(t, e, thrSpawnOpts{extraFiles: []*os.File{f}},
				"exec", "--sandbox", mode, "--sandbox-net", "off", "--", "/bin/sh", "-c", script).wait(t)
			f.Close()
			if strings.Contains(r.stdout, secretText) || strings.Contains(r.stdout, "procfd3:read") {
				t.Errorf("%s: the inherited descriptor's content reached the sandbox\n%s", mode, r)
			}
			if !strings.Contains(r.stdout, "fd3:refused") {
				t.Errorf("%s: reading fd 3 did not fail\n%s", mode, r)
			}
			seen := 0
			for _, l := range strings.Split(r.stdout, "\n") {
				m := lsLine.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				seen++
				fd, _ := strconv.Atoi(m[1])
				if fd <= 2 {
					continue
				}
				// ls's own directory handle on /proc/<its pid>/fd is fine.
				if regexp.MustCompile(`^/proc/\d+/fd$`).MatchString(m[2]) {
					continue
				}
				t.Errorf("%s: descriptor %d -> %s is open in the sandbox\n%s", mode, fd, m[2], r)
			}
			if seen < 3 {
				t.Errorf("%s: probe: ls listed %d descriptors, expected at least 0,1,2\n%s", mode, seen, r)
			}
		}
	})
}

// 7. Fork bombs, memory bombs, tmpfs and file size, descriptors.
func thrResources(t *testing.T) {
	t.Run("fork_bomb", func(t *testing.T) {
		// 2000 rather than 20000: the host's pid_max can be as low as 32768
		// and a sandbox that fails to bound the bomb must not take the host
		// (and everyone else's tests) down with it. 2000 is ten times the
		// configured limit, which is what the case needs to show.
		const iterations = 2000
		argv := []string{"sleep", "331"}
		base := thrCountArgv(argv...)
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			cfg := thrConfig(t, e, "procs.toml", "[limits]\nprocs = 200\n")
			script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep 331 & i=$((i+1)); done; echo "started=$i"`, iterations)
			for _, mode := range modes {
				r, d := thrTimed(t, e, "exec", "--sandbox", mode, "--sandbox-net", "off", "--config", cfg, "--timeout", "20s", "--", "/bin/sh", "-c", script)
				left := thrWaitCount(2*time.Second, func(n int) bool { return n <= base }, argv...)
				if left > base {
					t.Errorf("%s: %d `sleep 331` left on the host after the command returned (baseline %d)", mode, left, base)
					thrKillArgv(argv...)
				}
				if strings.Contains(r.stdout, fmt.Sprintf("started=%d", iterations)) {
					t.Errorf("%s: the fork bomb started all %d processes under procs = 200 (%s)\n%s", mode, iterations, d.Round(time.Millisecond), r)
					continue
				}
				if !regexp.MustCompile(`(?i)fork|Resource temporarily unavailable`).MatchString(r.stderr) || r.code == 0 {
					t.Errorf("%s: the fork bomb did not fail on fork\n%s", mode, r)
				}
			}
		})
	})

	t.Run("memory_bomb", func(t *testing.T) {
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			cfg := thrConfig(t, e, "data.toml", fmt.Sprintf("[limits]\ndata_bytes = %d\n", 256<<20))
			alloc := func(mib int) string {
				return fmt.Sprintf(`perl -e '$x = "a" x (%d * 1024 * 1024); print "allocated\n"'`, mib)
			}
			for _, mode := range modes {
				// Proof: the same allocation, small, works under the limit.
				if r := e.sh(t, mode, alloc(32), "--config", cfg); !strings.Contains(r.stdout, "allocated") {
					t.Errorf("%s: probe: a 32 MiB allocation failed under a 256 MiB limit\n%s", mode, r)
				}
				r := e.sh(t, mode, alloc(2048), "--config", cfg)
				if strings.Contains(r.stdout, "allocated") || r.code == 0 {
					t.Errorf("%s: a 2 GiB allocation succeeded under data_bytes = 256 MiB\n%s", mode, r)
				}
			}
		})
	})

	t.Run("tmpfs_size", func(t *testing.T) {
		const size = 64 << 20
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			cfg := thrConfig(t, e, "tmpfs.toml", fmt.Sprintf("[limits]\ntmpfs_bytes = %d\n", size))
			script := `df -B1 --output=size /tmp | tail -1 | sed 's/^ */size:/'; ` +
				`if dd if=/dev/zero of=/tmp/big bs=1M count=100; then echo dd:ok; else echo dd:failed; fi; ` +
				`echo "written:$(stat -c %s /tmp/big)"`
			for _, mode := range modes {
				r := e.sh(t, mode, script, "--config", cfg)
				o := thrLines(r.stdout)
				if o["size"] != strconv.Itoa(size) {
					t.Errorf("%s: /tmp is %q bytes, want %d\n%s", mode, o["size"], size, r)
				}
				if o["dd"] != "failed" || !strings.Contains(r.stderr, "No space left") {
					t.Errorf("%s: writing 100 MiB into a 64 MiB /tmp did not fail with ENOSPC\n%s", mode, r)
				}
				if w, _ := strconv.Atoi(o["written"]); w > size {
					t.Errorf("%s: %d bytes landed in /tmp, above the %d limit", mode, w, size)
				}
			}
		})
	})

	t.Run("file_size", func(t *testing.T) {
		const limit = 1 << 20
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			cfg := thrConfig(t, e, "fsize.toml", fmt.Sprintf("[limits]\nfile_bytes = %d\n", limit))
			for _, mode := range modes {
				dir := q(e.work)
				if mode == "read-only" {
					dir = `"$TMPDIR"` // the only writable place there
				}
				host := filepath.Join(e.work, "big-"+mode)
				script := fmt.Sprintf(`f=%s/big-%s; dd if=/dev/zero of="$f" bs=64K count=32 2>/dev/null; echo "dd:$?"; echo "size:$(stat -c %%s "$f")"`, dir, mode)
				r := e.sh(t, mode, script, "--config", cfg)
				o := thrLines(r.stdout)
				// 128+SIGXFSZ(25) = 153: "File size limit exceeded".
				if o["dd"] == "0" || o["dd"] == "" {
					t.Errorf("%s: writing 2 MiB under file_bytes = 1 MiB succeeded\n%s", mode, r)
				}
				if n, err := strconv.Atoi(o["size"]); err != nil || n > limit {
					t.Errorf("%s: the file grew to %q bytes, above %d\n%s", mode, o["size"], limit, r)
				}
				if mode != "read-only" {
					if fi, err := os.Stat(host); err != nil {
						t.Errorf("%s: probe: dd left no file at all in the worktree (%v)\n%s", mode, err, r)
					} else if fi.Size() > limit {
						t.Errorf("%s: %s is %d bytes on the host, above %d", mode, host, fi.Size(), limit)
					}
				}
			}
		})
	})

	t.Run("open_files", func(t *testing.T) {
		const limit = 256
		var server unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &server); err != nil {
			t.Fatal(err)
		}
		if server.Cur <= limit {
			t.Skipf("the server's own open-file limit (%d) is not above %d", server.Cur, limit)
		}
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			cfg := thrConfig(t, e, "nofile.toml", fmt.Sprintf("[limits]\nopen_files = %d\n", limit))
			if r := e.sh(t, "off", "ulimit -n"); strings.TrimSpace(r.stdout) == strconv.Itoa(limit) {
				t.Errorf("probe: the limit already shows outside the sandbox\n%s", r)
			}
			for _, mode := range modes {
				r := e.sh(t, mode, "ulimit -n", "--config", cfg)
				if got := strings.TrimSpace(r.stdout); got != strconv.Itoa(limit) {
					t.Errorf("%s: ulimit -n = %q, want %d (server: %d)\n%s", mode, got, limit, server.Cur, r)
				}
			}
		})
	})
}

// 8. Timeouts and detached children.
func thrTimeouts(t *testing.T) {
	t.Run("trap_TERM_loop", func(t *testing.T) {
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			for _, mode := range modes {
				r, d := thrTimed(t, e, "exec", "--sandbox", mode, "--sandbox-net", "off", "--timeout", "2s", "--", "/bin/sh", "-c", "trap '' TERM; while :; do :; done")
				if r.code != 124 {
					t.Errorf("%s: exit %d, want 124\n%s", mode, r.code, r)
				}
				if d > 10*time.Second {
					t.Errorf("%s: returned after %s, want within 10s", mode, d)
				}
			}
		})
	})

	t.Run("detached_children", func(t *testing.T) {
		cases := []struct {
			name, script string
			argv         []string
		}{
			{"setsid", "setsid sleep 317 & exit 0", []string{"sleep", "317"}},
			{"nohup", "nohup sleep 317 & exit 0", []string{"sleep", "317"}},
			{"subshell_setsid_redirected", "(setsid sleep 317 > /dev/null 2>&1 &); exit 0", []string{"sleep", "317"}},
			{"setsid_holding_stdout", "setsid sh -c 'sleep 318' & exit 0", []string{"sleep", "318"}},
		}
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			for _, mode := range modes {
				for _, c := range cases {
					base := thrCountArgv(c.argv...)
					r, d := thrTimed(t, e, "exec", "--sandbox", mode, "--sandbox-net", "off", "--", "/bin/sh", "-c", c.script)
					if r.code != 0 {
						t.Errorf("%s/%s: exit %d\n%s", mode, c.name, r.code, r)
					}
					if d >= 4*time.Second {
						t.Errorf("%s/%s: took %s; a detached child kept the caller waiting", mode, c.name, d.Round(time.Millisecond))
					}
					if left := thrWaitCount(time.Second, func(n int) bool { return n <= base }, c.argv...); left > base {
						t.Errorf("%s/%s: %d `%s` left running on the host", mode, c.name, left, strings.Join(c.argv, " "))
						thrKillArgv(c.argv...)
					}
				}
			}
		})
	})

	t.Run("SIGTERM_kills_tree", func(t *testing.T) {
		argv := []string{"sleep", "319"}
		forEachIdentity(t, func(t *testing.T, id runAs) {
			e := newEnv(t, id)
			for _, mode := range modes {
				base := thrCountArgv(argv...)
				run := thrStart(t, e, thrSpawnOpts{}, "exec", "--sandbox", mode, "--sandbox-net", "off", "--",
					"/bin/sh", "-c", "setsid sleep 319 & sleep 319 & echo ready; wait")
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) && (!strings.Contains(run.so.String(), "ready") || thrCountArgv(argv...) < base+2) {
					time.Sleep(20 * time.Millisecond)
				}
				if n := thrCountArgv(argv...); n < base+2 {
					_ = run.cmd.Process.Kill()
					r, _ := run.wait(t)
					t.Fatalf("%s: probe: the two `sleep 319` never showed on the host (%d)\n%s", mode, n, r)
				}
				_ = run.cmd.Process.Signal(syscall.SIGTERM)
				r, d := run.wait(t)
				if r.code == 0 {
					t.Errorf("%s: exited 0 after SIGTERM\n%s", mode, r)
				}
				if d > 15*time.Second {
					t.Errorf("%s: SIGTERM took %s to take effect", mode, d)
				}
				if left := thrWaitCount(2*time.Second, func(n int) bool { return n <= base }, argv...); left > base {
					t.Errorf("%s: %d `sleep 319` survived SIGTERM to evener-mcp exec", mode, left-base)
					thrKillArgv(argv...)
				}
			}
		})
	})
}

// thrPty opens a pseudo-terminal pair; the caller keeps both open.
func thrPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pts: %v", err)
	}
	return m, s
}

// 9. The command runs in a new session: it has no controlling terminal,
// even when the server has one.
func thrNoCtty(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		pl := thrPerl(t, e, "tiocsti.pl", thrTIOCSTIPerl)
		script := `echo "tty:$(tty)"; if (exec 3</dev/tty) 2>/dev/null; then echo devtty:open; else echo devtty:refused; fi; perl ` + pl
		run := func(mode string) result {
			master, slave := thrPty(t)
			defer master.Close()
			defer slave.Close()
			if !id.root && os.Geteuid() == 0 {
				_ = os.Chown(slave.Name(), id.uid, id.gid)
			}
			r, _ := thrStart(t, e, thrSpawnOpts{stdin: slave, ctty: true},
				"exec", "--sandbox", mode, "--sandbox-net", "off", "--", "/bin/sh", "-c", script).wait(t)
			return r
		}
		// Proof: the server really has the terminal as its controlling
		// terminal, and outside the sandbox the command can open it and
		// push input into it.
		off := run("off")
		oo := thrLines(off.stdout)
		if oo["devtty"] != "open" || !strings.HasPrefix(oo["tty"], "/dev/pts/") {
			t.Fatalf("probe: the server was given no controlling terminal:\n%s", off)
		}
		if oo["tiocsti"] != "ok" {
			t.Logf("probe: TIOCSTI outside the sandbox gave %q (dev.tty.legacy_tiocsti may be 0)", oo["tiocsti"])
		}
		for _, mode := range modes {
			r := run(mode)
			o := thrLines(r.stdout)
			if o["devtty"] != "refused" {
				t.Errorf("%s: the command can open /dev/tty: it still has a controlling terminal\n%s", mode, r)
			}
			if o["tty"] != "not a tty" {
				t.Logf("%s: tty printed %q with a terminal on stdin", mode, o["tty"])
			}
			if o["tiocsti"] != fmt.Sprintf("errno=%d", unix.EPERM) {
				t.Errorf("%s: TIOCSTI on a real terminal gave %q, want EPERM\n%s", mode, o["tiocsti"], r)
			}
		}
		// And with no terminal at all, as the brief states it.
		for _, mode := range modes {
			r := e.sh(t, mode, script)
			o := thrLines(r.stdout)
			if o["tty"] != "not a tty" || o["devtty"] != "refused" {
				t.Errorf("%s: with stdin /dev/null: tty=%q devtty=%q\n%s", mode, o["tty"], o["devtty"], r)
			}
		}
	})
}

// 10. bwrap itself is started with the scrubbed environment: /proc/1/environ
// (bwrap's init) shows no secret, and neither does the command's.
func thrBwrapEnviron(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, thrSecretEnv()...)
		script := `echo "init-exe:$(readlink /proc/1/exe)"; tr '\0' '\n' < /proc/1/environ | sed 's/^/init /'; env | sed 's/^/cmd /'`
		for _, mode := range modes {
			r := e.sh(t, mode, script)
			if strings.Contains(r.stderr, "/proc/1/environ: Permission denied") && strings.Contains(startupLine(r), "second layer: landlock") {
				// Landlock refuses a command ptrace-level access to
				// processes outside its domain, the init among them
				// (docs/security.md, "Landlock, the second layer"):
				// nothing of its environment is visible at all.
				r.stdout += "init HOME=" + e.home + "\n"
			}
			if !strings.Contains(r.stdout, "init HOME="+e.home) || !strings.Contains(r.stdout, "cmd HOME="+e.home) {
				t.Errorf("%s: probe: /proc/1/environ or env printed nothing useful\n%s", mode, r)
			}
			if !strings.Contains(r.stdout, "init-exe:") {
				t.Errorf("%s: probe: no init-exe line\n%s", mode, r)
			}
			for _, s := range thrSecretValues {
				for _, l := range strings.Split(r.stdout, "\n") {
					if strings.Contains(l, s) {
						t.Errorf("%s: secret %q visible: %q", mode, s, l)
					}
				}
			}
		}
	})
}
