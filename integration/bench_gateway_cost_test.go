//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// BenchmarkGatewayAddedCost: what one forwarded call adds, with a
// downstream that answers at once (hostileSource in its serve mode, a Go
// program), over stdio and over HTTP (`serve`), measured side by side in
// one run (docs/speed.md, docs/gateway.md). A minimal client makes the
// same tools/call directly to the downstream and through evener-mcp, in
// short rounds alternated in an order that flips every round:
//
//   - stdio-added-us, http-added-us: the median over rounds of the
//     latency through evener-mcp minus the direct latency, per call;
//   - stdio-cpu-us, http-cpu-us: the server process's CPU (user and
//     system, every thread, /proc/PID/task/*/schedstat) per forwarded
//     call: all of it is added, the direct call has no server;
//   - *-ping-us, *-ping-cpu-us: the same for a ping (no tool call, no
//     downstream): the transport's floor, for comparison.
//
// Target: at most 50 us of CPU and 100 us of latency added per call, over
// each transport.
//
// With -bench-baseline DIR (an earlier build of both binaries), that
// build's calls are measured in the same rounds (before-*).
//
//	go test ./integration -run '^$' -bench GatewayAddedCost -benchtime 10x
func BenchmarkGatewayAddedCost(b *testing.B) {
	bin := hostileBin(b)
	dir := b.TempDir()
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fast": map[string]any{
		"command": bin, "args": []string{"serve"}, "network": "off"}}})
	cfgPath := filepath.Join(b.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off", "--mcp-config", cfgPath}
	direct := startLineClient(b, dir, bin, "serve")
	gw := startLineClient(b, dir, binPath, append(flags, "--workdir", dir)...)
	if resp := gw.roundTrip(b, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`); !strings.Contains(resp, "fast__x") {
		b.Fatalf("tools/list over stdio: %s", resp)
	}
	hs := startServeBench(b, dir, flags...)
	hc := newHTTPLine(b, hs.url)
	if resp := hc.post(b, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`); !strings.Contains(resp, "fast__x") {
		b.Fatalf("tools/list over HTTP: %s", resp)
	}
	call := func(tool string) func(i int) string {
		return func(i int) string {
			return `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
		}
	}
	ping := func(i int) string { return `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"ping"}` }
	type side struct {
		name string
		pid  int // the server's, 0 for none
		run  func(i int) string
		want string
		lat  []float64 // us per call, per round
		cpu  []float64
	}
	stdio := func(lc *lineClient) func(string) string {
		return func(l string) string { return lc.roundTrip(b, l) }
	}
	sides := []*side{
		{name: "direct", run: func(i int) string { return direct.roundTrip(b, call("x")(i)) }, want: `"text":"ok"`},
		{name: "stdio", pid: gw.cmd.Process.Pid, run: func(i int) string { return stdio(gw)(call("fast__x")(i)) }, want: `"text":"ok"`},
		{name: "http", pid: hs.cmd.Process.Pid, run: func(i int) string { return hc.post(b, call("fast__x")(i)) }, want: `"text":"ok"`},
		{name: "stdio-ping", pid: gw.cmd.Process.Pid, run: func(i int) string { return stdio(gw)(ping(i)) }, want: `"result":{}`},
		{name: "http-ping", pid: hs.cmd.Process.Pid, run: func(i int) string { return hc.post(b, ping(i)) }, want: `"result":{}`},
	}
	if *benchBaseline != "" {
		// An earlier build, side by side: its stdio and HTTP calls.
		before := filepath.Join(*benchBaseline, "evener-mcp")
		bgw := startLineClient(b, dir, before, append(flags, "--workdir", dir)...)
		if resp := bgw.roundTrip(b, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`); !strings.Contains(resp, "fast__x") {
			b.Fatalf("tools/list over stdio, the earlier build: %s", resp)
		}
		bhs := startServeBenchWith(b, before, dir, flags...)
		bhc := newHTTPLine(b, bhs.url)
		if resp := bhc.post(b, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`); !strings.Contains(resp, "fast__x") {
			b.Fatalf("tools/list over HTTP, the earlier build: %s", resp)
		}
		sides = append(sides,
			&side{name: "before-stdio", pid: bgw.cmd.Process.Pid, run: func(i int) string { return stdio(bgw)(call("fast__x")(i)) }, want: `"text":"ok"`},
			&side{name: "before-http", pid: bhs.cmd.Process.Pid, run: func(i int) string { return bhc.post(b, call("fast__x")(i)) }, want: `"text":"ok"`})
	}
	const per = 200
	round := func(sd *side) {
		var c0 time.Duration
		if sd.pid != 0 {
			c0 = procCPU(b, sd.pid)
		}
		t0 := time.Now()
		for i := 1; i <= per; i++ {
			if resp := sd.run(i); !strings.Contains(resp, sd.want) || strings.Contains(resp, `"isError":true`) {
				b.Fatalf("%s: %s", sd.name, resp)
			}
		}
		sd.lat = append(sd.lat, float64(time.Since(t0).Microseconds())/per)
		if sd.pid != 0 {
			sd.cpu = append(sd.cpu, float64((procCPU(b, sd.pid)-c0).Microseconds())/per)
		}
	}
	for _, sd := range sides {
		round(sd) // warm: each side's first allocations and stacks
		sd.lat, sd.cpu = nil, nil
	}
	rounds := 10 * b.N
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for i := range sides {
			sd := sides[i]
			if r%2 == 1 {
				sd = sides[len(sides)-1-i]
			}
			round(sd)
		}
	}
	b.StopTimer()
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	added := func(sd *side) float64 {
		d := make([]float64, len(sd.lat))
		for i := range d {
			d[i] = sd.lat[i] - sides[0].lat[i]
		}
		return med(d)
	}
	b.ReportMetric(med(sides[0].lat), "direct-us")
	for _, sd := range sides[1:] {
		b.ReportMetric(med(sd.lat), sd.name+"-us")
		b.ReportMetric(med(sd.cpu), sd.name+"-cpu-us")
	}
	b.ReportMetric(added(sides[1]), "stdio-added-us")
	b.ReportMetric(added(sides[2]), "http-added-us")
	if len(sides) > 5 {
		b.ReportMetric(added(sides[5]), "before-stdio-added-us")
		b.ReportMetric(added(sides[6]), "before-http-added-us")
	}
}

// procCPU is the CPU time (user and system) of every thread of pid, from
// the scheduler's nanosecond counters.
func procCPU(b *testing.B, pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // gone meanwhile
		}
		f := strings.Fields(string(data))
		if len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// benchServe is `evener-mcp serve` started for a benchmark.
type benchServe struct {
	cmd *exec.Cmd
	url string
}

func startServeBench(b *testing.B, dir string, flags ...string) *benchServe {
	b.Helper()
	return startServeBenchWith(b, binPath, dir, flags...)
}

// startServeBenchWith is startServeBench with the build at bin.
func startServeBenchWith(b *testing.B, bin, dir string, flags ...string) *benchServe {
	b.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, flags...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + os.Getenv("HOME"), "PATH=" + os.Getenv("PATH")}
	pr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// SIGTERM first: the server's own way out.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		_ = cmd.Wait()
		t.Stop()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		return &benchServe{cmd: cmd, url: "http://" + addr + "/mcp"}
	case <-time.After(30 * time.Second):
		b.Fatal("serve did not listen within 30 s")
	}
	return nil
}

// httpLine is a minimal MCP client over HTTP: one session, each message a
// POST on a kept-alive connection, its answer read whole (JSON or a
// stream of events).
type httpLine struct {
	c   *http.Client
	url string
	sid string
}

func newHTTPLine(b *testing.B, url string) *httpLine {
	h := &httpLine{c: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 60 * time.Second}, url: url}
	resp := h.do(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	h.sid = resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if h.sid == "" {
		b.Fatal("no session id")
	}
	resp = h.do(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return h
}

func (h *httpLine) do(b *testing.B, body string) *http.Response {
	req, err := http.NewRequest("POST", h.url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.sid != "" {
		req.Header.Set("Mcp-Session-Id", h.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := h.c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

func (h *httpLine) post(b *testing.B, body string) string {
	resp := h.do(b, body)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}
