//go:build linux

package integration

// Running serve where teams run servers: Prometheus metrics on their own
// listener, readiness on /healthz, and the drain on SIGTERM.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

var metricsLine = regexp.MustCompile(`serving metrics at http://([0-9.:\[\]]+)/metrics`)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseMetrics reads the text exposition format: every sample line, its
// labels unescaped. A line it cannot read fails the test.
func parseMetrics(t *testing.T, body string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				t.Fatalf("unreadable metrics line %q", line)
			}
			s.name = line[:i]
			for _, m := range labelPair.FindAllStringSubmatch(line[i+1:j], -1) {
				v, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					t.Fatalf("label %s in %q: %v", m[1], line, err)
				}
				s.labels[m[1]] = v
			}
			rest = line[j+1:]
		} else {
			f := strings.Fields(line)
			s.name, rest = f[0], strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			t.Fatalf("no value in metrics line %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("value in %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// value is the sample called name with exactly the labels given (-1 when
// absent).
func value(ss []sample, name string, labels map[string]string) float64 {
	for _, s := range ss {
		if s.name != name || len(s.labels) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if s.labels[k] != v {
				match = false
			}
		}
		if match {
			return s.value
		}
	}
	return -1
}

func scrapeMetrics(t *testing.T, addr string) (string, []sample) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", resp.Status, b)
	}
	return string(b), parseMetrics(t, string(b))
}

// TestMetrics: serve --metrics-listen serves /metrics on its own listener
// (not on the MCP one); a shell call, a denied read of a denylisted path
// and a proxy refusal move their counters, a session's close is counted
// by reason, the sandbox start latency is observed; and no label value
// holds a path, a host or a session id.
func TestMetrics(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "PRIVATE KEY\n")
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "on", "--metrics-listen", "127.0.0.1:0")
		m := metricsLine.FindStringSubmatch(srv.stderr.String())
		if m == nil {
			t.Fatalf("no metrics address on stderr:\n%s", srv.stderr.String())
		}
		maddr := m[1]

		// Not on the MCP listener.
		if resp, err := http.Get("http://" + srv.addr + "/metrics"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("/metrics is served on the MCP listener too")
			}
		}
		_, before := scrapeMetrics(t, maddr)
		if v := value(before, "evener_mcp_tool_calls_total", map[string]string{"tool": "shell", "outcome": "ok"}); v != 0 {
			t.Errorf("shell ok calls before any call: %v, want 0 (present at zero)", v)
		}

		a := srv.mustConnect(t, clientOpts{})
		sid := a.c.GetSessionId()
		if sid == "" {
			t.Fatal("no session id")
		}
		if out := a.shellOut(t, "echo hello"); !strings.Contains(out, "hello") {
			t.Fatalf("shell: %q", out)
		}
		out := a.shellOut(t, "curl -s -o /dev/null -m 10 -w 'HTTP %{http_code}\\n' http://other.test:80/; echo done")
		if !strings.Contains(out, "HTTP 403") {
			t.Errorf("want a proxy refusal (403): %q", out)
		}
		r := a.call(t, "read_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")})
		if !r.IsError || strings.Contains(text(r), "PRIVATE KEY") {
			t.Fatalf("read of the planted key not denied: %s", text(r))
		}
		b := srv.mustConnect(t, clientOpts{})
		b.shellOut(t, "true")
		b.c.Close() // DELETE
		if !waitFor(10*time.Second, func() bool {
			_, ss := scrapeMetrics(t, maddr)
			return value(ss, "evener_mcp_sessions_closed_total", map[string]string{"reason": "delete"}) == 1
		}) {
			t.Errorf("the deleted session was not counted as closed (delete)")
		}

		body, ss := scrapeMetrics(t, maddr)
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"evener_mcp_tool_calls_total", map[string]string{"tool": "shell", "outcome": "ok"}, 3},
			{"evener_mcp_tool_calls_total", map[string]string{"tool": "read_file", "outcome": "denied"}, 1},
			{"evener_mcp_denials_total", map[string]string{"rule": "denylist"}, 1},
			{"evener_mcp_egress_refusals_total", map[string]string{"proxy": "http"}, 1},
			{"evener_mcp_sessions_opened_total", nil, 2},
			{"evener_mcp_sessions_live", nil, 1},
			{"evener_mcp_sessions_closed_total", map[string]string{"reason": "delete"}, 1},
			{"evener_mcp_sandbox_start_seconds_count", nil, 3},
		} {
			if got := value(ss, c.name, c.labels); got < c.want {
				t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.want)
			}
		}
		if got := value(ss, "evener_mcp_sandbox_start_seconds_sum", nil); got <= 0 || got > 60 {
			t.Errorf("sandbox start latency sum %v s", got)
		}

		// The label check: no value carries a path, a host or a session id.
		labels := 0
		for _, s := range ss {
			for k, v := range s.labels {
				labels++
				for _, bad := range []string{"/", e.root, e.work, e.home, sid, "other.test", "id_rsa", ".ssh"} {
					if strings.Contains(v, bad) {
						t.Errorf("label %s=%q of %s holds %q", k, v, s.name, bad)
					}
				}
			}
		}
		if labels < 20 {
			t.Errorf("only %d label values parsed; the parse is wrong:\n%s", labels, body)
		}
		if strings.Contains(body, sid) || strings.Contains(body, e.work) || strings.Contains(body, "other.test") {
			t.Errorf("the scrape holds the session id, the worktree or a refused host")
		}
	})
}

