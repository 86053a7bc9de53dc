package confine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// llTestDo, when this test binary runs as a sandboxed command (no
// arguments; the Landlock helper itself has some), does one network step
// and exits: 0 it worked, 3 refused with EACCES or EPERM, 4 otherwise.
const llTestDo = "EVENER_LL_TEST_DO"

func init() {
	do := os.Getenv(llTestDo)
	if do == "" || len(os.Args) != 1 {
		return
	}
	kind, addr, _ := strings.Cut(do, ":")
	c, err := net.DialTimeout(kind, addr, 5*time.Second)
	switch {
	case err == nil:
		c.Close()
		os.Exit(0)
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(4)
}

// TestLandlockSecondLayer (docs/security.md, "Landlock, the second layer"):
// with the first layer deliberately widened by a test hook (a directory
// outside the roots bound writable; one bound readable in restricted
// mode; the server's network namespace kept; the host's PID namespace and
// procfs kept), Landlock alone still refuses the write, the read, a TCP
// connect to a port not the relay's (ABI 4+), a connect to an abstract
// socket and a signal to a process outside the sandbox (ABI 6+). The
// control runs the same widened sandboxes with the layer left out: every
// step then goes through, so the refusals are Landlock's.
func TestLandlockSecondLayer(t *testing.T) {
	abi := landlockABI()
	if abi < LandlockMinABI {
		t.Skipf("landlock ABI %d: no second layer on this kernel", abi)
	}
	for _, layer := range []bool{true, false} {
		name := "landlock"
		if !layer {
			name = "control-without-landlock"
		}
		t.Run(name, func(t *testing.T) {
			landlockOffForTest = !layer
			t.Cleanup(func() { landlockOffForTest, widenPlanForTest, widenArgsForTest = false, nil, nil })
			// want is what the step must do: refused under the layer,
			// allowed without it.
			want := func(t *testing.T, what string, allowed bool) {
				t.Helper()
				if allowed == layer {
					t.Errorf("%s: allowed %v with landlock %v", what, allowed, layer)
				}
			}
			t.Run("write outside the roots", func(t *testing.T) {
				p, f := livePolicy(t, ModeWorkspaceWrite)
				out := filepath.Join(f.root, "outside")
				mustMkdir(t, out)
				widenPlanForTest = func(mp MountPlan) MountPlan {
					return append(mp, Mount{Kind: MountBind, Src: out, Dst: out, Why: "test: a mount-plan bug"})
				}
				defer func() { widenPlanForTest = nil }()
				res, stderr := runLL(t, p, Command{Args: []string{"/bin/sh", "-c", "echo x > " + shq(out+"/new")}})
				_, err := os.Stat(filepath.Join(out, "new"))
				want(t, "write beneath a widened bind", err == nil && res.ExitCode == 0)
				if layer && !strings.Contains(stderr, "Permission denied") {
					t.Errorf("the write was refused, but not by Landlock (EACCES): %q", stderr)
				}
				// The layer never gets in the way of the write roots.
				res, stderr = runLL(t, p, Command{Args: []string{"/bin/sh", "-c", "echo x > in && mv in in2 && mkdir d && mv in2 d/ && rm -r d && echo y > /tmp/t && : > /dev/null"}})
				if res.ExitCode != 0 {
					t.Errorf("ordinary writes failed: %s", stderr)
				}
			})
			t.Run("read outside the exposed paths", func(t *testing.T) {
				p, f := livePolicy(t, ModeRestricted)
				out := filepath.Join(f.root, "outside")
				mustMkdir(t, out)
				if err := os.WriteFile(filepath.Join(out, "secret"), []byte("s3cret\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				widenPlanForTest = func(mp MountPlan) MountPlan {
					// Before the read-only remount of the root: bwrap
					// cannot make the mount point after it (the Landlock
					// helper's bind comes later, under /tmp's tmpfs).
					i := slices.IndexFunc(mp, func(m Mount) bool { return m.Kind == MountRemount && m.Dst == "/" })
					if i < 0 {
						t.Fatal("restricted plan without the root's read-only remount")
					}
					return slices.Insert(mp, i, Mount{Kind: MountROBind, Src: out, Dst: out, Why: "test: a mount-plan bug"})
				}
				defer func() { widenPlanForTest = nil }()
				var so bytes.Buffer
				res, stderr := runLL(t, p, Command{Args: []string{"/bin/cat", out + "/secret"}, Stdout: &so})
				want(t, "read beneath a widened bind", res.ExitCode == 0 && so.String() == "s3cret\n")
				_ = stderr
				// The worktree's ancestors stay listable, as without the layer.
				widenPlanForTest = nil
				so.Reset()
				res, stderr = runLL(t, p, Command{Args: []string{"/bin/ls", filepath.Dir(f.work)}, Stdout: &so})
				if res.ExitCode != 0 || !strings.Contains(so.String(), "work") {
					t.Errorf("listing the worktree's parent: %d %q %s", res.ExitCode, so.String(), stderr)
				}
			})
			t.Run("tcp connect on the server's network", func(t *testing.T) {
				if abi < 4 {
					t.Skipf("landlock ABI %d: no TCP rules", abi)
				}
				p, _ := livePolicy(t, ModeWorkspaceWrite)
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						c.Close()
					}
				}()
				widenArgsForTest = func(a []string) []string { return drop(a, "--unshare-net") }
				widenPlanForTest = bindTestBinary(t)
				defer func() { widenArgsForTest, widenPlanForTest = nil, nil }()
				res, stderr := runLL(t, p, Command{Args: []string{llTestBin}, Env: map[string]string{llTestDo: "tcp:" + ln.Addr().String()}})
				want(t, "tcp connect to a host port", res.ExitCode == 0)
				if layer && res.ExitCode != 3 {
					t.Errorf("tcp connect: exit %d, want 3 (EACCES): %s", res.ExitCode, stderr)
				}
			})
			t.Run("scopes", func(t *testing.T) {
				if abi < 6 {
					t.Skipf("landlock ABI %d: no scopes", abi)
				}
				p, _ := livePolicy(t, ModeWorkspaceWrite)
				var rb [8]byte
				_, _ = rand.Read(rb[:])
				name := "@evener-ll-test-" + hex.EncodeToString(rb[:])
				ln, err := net.Listen("unix", name)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						c.Close()
					}
				}()
				widenArgsForTest = func(a []string) []string { return drop(a, "--unshare-net") }
				widenPlanForTest = bindTestBinary(t)
				res, stderr := runLL(t, p, Command{Args: []string{llTestBin}, Env: map[string]string{llTestDo: "unix:" + name}})
				want(t, "connect to the host's abstract socket", res.ExitCode == 0)
				if layer && res.ExitCode != 3 {
					t.Errorf("abstract connect: exit %d, want 3 (EPERM): %s", res.ExitCode, stderr)
				}

				sleeper := exec.Command("/bin/sleep", "60")
				if err := sleeper.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
				// The host's PID namespace and procfs: the sandbox can name
				// the sleeper.
				widenArgsForTest = func(a []string) []string { return drop(a, "--unshare-pid") }
				widenPlanForTest = func(mp MountPlan) MountPlan {
					for i, m := range mp {
						if m.Kind == MountProc {
							mp[i] = Mount{Kind: MountDevBind, Src: "/proc", Dst: "/proc", Why: "test: the host's procfs"}
						}
					}
					return mp
				}
				defer func() { widenArgsForTest, widenPlanForTest = nil, nil }()
				res, stderr = runLL(t, p, Command{Args: []string{"/bin/sh", "-c", "kill -0 " + strconv.Itoa(sleeper.Process.Pid)}})
				want(t, "signal to a process outside", res.ExitCode == 0)
				if layer && !strings.Contains(stderr, "ermitted") {
					t.Errorf("kill: exit %d, want EPERM: %s", res.ExitCode, stderr)
				}
			})
		})
	}
}

