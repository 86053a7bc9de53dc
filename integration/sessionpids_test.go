//go:build linux

package integration

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestSessionProcessBound: limits.procs binds each sandbox (RLIMIT_NPROC
// counts per user namespace), and an HTTP session may run calls
// concurrently, so before the per-session cap one session of a user server
// held calls x procs processes (264 with procs = 60 in issue 13). Now a
// session runs at most max_concurrent_calls spawning calls at once; a call
// beyond that is refused at once with a clear error (never queued), so the
// session's processes stay under max_concurrent_calls x (procs + bwrap).
// Counted from the host: every process below the server.
func TestSessionProcessBound(t *testing.T) {
	const (
		procs    = 20
		maxCalls = 4
		calls    = 12
		// Each call tries to start 60 sleepers; only procs fit in one
		// sandbox (the rest, and what the call does after, fail to fork).
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
					// beyond procs fail, and on a root server the session's
					// pids cgroup may refuse even a sandbox's init).
					ran++
					if took < 5*time.Second {
						// Its sandbox never started (a root server's
						// session pids cgroup was full): it held its
						// place for milliseconds.
						failedFast++
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		<-sampled
		bound := int64(maxCalls * (procs + 2))
		t.Logf("%s: %d calls ran (%d failed at once), %d refused (slowest refusal %s); peak %d processes under the server (bound %d = %d calls x (procs %d + bwrap))",
			id.name, ran, failedFast, refused, slowRefusal.Round(time.Millisecond), peak.Load(), bound, maxCalls, procs)
		if len(other) > 0 {
			t.Errorf("unexpected results: %q", other)
		}
		// A user server's admitted calls last seconds, so exactly maxCalls
		// run; a root server's session pids cgroup (cgroup v1) may fail a
		// call's sandbox at once, freeing its place for a later call.
		// A root server's calls whose sandbox could not start (the session's
		// pids cgroup full of the first calls' sleepers) free their place at
		// once, so all twelve may be admitted one after another; then the
		// calls that really ran are still at most maxCalls.
		capHeld := refused >= 1 || (id.root && ran-failedFast <= maxCalls)
		if ran+refused != calls || !capHeld || (!id.root && ran != maxCalls) {
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