// TestMetricsListenRefusedOffLoopback: an unauthenticated metrics listener
// beyond loopback needs --metrics-allow-remote.
func TestMetricsListenRefusedOffLoopback(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		r := e.run(t, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0")
		if r.code == 0 || !strings.Contains(r.stderr, "--metrics-allow-remote") {
			t.Errorf("want a refusal naming --metrics-allow-remote:\n%s", r)
		}
	})
}

// TestDrain: after SIGTERM a call in flight (a two-second sleep) finishes
// and its result reaches the client; meanwhile /healthz and a new
// initialize answer 503 and an existing session's new call is refused; the
// server then exits 0 with nothing left behind.
func TestDrain(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--drain-timeout", "20s")
		health := "http://" + srv.addr + "/healthz"
		if resp, err := http.Get(health); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz before the drain: %v %v", resp, err)
		}
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})
		// Unique to this run: a process left by another run must not be
		// taken for this call.
		marker := fmt.Sprintf("sleep 2.%d%03d", len(id.name), time.Now().UnixNano()%1000)
		type answer struct {
			r   *mcp.CallToolResult
			err error
		}
		got := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "shell"
			req.Params.Arguments = map[string]any{"command": marker + "; echo survived-the-drain"}
			r, err := a.c.CallTool(ctx, req)
			got <- answer{r, err}
		}()
		if !waitFor(15*time.Second, func() bool { return len(procsWith(marker)) > 0 }) {
			t.Fatalf("%q never started", marker)
		}
		pid := srv.cmd.Process.Pid
		sent := time.Now()
		if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if !waitFor(5*time.Second, func() bool {
			resp, err := http.Get(health)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusServiceUnavailable
		}) {
			t.Fatalf("/healthz did not turn 503 within 5 s of SIGTERM:\n%s", srv.stderr.String())
		}
		// Still inside the sleep: a new session and a new call are refused.
		resp := srv.raw(t, "POST", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`, nil)
		lb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(lb), "draining") {
			t.Errorf("initialize during the drain: %s %s, want 503", resp.Status, lb)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := mcp.CallToolRequest{}
		req.Params.Name = "shell"
		req.Params.Arguments = map[string]any{"command": "echo late-call"}
		if r, err := b.c.CallTool(ctx, req); err == nil && !r.IsError {
			t.Errorf("a new call during the drain ran: %s", text(r))
		}
		cancel()
		if d := time.Since(sent); d > 2*time.Second {
			t.Logf("the refusals were checked %s after SIGTERM, after the sleep may have ended", d)
		}

		select {
		case ans := <-got:
			if ans.err != nil {
				t.Fatalf("the call in flight failed: %v\n%s", ans.err, srv.stderr.String())
			}
			if ans.r.IsError || !strings.Contains(text(ans.r), "survived-the-drain") {
				t.Errorf("the call in flight: %s", text(ans.r))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to the call in flight:\n%s", srv.stderr.String())
		}
		select {
		case <-srv.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("serve did not exit after the drain:\n%s", srv.stderr.String())
		}
		if took := time.Since(sent); took > 12*time.Second {
			t.Errorf("the drain took %s though the call in flight ended after about 2 s", took)
		}
		if c := srv.cmd.ProcessState.ExitCode(); c != 0 {
			t.Errorf("serve exited %d:\n%s", c, srv.stderr.String())
		}
		if left := descendants(pid); len(left) > 0 {
			t.Errorf("processes left under the server: %v", left)
		}
		if left := procsWith(marker); len(left) > 0 {
			t.Errorf("the call's sandbox outlived the server: %v", left)
		}
		if left := entries(filepath.Join(e.root, "tmp")); len(left) > 0 {
			t.Errorf("left in the server's TMPDIR: %v", left)
		}
	})
}
