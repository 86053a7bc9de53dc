//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// procStatusKiB reads one "Key:   N kB" line of /proc/PID/status.
func procStatusKiB(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// countingClient is an MCP session over HTTP that counts the progress it
// receives and keeps none of it (the test measures the server's memory,
// not its own).
func countingClient(t *testing.T, url string, progress *atomic.Int64, bytes *atomic.Int64) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progress.Add(1)
			if msg, ok := n.Params.AdditionalFields["message"].(string); ok {
				bytes.Add(int64(len(msg)))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "membudget", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestHTTPMemoryBudget: 32 concurrent shell calls of one session (the cap
// raised to 32 for the test), each streaming output as progress
// notifications for 20 s, must not grow the server by more than a stated
// bound. The event store holds at most 16 MiB a session
// (server/eventstore.go); each call keeps at most 1 MiB of head and tail,
// and its result costs several copies of that while it is encoded, all 32
// at once here; the rest is the garbage collector's headroom. Before the
// byte budget the store kept every event of these calls (its bound was 256
// events per stream, 16 MiB of this output each): about 800 MiB to 1 GiB
// here, growing with the calls' duration; with it about 300-400 MiB,
// flat.
func TestHTTPMemoryBudget(t *testing.T) {
	const (
		calls = 32
		// Each call prints 64 KiB every 100 ms for 20 s: about as fast as
		// progress is sent (ten notifications a second, up to 64 KiB each).
		// One process a call: a shell loop started three programs every
		// 100 ms in each call, about 1,000 a second for the 32 calls, and
		// on a machine where a fork and exec takes 4 ms the calls fell far
		// behind their 20 s and timed out (the test measures the server's
		// memory, not the host's process start).
		script = `exec python3 -c 'import sys, time
b = b"a" * 65536
for i in range(200):
    sys.stdout.buffer.write(b); sys.stdout.flush(); time.sleep(0.1)
print("done")'`
		// The bound asserted on the server's peak RSS growth.
		boundMiB = 500
	)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--max-concurrent-calls", strconv.Itoa(calls))
		var progress, got atomic.Int64
		c := countingClient(t, srv.url, &progress, &got)
		// Warm up: one call, so the baseline includes a session that has
		// run a sandbox.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		warm := mcp.CallToolRequest{}
		warm.Params.Name = "shell"
		warm.Params.Arguments = map[string]any{"command": "echo warm"}
		if _, err := c.CallTool(ctx, warm); err != nil {
			t.Fatal(err)
		}
		pid := srv.cmd.Process.Pid
		base, err := procStatusKiB(pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Int64
		var firstErr sync.Once
		for i := 0; i < calls; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := mcp.CallToolRequest{}
				req.Params.Name = "shell"
				req.Params.Arguments = map[string]any{"command": script}
				req.Params.Meta = &mcp.Meta{ProgressToken: fmt.Sprintf("chatty-%d", i)}
				res, err := c.CallTool(ctx, req)
				if err != nil || res.IsError {
					failed.Add(1)
					firstErr.Do(func() {
						if err != nil {
							t.Errorf("call %d: %v", i, err)
						} else {
							t.Errorf("call %d: %s", i, text(res))
						}
					})
				}
			}()
		}
		wg.Wait()
		peak, err := procStatusKiB(pid, "VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		after, _ := procStatusKiB(pid, "VmRSS")
		growth := (peak - base) / 1024
		t.Logf("%s: %d calls in %s, %d progress notifications (%d MiB of output) received; server RSS %d MiB before, peak %d MiB (growth %d MiB), %d MiB after",
			id.name, calls, time.Since(start).Round(time.Millisecond), progress.Load(), got.Load()>>20, base/1024, peak/1024, growth, after/1024)
		if failed.Load() > 0 {
			t.Errorf("%d of %d calls failed", failed.Load(), calls)
		}
		if growth > boundMiB {
			t.Errorf("the server grew by %d MiB at peak under %d chatty calls of one session; bound %d MiB", growth, calls, boundMiB)
		}
	})
}
