//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestSessionProcessBound: a session runs at most max_concurrent_calls
// spawning calls at once; a call beyond that is refused at once with a
// clear error (never queued). limits.procs bounds the session's processes
// as a whole (TestSessionProcsWhole): counted from the host, every process
// below the server stays under procs, plus the holder's outer bubblewrap
// (user servers) and one bubblewrap per call that entered the session's
// user namespace only to be refused its sandbox.
func TestSessionProcessBound(t *testing.T) {
	const (
		procs    = 20
		maxCalls = 4
		calls    = 12
		// Each call tries to start 60 sleepers; only procs fit in the
		// session (the rest, and what the call does after, fail to fork).
		script = `for i in $(seq 60); do sleep 8 & done 2>/dev/null; sleep 5; echo spawned`
	)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := filepath.Join(e.root, "limits.toml")
		writeFile(t, cfg, "[limits]\nprocs = "+strconv.Itoa(procs)+"\n")
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg,
			"--max-concurrent-calls", strconv.Itoa(maxCalls))
		m := srv.mustConnect(t, clientOpts{})
		m.shellOut(t, "true") // the session's first call (roots, spawner) done
		pid := srv.cmd.Process.Pid

		var peak atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			deadline := time.Now().Add(90 * time.Second)
			for time.Now().Before(deadline) {
				if n := int64(len(descendants(pid))); n > peak.Load() {
					peak.Store(n)
				}
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex // guards the counts and lists below
		var ran, refused, failedFast int
		var slowRefusal time.Duration
		var other []string
		for i := 0; i < calls; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := mcp.CallToolRequest{}
				req.Params.Name = "shell"
				req.Params.Arguments = map[string]any{"command": script, "timeout_ms": 30000}
				began := time.Now()
				res, err := m.c.CallTool(ctx, req)
				took := time.Since(began)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					other = append(other, err.Error())
				case res.IsError && strings.Contains(text(res), "max_concurrent_calls"):
					refused++
					slowRefusal = max(slowRefusal, took)
				default:
					// Admitted: it ran, whatever its forks met (the sleepers
					// beyond procs fail, and the session's bound may refuse
					// even a sandbox's init).
					ran++
					if took < 5*time.Second {
						// Its sandbox never started (the session was
						// full): it held its place for milliseconds.
						failedFast++
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		<-sampled
		bound := int64(procs + 1 + maxCalls)
		t.Logf("%s: %d calls ran (%d failed at once), %d refused (slowest refusal %s); peak %d processes under the server (bound %d = procs %d + holder + %d refused bwraps)",
			id.name, ran, failedFast, refused, slowRefusal.Round(time.Millisecond), peak.Load(), bound, procs, maxCalls)
		if len(other) > 0 {
			t.Errorf("unexpected results: %q", other)
		}
		// Calls whose sandbox could not start (the session full of the
		// first calls' sleepers) free their place at once, so all twelve
		// may be admitted one after another; then the calls that really
		// ran are still at most maxCalls.
		capHeld := refused >= 1 || ran-failedFast <= maxCalls
		if ran+refused != calls || !capHeld {
			t.Errorf("%d calls ran and %d were refused of %d; at most %d may run at once", ran, refused, calls, maxCalls)
		}
		if refused > 0 && slowRefusal > 5*time.Second {
			t.Errorf("a refusal took %s: the cap must answer at once, not queue", slowRefusal)
		}
		if peak.Load() > bound {
			t.Errorf("one session held %d processes at once; bound %d", peak.Load(), bound)
		}
		// Once the calls are done the session works again.
		if out := m.shellOut(t, "echo again"); !strings.Contains(out, "again") {
			t.Errorf("after the burst: %q", out)
		}
	})
}

