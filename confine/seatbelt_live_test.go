package confine

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The live Seatbelt suite: the generated profiles run under the real
// /usr/bin/sandbox-exec and are checked against the parity table (reads,
// writes), the network rules (the two proxy ports only, or nothing), the
// reach rules (signals, Apple Events) and the launcher end to end. It needs
// a Mac and EVENER_SEATBELT_LIVE=1; everywhere else it skips, saying so.
// Writes are only ever attempted under the fixture and a /tmp directory of
// its own, never on a system path, so a broken profile cannot damage the
// machine it runs on.

const seatbeltLiveEnv = "EVENER_SEATBELT_LIVE"

func requireSeatbeltLive(t *testing.T) HostReport {
	t.Helper()
	if runtime.GOOS != "darwin" {
		t.Skip("the live Seatbelt suite runs on macOS only (" + seatbeltLiveEnv + "=1 on a Mac); here the profiles are golden- and parity-tested instead")
	}
	if os.Getenv(seatbeltLiveEnv) != "1" {
		t.Skip("set " + seatbeltLiveEnv + "=1 to run the generated profiles under the real sandbox-exec")
	}
	h := Probe(ProbeFull, os.Environ())
	if r := h.Unusable(); r != "" {
		t.Fatalf("%s=1 but this Mac cannot enforce: %s", seatbeltLiveEnv, r)
	}
	return h
}

// sbRun runs args under profile and says whether the command exited 0.
func sbRun(t *testing.T, profile, dir string, args ...string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, SeatbeltExec, append([]string{"-p", profile}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LANG=C"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 && strings.Contains(out.String(), "sandbox-exec:") {
		t.Fatalf("sandbox-exec refused the profile: %s", out.String())
	}
	return err == nil, out.String()
}

func liveListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestSeatbeltLive(t *testing.T) {
	host := requireSeatbeltLive(t)
	pf := newParityFixture(t)
	rows := parityRows(pf)
	absent := "/tmp/evener-parity-absent"
	if err := os.MkdirAll(absent, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(absent) })
	writable := func(path string) bool { return Within(path, pf.root) || Within(path, absent) }
	httpPort, socksPort, otherPort := liveListener(t), liveListener(t), liveListener(t)

	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeRestricted} {
		for _, network := range []Network{NetworkOn, NetworkOff} {
			t.Run(string(mode)+"/net-"+string(network), func(t *testing.T) {
				s := pf.spec(mode, network)
				s.AddDirs = []string{pf.addDir}
				s.HookPaths = []string{filepath.Join(pf.hooks, "check")}
				p, err := Resolve(s, host)
				if err != nil {
					t.Fatal(err)
				}
				var proxy *SeatbeltProxy
				if network == NetworkOn {
					proxy = &SeatbeltProxy{HTTPPort: httpPort, SOCKSPort: socksPort}
				}
				l, err := InspectSeatbelt(p, pf.scratch, DeveloperToolchain(p, host.DeveloperDir), proxy, "")
				if err != nil {
					t.Fatal(err)
				}
				l.ScratchParent = pf.scratchParent
				prof, err := SeatbeltProfile(p, l)
				if err != nil {
					t.Fatal(err)
				}
				// Files: the parity table's Seatbelt column, against the kernel.
				for _, r := range rows {
					_, want := r.expected(t, mode)
					// An absent git surface stays absent (a commondir
					// holding "x" would break the repository): only its
					// creation is tried.
					absentRow := strings.Contains(r.name, "(absent)")
					switch {
					case absentRow:
					case writable(r.path):
						mustWrite(t, r.path, "x\n") // readable only if it exists
					default:
						if _, err := os.Stat(r.path); err != nil {
							continue
						}
					}
					if !absentRow {
						gotR, out := sbRun(t, prof, pf.work, "/bin/cat", r.path)
						if gotR != want.R {
							t.Errorf("%s: read %v, want %v (%s)", r.name, gotR, want.R, strings.TrimSpace(out))
						}
					}
					if writable(r.path) {
						gotW, out := sbRun(t, prof, pf.work, "/bin/sh", "-c", `printf x >> "$1"`, "sh", r.path)
						if gotW != want.W {
							t.Errorf("%s: write %v, want %v (%s)", r.name, gotW, want.W, strings.TrimSpace(out))
						}
					}
				}
				// Renames: a protected git dir cannot be moved out of its rule.
				if p.Mode().Writes() {
					gitDir := filepath.Join(pf.work, ".git")
					if ok, _ := sbRun(t, prof, pf.work, "/bin/mv", gitDir, filepath.Join(pf.work, "moved")); ok {
						t.Error("the worktree's .git could be renamed")
						_ = os.Rename(filepath.Join(pf.work, "moved"), gitDir)
					}
					if ok, _ := sbRun(t, prof, pf.work, "/bin/ln", filepath.Join(gitDir, "config"), filepath.Join(pf.work, "config-link")); ok {
						t.Error(".git/config could be hard-linked into the worktree")
						_ = os.Remove(filepath.Join(pf.work, "config-link"))
					}
					if ok, _ := sbRun(t, prof, pf.work, "/bin/mv", filepath.Join(gitDir, "hooks"), filepath.Join(gitDir, "h2")); ok {
						t.Error(".git/hooks could be renamed")
						_ = os.Rename(filepath.Join(gitDir, "h2"), filepath.Join(gitDir, "hooks"))
					}
				}
				// Network: the two proxy ports with the network on, nothing else.
				for port, want := range map[int]bool{httpPort: network == NetworkOn, socksPort: network == NetworkOn, otherPort: false} {
					if got, out := sbRun(t, prof, pf.work, "/usr/bin/nc", "-z", "-w", "3", "127.0.0.1", strconv.Itoa(port)); got != want {
						t.Errorf("connect to 127.0.0.1:%d: %v, want %v (%s)", port, got, want, strings.TrimSpace(out))
					}
				}
				// Unix sockets: inside the scratch only.
				for dir, want := range map[string]bool{pf.scratch: true, pf.root: false} {
					sock := filepath.Join(dir, "live.sock")
					ln, err := net.Listen("unix", sock)
					if err != nil {
						t.Fatal(err)
					}
					got, out := sbRun(t, prof, pf.work, "/bin/sh", "-c", `echo hi | /usr/bin/nc -U "$1"`, "sh", sock)
					ln.Close()
					os.Remove(sock)
					if got != want {
						t.Errorf("Unix socket in %s: %v, want %v (%s)", dir, got, want, strings.TrimSpace(out))
					}
				}
				// Reach: no signal outside the sandbox, no Apple Events, no
				// process listing of others' arguments.
				if ok, _ := sbRun(t, prof, pf.work, "/bin/kill", "-0", strconv.Itoa(os.Getpid())); ok {
					t.Error("a signal reached the test process outside the sandbox")
				}
				if ok, _ := sbRun(t, prof, pf.work, "/usr/bin/osascript", "-e", "return 1"); ok {
					t.Error("osascript ran")
				}
			})
		}
	}
}