// runLL runs c in a launcher for p and returns its result and stderr.
func runLL(t *testing.T, p *Policy, c Command) (Result, string) {
	t.Helper()
	l, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stderr bytes.Buffer
	if c.Stdout == nil {
		c.Stdout = &stderr
	}
	c.Stderr = &stderr
	c.Timeout = 30 * time.Second
	res, err := l.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("run %q: %v (%s)", c.Args, err, stderr.String())
	}
	return res, stderr.String()
}

// llTestBin is where bindTestBinary puts this test binary in a sandbox.
const llTestBin = "/tmp/.evener-ll-test"

// bindTestBinary is a plan hook binding this test binary at llTestBin, the
// Landlock helper or not.
func bindTestBinary(t *testing.T) func(MountPlan) MountPlan {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(mp MountPlan) MountPlan {
		return append(mp, Mount{Kind: MountROBind, Src: exe, Dst: llTestBin, Why: "test: this binary"})
	}
}

func drop(args []string, opt string) []string {
	return slices.DeleteFunc(args, func(a string) bool { return a == opt })
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestLandlockRulesFromPolicy: the rules come from the policy and the
// layout, never from the mount plan, and survive their encoding whole
// (any byte but NUL in a path).
func TestLandlockRulesFromPolicy(t *testing.T) {
	f := newFixture(t)
	h := usableHost
	h.Landlock = 7
	p := f.resolve(t, ModeRestricted, NetworkOn, h)
	if p.SecondLayer() != "landlock ABI 7" {
		t.Errorf("second layer %q", p.SecondLayer())
	}
	l := Layout{Scratch: f.scratch, SystemRoots: []Entry{{Path: "/usr", Kind: PathDir}}, HookDirs: []string{"/opt/hooks;x=y\n"}}
	r := RulesForLandlock(p, l, NetworkOn)
	if !slices.Contains(r.Write, f.work) || !slices.Contains(r.Write, f.scratch) || slices.Contains(r.Read, "/") || !slices.Contains(r.List, "/") {
		t.Errorf("restricted rules %+v", r)
	}
	if !r.GuardTCP || !slices.Equal(r.TCPPorts, []uint16{RelayHTTPPort, RelaySOCKSPort}) {
		t.Errorf("network on: tcp %v %v", r.GuardTCP, r.TCPPorts)
	}
	if h := RulesForLandlock(p, l, NetworkHost); h.GuardTCP {
		t.Error("the host's network got a TCP guard")
	}
	r.HostNetNS = "4:4026531840"
	back, err := ParseLandlockRules(r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back) != fmt.Sprint(r) {
		t.Errorf("round trip:\n%+v\n%+v", r, back)
	}
	for _, bad := range []string{"v2", "v1;r=zz", "v1;q=00", "v1;tcp=99999", "v1;r=" + hex.EncodeToString([]byte("rel"))} {
		if _, err := ParseLandlockRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSecondLayerReport: a kernel without Landlock or with ABI 1 is
// reported as such (probe) and the startup line claims nothing; each
// guarantee is named with the ABI that carries it.
func TestSecondLayerReport(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		abi         int
		layer, line string
		holds       []string
	}{
		{0, "none (this kernel has no Landlock", "", nil},
		{1, "none (landlock ABI 1 is too old", "", nil},
		{3, "landlock ABI 3", "; second layer: landlock ABI 3", []string{"tcp: not covered", "scopes: not covered"}},
		{5, "landlock ABI 5", "; second layer: landlock ABI 5", []string{"tcp: connect only", "scopes: not covered"}},
		{7, "landlock ABI 7", "; second layer: landlock ABI 7", []string{"tcp: connect only", "scopes: abstract Unix sockets and signals"}},
	} {
		h := usableHost
		h.Landlock = c.abi
		p := f.resolve(t, ModeWorkspaceWrite, NetworkOff, h)
		if !strings.HasPrefix(p.SecondLayer(), c.layer) {
			t.Errorf("ABI %d: second layer %q, want %q...", c.abi, p.SecondLayer(), c.layer)
		}
		if line := p.StartupLine(); (c.line == "") == strings.Contains(line, "second layer") || (c.line != "" && !strings.HasSuffix(line, c.line)) {
			t.Errorf("ABI %d: startup line %q", c.abi, line)
		}
		d := strings.Join(p.SecondLayerDetail(), "\n")
		for _, h := range c.holds {
			if !strings.Contains(d, h) {
				t.Errorf("ABI %d: detail lacks %q:\n%s", c.abi, h, d)
			}
		}
		if c.holds == nil && d != "" {
			t.Errorf("ABI %d: detail %q with no layer", c.abi, d)
		}
	}
	off := f.resolve(t, ModeOff, NetworkOff, usableHost)
	if off.SecondLayer() != "" {
		t.Errorf("mode off: second layer %q", off.SecondLayer())
	}
}