// forkBurst is a shell command forking up to n children that stay alive
// until the file "release" appears in the worktree (40 s at most), then
// writing "forked-ID" there with what it got: "OK EAGAIN OTHER" (forks that
// worked, failed with EAGAIN, failed otherwise). Perl: one process, no
// threads, fork's errno at hand.
func forkBurst(id, n int) string {
	return fmt.Sprintf(`exec /usr/bin/perl -e '
my ($id, $n) = @ARGV; my ($ok, $ea, $o) = (0, 0, 0);
for (1..$n) {
	my $p = fork;
	if (!defined $p) { if ($!{EAGAIN}) { $ea++ } else { $o++ } next }
	if ($p == 0) { for (1..400) { last if -e "release"; select(undef, undef, undef, 0.1) } exit 0 }
	$ok++;
}
open(my $f, ">", "forked-$id.tmp") or die "forked: $!"; print $f "$ok $ea $o\n"; close $f;
rename("forked-$id.tmp", "forked-$id") or die "rename: $!";
1 while wait != -1;
print "ok=$ok eagain=$ea other=$o\n";' %d %d`, id, n)
}

// pidsRoot is where the pids cgroup parents of a root server are made
// ("" without a pids controller).
func pidsRoot() string {
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			f := strings.Fields(l)
			if len(f) < 10 {
				continue
			}
			// ... mountpoint at 4; after "-": fstype, source, super options.
			i := slices.Index(f, "-")
			if i < 0 || i+3 >= len(f) {
				continue
			}
			if f[i+1] == "cgroup" && slices.Contains(strings.Split(f[i+3], ","), "pids") {
				return f[4]
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && slices.Contains(strings.Fields(string(b)), "pids") {
		return "/sys/fs/cgroup"
	}
	return ""
}

// TestSessionProcsWhole: with procs = 60, six concurrent shell calls of one
// HTTP session, each forking 40 children, hold at most 60 processes at once
// between them; the refused forks fail with EAGAIN; the calls finish. For a
// user server the session's sandboxes share one user namespace, where
// RLIMIT_NPROC counts them together; for a root server (which RLIMIT_NPROC
// does not bind) they share one pids cgroup, whose parent the server makes
// before it drops CAP_DAC_OVERRIDE: the root half starts from a state where
// that parent does not exist (a name of its own, so other servers on the
// host are left alone), as on a host whose cgroupfs root is mode 0555.
// `probe` and the startup line say what bounds processes.
func TestSessionProcsWhole(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no /usr/bin/perl")
	}
	const procs, calls, forks = 60, 6, 40
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := filepath.Join(e.root, "limits.toml")
		writeFile(t, cfg, "[limits]\nprocs = "+strconv.Itoa(procs)+"\n")
		want := "process limit: 60 per session (RLIMIT_NPROC in one user namespace)"
		if id.root {
			want = "process limit: 60 per session (pids cgroup)"
			root := pidsRoot()
			if root == "" {
				t.Fatal("no pids cgroup controller: a root server's processes are not bounded here")
			}
			if fi, err := os.Stat(root); err == nil {
				t.Logf("%s is mode %#o", root, fi.Mode().Perm())
			}
			name := fmt.Sprintf("evener-it-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
			parent := filepath.Join(root, name)
			if _, err := os.Stat(parent); err == nil {
				t.Fatalf("%s exists already", parent)
			}
			e.extra = append(e.extra, "EVENER_MCP_TEST_PIDS_PARENT="+name)
			// Registered before the server starts: runs after it stopped.
			t.Cleanup(func() {
				waitFor(15*time.Second, func() bool {
					for _, d := range entries(parent) {
						_ = syscall.Rmdir(filepath.Join(parent, d))
					}
					err := syscall.Rmdir(parent)
					return err == nil || os.IsNotExist(err)
				})
				if _, err := os.Stat(parent); err == nil {
					t.Errorf("%s left behind", parent)
				}
			})
			// The probe, from the same state, says what will bound them.
			r := e.run(t, "probe", "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
			if !strings.Contains(r.stdout, want) {
				t.Errorf("probe does not say %q:\n%s", want, r)
			}
			// Back to the state where the parent does not exist.
			if err := syscall.Rmdir(parent); os.IsNotExist(err) {
				t.Errorf("the probe made no %s", parent)
			} else if err != nil {
				t.Fatalf("rmdir %s: %v", parent, err)
			}
		} else {
			r := e.run(t, "probe", "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
			if !strings.Contains(r.stdout, want) {
				t.Errorf("probe does not say %q:\n%s", want, r)
			}
		}
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg,
			"--max-concurrent-calls", "8")
		m := srv.mustConnect(t, clientOpts{})
		m.shellOut(t, "true")
		if line := startupLine(result{stderr: srv.stderr.String()}); !strings.Contains(line, want) {
			t.Errorf("the startup line does not say %q:\n%s", want, srv.stderr.String())
		}
		pid := srv.cmd.Process.Pid
		ownPidNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))

		// Sampled: processes inside the session's sandboxes (a PID
		// namespace other than the server's), and every process below it.
		var peakIn, peakAll atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				all := descendants(pid)
				in := 0
				for _, p := range all {
					if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err == nil && ns != ownPidNS {
						in++
					}
				}
				if int64(in) > peakIn.Load() {
					peakIn.Store(int64(in))
				}
				if int64(len(all)) > peakAll.Load() {
					peakAll.Store(int64(len(all)))
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()

		type outcome struct {
			text    string
			isError bool
			err     error
		}
		res := make([]outcome, calls)
		var ended [calls]atomic.Bool
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ended[i].Store(true)
				r, err := callCtx(ctx, m, "shell", map[string]any{"command": forkBurst(i, forks), "timeout_ms": 90000})
				if err != nil {
					res[i] = outcome{err: err}
					return
				}
				res[i] = outcome{text: text(r), isError: r.IsError}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		// Until every call that started has forked (its children wait for
		// the release) or has ended: the counts are then alive at once.
		settled := func() bool {
			for i := range calls {
				if _, err := os.Stat(filepath.Join(e.work, fmt.Sprintf("forked-%d", i))); err != nil && !ended[i].Load() {
					return false
				}
			}
			return true
		}
		if !waitFor(90*time.Second, settled) {
			t.Errorf("the calls neither forked nor ended within 90 s")
		}
		alive, eagain, other, started := 0, 0, 0, 0
		for i := range calls {
			b, err := os.ReadFile(filepath.Join(e.work, fmt.Sprintf("forked-%d", i)))
			if err != nil {
				continue
			}
			var ok, ea, o int
			if _, err := fmt.Sscanf(string(b), "%d %d %d", &ok, &ea, &o); err != nil {
				t.Fatalf("forked-%d: %q", i, b)
			}
			started++
			alive += 1 + ok
			eagain += ea
			other += o
		}
		writeFile(t, filepath.Join(e.work, "release"), "")
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("the calls did not finish")
		}
		close(stop)
		<-sampled
		for i, r := range res {
			t.Logf("call %d: error=%v %v %q", i, r.isError, r.err, strings.TrimSpace(r.text)[:min(len(strings.TrimSpace(r.text)), 200)])
			if r.err != nil {
				t.Errorf("call %d: protocol error %v", i, r.err)
			}
		}
		t.Logf("%s: %d calls forked; %d of their processes alive at once; sampled peak %d processes in the sandboxes, %d below the server (procs %d); %d forks refused with EAGAIN, %d otherwise",
			id.name, started, alive, peakIn.Load(), peakAll.Load(), procs, eagain, other)
		if started == 0 {
			t.Fatal("no call started")
		}
		if alive > procs || peakIn.Load() > procs {
			t.Errorf("one session held %d processes at once (sampled %d in its sandboxes) under procs = %d", alive, peakIn.Load(), procs)
		}
		if eagain == 0 || other != 0 {
			t.Errorf("refused forks: %d with EAGAIN, %d otherwise; want some, all EAGAIN", eagain, other)
		}
		if out := m.shellOut(t, "echo again"); !strings.Contains(out, "again") {
			t.Errorf("after the burst: %q", out)
		}
	})
}