// TestSeatbeltLiveLauncher drives the darwin Launcher end to end.
func TestSeatbeltLiveLauncher(t *testing.T) {
	host := requireSeatbeltLive(t)
	pf := newParityFixture(t)
	for _, mode := range []Mode{ModeWorkspaceWrite, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			s := pf.spec(mode, NetworkOff)
			s.Env = append(s.Env, "PATH=/usr/bin:/bin:/usr/sbin:/sbin")
			p, err := Resolve(s, host)
			if err != nil {
				t.Fatal(err)
			}
			sess, err := NewLauncher(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			run := func(script string) (int, string) {
				var out bytes.Buffer
				res, err := sess.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c", script}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
				if err != nil {
					t.Fatalf("%s: %v", script, err)
				}
				return res.ExitCode, out.String()
			}
			if code, out := run(`echo ok > made.txt && cat made.txt && test "$TMPDIR" = "$EVENER_SCRATCH_DIR" && echo t > "$TMPDIR/t"`); code != 0 || !strings.Contains(out, "ok") {
				t.Errorf("worktree write and scratch: exit %d: %s", code, out)
			}
			if code, _ := run(`echo x >> "$HOME/notes.txt"`); code == 0 {
				t.Error("a HOME file was written")
			}
			if code, _ := run(`cat "$HOME/.ssh/id_rsa"`); code == 0 {
				t.Error("~/.ssh/id_rsa was read")
			}
			if code, _ := run(`echo '[core] hooksPath=/tmp' >> .git/config`); code == 0 {
				t.Error(".git/config was written")
			}
			if host.DeveloperDir != "" {
				if code, out := run(`git --version`); code != 0 {
					t.Errorf("git --version under %s: exit %d: %s", mode, code, out)
				}
			}
			// A timeout kills the command's process group.
			var out bytes.Buffer
			res, err := sess.Run(context.Background(), Command{Args: []string{"/bin/sh", "-c", "sleep 30"}, Stdout: &out, Timeout: 500 * time.Millisecond})
			if err != nil || !res.TimedOut || res.Duration > 10*time.Second {
				t.Errorf("timeout: %+v %v", res, err)
			}
		})
	}
}
