//go:build linux

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

const (
	loadSessions = 100
	loadCalls    = 20 // shell calls, and as many file calls, per session
)

// rssKiB is a process's resident set size.
func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// TestHTTPLoad: 100 concurrent sessions, each making 20 shell and 20 file
// calls, complete without an error and leave no process, socket or scratch
// directory behind; then 100 idle sessions are opened to measure the
// server's memory per idle session. Throughput and memory are logged (and
// reported in the README), not asserted: this machine is shared and noisy.
// Bounded: the whole run must finish within 10 minutes.
func TestHTTPLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test skipped in -short mode")
	}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--max-sessions", "400")
		pid := srv.cmd.Process.Pid
		tmp := filepath.Join(e.root, "tmp")
		// Warm up one session so lazily created state is not counted as
		// a leak, then take the baseline.
		warm := srv.mustConnect(t, clientOpts{})
		warm.shellOut(t, "true")
		warm.c.Close()
		if !waitFor(10*time.Second, func() bool { return len(descendants(pid)) == 0 }) {
			t.Fatalf("processes under the server after warm-up: %v", descendants(pid))
		}
		closeIdleClientConns()
		time.Sleep(200 * time.Millisecond)
		baseSockets, baseFiles := fdCounts(pid)
		baseTmp := entries(tmp)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var errs atomic.Int64
		var firstErr sync.Once
		fail := func(format string, args ...any) {
			errs.Add(1)
			firstErr.Do(func() { t.Errorf(format, args...) })
		}
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < loadSessions; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				m, err := srv.connect(t, clientOpts{})
				if err != nil {
					fail("session %d: connect: %v", i, err)
					return
				}
				defer m.c.Close()
				for j := 0; j < loadCalls && ctx.Err() == nil; j++ {
					want := fmt.Sprintf("s%d-c%d", i, j)
					r, err := callCtx(ctx, m, "shell", map[string]any{"command": "echo " + want})
					if err != nil || r.IsError || !strings.Contains(text(r), want) {
						fail("session %d shell %d: %v %v", i, j, err, r)
						return
					}
					path := fmt.Sprintf("load/%d/%d.txt", i, j)
					var fr *mcp.CallToolResult
					if j%2 == 0 {
						fr, err = callCtx(ctx, m, "write_file", map[string]any{"path": path, "content": want})
					} else {
						fr, err = callCtx(ctx, m, "read_file", map[string]any{"path": fmt.Sprintf("load/%d/%d.txt", i, j-1)})
					}
					if err != nil || fr.IsError {
						fail("session %d file %d: %v %v", i, j, err, fr)
						return
					}
				}
			}(i)
		}
		wg.Wait()
		elapsed := time.Since(start)
		if ctx.Err() != nil {
			t.Fatalf("load did not finish within the bound")
		}
		if errs.Load() > 0 {
			t.Fatalf("%d sessions failed", errs.Load())
		}
		calls := loadSessions * loadCalls * 2
		t.Logf("%s: %d sessions x (%d shell + %d file) calls in %s: %.0f calls/s (%.0f shell/s), sessions included",
			id.name, loadSessions, loadCalls, loadCalls, elapsed.Round(time.Millisecond), float64(calls)/elapsed.Seconds(), float64(calls/2)/elapsed.Seconds())

		// No leak: processes, sockets, descriptors, scratch.
		if !waitFor(15*time.Second, func() bool { return len(descendants(pid)) == 0 }) {
			t.Errorf("processes left under the server: %v", descendants(pid))
		}
		closeIdleClientConns()
		var sockets, files int
		if !waitFor(15*time.Second, func() bool {
			sockets, files = fdCounts(pid)
			return sockets <= baseSockets && files <= baseFiles
		}) {
			t.Errorf("descriptors after the load: %d sockets, %d other (baseline %d, %d)", sockets, files, baseSockets, baseFiles)
		}
		if !waitFor(15*time.Second, func() bool { return len(entries(tmp)) == len(baseTmp) }) {
			t.Errorf("the server's TMPDIR after the load: %v (baseline %v)", entries(tmp), baseTmp)
		}
		var parent []string
		for _, n := range entries(tmp) {
			if strings.HasPrefix(n, "evs-") {
				parent = entries(filepath.Join(tmp, n))
			}
		}
		if len(parent) > 0 {
			t.Errorf("scratch or bridge directories left: %v", parent)
		}
		// A root server's pids cgroups (one per session, one per spawn)
		// go with their sessions.
		cgroups := func() (left []string) {
			for _, n := range entries("/sys/fs/cgroup/pids/evener-mcp") {
				if strings.HasPrefix(n, strconv.Itoa(pid)+"-") {
					left = append(left, n)
				}
			}
			return left
		}
		if !waitFor(15*time.Second, func() bool { return len(cgroups()) == 0 }) {
			t.Errorf("pids cgroups left: %v", cgroups())
		}

		// Memory per idle session, on a fresh server (the load's garbage
		// would blur it): RSS after one warm-up session, then with 100
		// idle sessions open.
		srv.stop(t)
		srv = e.serve(t, "--sandbox", "workspace-write", "--max-sessions", "400")
		pid = srv.cmd.Process.Pid
		warm = srv.mustConnect(t, clientOpts{})
		warm.shellOut(t, "true")
		before := rssKiB(pid)
		var idle []*mcpConn
		for i := 0; i < loadSessions; i++ {
			m, err := srv.connect(t, clientOpts{})
			if err != nil {
				t.Fatalf("idle session %d: %v", i, err)
			}
			idle = append(idle, m)
		}
		time.Sleep(500 * time.Millisecond)
		after := rssKiB(pid)
		t.Logf("%s: server RSS %d KiB before, %d KiB with %d idle sessions: %.2f MiB per idle session (target < 3 MiB)",
			id.name, before, after, loadSessions, float64(after-before)/1024/float64(loadSessions))
		for _, m := range idle {
			m.c.Close()
		}
	})
}

// closeIdleClientConns drops the test's keep-alive connections, which the
// server would otherwise count as open sockets.
func closeIdleClientConns() {
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

func callCtx(ctx context.Context, m *mcpConn, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	return m.c.CallTool(cctx, req)
}
