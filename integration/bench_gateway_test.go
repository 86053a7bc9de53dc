//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// legacyBenchClient is benchClient speaking the session-keeping revision
// (2025-11-25) to both sides: the downstream servers speak nothing newer,
// so both sides of the comparison speak the same protocol.
func legacyBenchClient(b *testing.B, dir string, command string, args ...string) *client.Client {
	b.Helper()
	return benchClientAt(b, "2025-11-25", dir, command, args...)
}

// BenchmarkGatewayVsDirect: a downstream tool call (the filesystem
// server's read_text_file) through evener-mcp's gateway against the same
// call made directly to the same server, with the same client, alternated
// in one run. The sandbox's start is paid once per session: start-ms is
// the time from spawning each side to its first answered call. A third
// side runs the server directly under the same sandbox (evener-mcp exec),
// so ratio-boxed is the gateway's own hop; a fourth runs it behind a bare
// relay (internal/benchrelay), so ratio-relay is what any process between
// client and server costs here. Ratios are medians of short side-by-side
// rounds (see the loop).
//
//	go test ./integration -run '^$' -bench GatewayVsDirect -benchtime 3x
func BenchmarkGatewayVsDirect(b *testing.B) {
	const per0 = 200
	dir, file, script, cfgPath := gatewayBenchFixture(b)
	args := map[string]any{"path": file}
	first := func(call func() error) time.Duration {
		start := time.Now()
		deadline := start.Add(30 * time.Second)
		for call() != nil {
			if time.Now().After(deadline) {
				b.Fatal("no answer within 30 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}
	one := func(c interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}, tool string) func() error {
		return func() error {
			req := mcp.CallToolRequest{}
			req.Params.Name = tool
			req.Params.Arguments = args
			res, err := c.CallTool(context.Background(), req)
			if err == nil && res.IsError {
				err = os.ErrInvalid
			}
			return err
		}
	}
	t0 := time.Now()
	ours := legacyBenchClient(b, dir, binPath, "--sandbox", "workspace-write", "--sandbox-net", "off", "--workdir", dir, "--mcp-config", cfgPath)
	oStart := time.Since(t0) + first(one(ours, "files__read_text_file"))
	t0 = time.Now()
	direct := legacyBenchClient(b, dir, "node", script, dir)
	dStart := time.Since(t0) + first(one(direct, "read_text_file"))
	// The same server under the same sandbox without the gateway
	// (evener-mcp exec): what the sandbox costs each of the server's
	// syscalls, apart from the gateway's hop.
	boxed := legacyBenchClient(b, dir, binPath, "exec", "--sandbox", "workspace-write", "--sandbox-net", "off", "--workdir", dir, "--", "node", script, dir)
	first(one(boxed, "read_text_file"))
	// The same comparison with the minimal line client (one JSON line out,
	// one back): the servers' share without the MCP library's client.
	lOurs := startLineClient(b, dir, binPath, "--sandbox", "workspace-write", "--sandbox-net", "off", "--workdir", dir, "--mcp-config", cfgPath)
	lOurs.roundTrip(b, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	lDirect := startLineClient(b, dir, "node", script, dir)
	// The same server behind a bare relay (internal/benchrelay): the floor
	// of anything between a client and a stdio server.
	relay := benchRelay(b)
	relayed := legacyBenchClient(b, dir, relay, "node", script, dir)
	lRelay := startLineClient(b, dir, relay, "node", script, dir)
	lArgs := fmt.Sprintf(`{"path":%q}`, file)
	for _, warm := range []func(){
		func() { callN(b, ours, per0, "files__read_text_file", args) },
		func() { callN(b, direct, per0, "read_text_file", args) },
		func() { callN(b, boxed, per0, "read_text_file", args) },
		func() { lOurs.readN(b, per0, "files__read_text_file", lArgs) },
		func() { lDirect.readN(b, per0, "read_text_file", lArgs) },
		func() { callN(b, relayed, per0, "read_text_file", args) },
		func() { lRelay.readN(b, per0, "read_text_file", lArgs) },
	} {
		warm() // the JIT of each node server, and each side's first allocations
	}
	// Short rounds, each side once per round in an order that flips every
	// round, and the median of the per-round ratios: this machine's noise
	// (other work on two CPUs) moves a long block by more than the
	// difference measured, a median of many short side-by-side rounds
	// much less. Totals are reported too.
	const per = 50
	rounds := 20 * b.N
	type side struct {
		name string
		run  func() time.Duration
		tot  time.Duration
		last time.Duration
	}
	sides := []*side{
		{name: "direct", run: func() time.Duration { return callN(b, direct, per, "read_text_file", args) }},
		{name: "gateway", run: func() time.Duration { return callN(b, ours, per, "files__read_text_file", args) }},
		{name: "boxed-direct", run: func() time.Duration { return callN(b, boxed, per, "read_text_file", args) }},
		{name: "line-direct", run: func() time.Duration { return lDirect.readN(b, per, "read_text_file", lArgs) }},
		{name: "line-gateway", run: func() time.Duration { return lOurs.readN(b, per, "files__read_text_file", lArgs) }},
		{name: "relay", run: func() time.Duration { return callN(b, relayed, per, "read_text_file", args) }},
		{name: "line-relay", run: func() time.Duration { return lRelay.readN(b, per, "read_text_file", lArgs) }},
	}
	var ratio, boxedRatio, lineRatio, relayRatio, lineRelayRatio []float64
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for i := range sides {
			sd := sides[i]
			if r%2 == 1 {
				sd = sides[len(sides)-1-i]
			}
			sd.last = sd.run()
			sd.tot += sd.last
		}
		ratio = append(ratio, sides[1].last.Seconds()/sides[0].last.Seconds())
		boxedRatio = append(boxedRatio, sides[1].last.Seconds()/sides[2].last.Seconds())
		lineRatio = append(lineRatio, sides[4].last.Seconds()/sides[3].last.Seconds())
		relayRatio = append(relayRatio, sides[5].last.Seconds()/sides[0].last.Seconds())
		lineRelayRatio = append(lineRelayRatio, sides[6].last.Seconds()/sides[3].last.Seconds())
	}
	for _, sd := range sides {
		b.ReportMetric(float64(sd.tot.Microseconds())/float64(per*rounds), sd.name+"-us/call")
	}
	b.ReportMetric(medianRatio(ratio), "ratio")
	b.ReportMetric(sides[1].tot.Seconds()/sides[0].tot.Seconds(), "ratio-total")
	b.ReportMetric(medianRatio(boxedRatio), "ratio-boxed")
	b.ReportMetric(medianRatio(lineRatio), "ratio-line")
	b.ReportMetric(sides[4].tot.Seconds()/sides[3].tot.Seconds(), "ratio-line-total")
	b.ReportMetric(medianRatio(relayRatio), "ratio-relay")
	b.ReportMetric(medianRatio(lineRelayRatio), "ratio-line-relay")
	b.ReportMetric(float64(oStart.Milliseconds()), "gateway-start-ms")
	b.ReportMetric(float64(dStart.Milliseconds()), "direct-start-ms")
}

// medianRatio is the middle of xs (which it sorts).
func medianRatio(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

// BenchmarkGatewayVsDirectTS is BenchmarkGatewayVsDirect with the client
// agent hosts embed, the official TypeScript SDK v1 client
// (integration/tsclient/bench.mjs): the filesystem server's read_text_file
// called directly and through evener-mcp, short rounds side by side,
// ratio the median of the rounds' ratios.
//
//	go test ./integration -run '^$' -bench GatewayVsDirectTS -benchtime 1x
func BenchmarkGatewayVsDirectTS(b *testing.B) {
	dir, file, script, cfgPath := gatewayBenchFixture(b)
	env := map[string]string{"HOME": os.Getenv("HOME"), "PATH": os.Getenv("PATH")}
	plan, _ := json.Marshal(map[string]any{
		"sides": []map[string]any{
			{"name": "direct", "command": "node", "args": []string{script, dir}, "env": env, "cwd": dir, "tool": "read_text_file"},
			{"name": "gateway", "command": binPath, "args": []string{"--sandbox", "workspace-write", "--sandbox-net", "off", "--workdir", dir, "--mcp-config", cfgPath, "--log-level", "error"},
				"env": env, "cwd": dir, "tool": "files__read_text_file"},
			{"name": "relay", "command": benchRelay(b), "args": []string{"node", script, dir}, "env": env, "cwd": dir, "tool": "read_text_file"},
		},
		"arguments": map[string]any{"path": file},
		"rounds":    40 * b.N, "per": 50, "warm": 200,
	})
	planPath := filepath.Join(b.TempDir(), "plan.json")
	if err := os.WriteFile(planPath, plan, 0o644); err != nil {
		b.Fatal(err)
	}
	client := filepath.Join(tsClient(b), "bench.mjs")
	b.ResetTimer()
	out, err := exec.Command("node", client, planPath).Output()
	if err != nil {
		b.Fatalf("bench.mjs: %v\n%s", err, out)
	}
	var m map[string]float64
	if err := json.Unmarshal(out, &m); err != nil {
		b.Fatalf("bench.mjs wrote %q: %v", out, err)
	}
	for _, k := range []string{"direct-us/call", "gateway-us/call", "relay-us/call", "gateway-ratio", "gateway-ratio-total", "relay-ratio"} {
		b.ReportMetric(m[k], strings.Replace(k, "gateway-ratio", "ratio", 1))
	}
}

var relayOnce struct {
	sync.Once
	path string
	err  error
}

// benchRelay builds internal/benchrelay (once per run) and returns it.
func benchRelay(b *testing.B) string {
	b.Helper()
	relayOnce.Do(func() {
		relayOnce.path = filepath.Join(baseDir, "benchrelay")
		cmd := exec.Command("go", "build", "-o", relayOnce.path, "../internal/benchrelay")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			relayOnce.err = fmt.Errorf("build benchrelay: %v\n%s", err, out)
		}
	})
	if relayOnce.err != nil {
		b.Fatal(relayOnce.err)
	}
	return relayOnce.path
}

// gatewayBenchFixture is the gateway benchmarks' worktree, its small file,
// the filesystem server's script and a --mcp-config file naming it.
func gatewayBenchFixture(b *testing.B) (dir, file, script, cfgPath string) {
	b.Helper()
	dir = b.TempDir()
	file = filepath.Join(dir, "small.txt")
	if err := os.WriteFile(file, []byte("hello, world\nsecond line\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	script = serverScript(b, "server-filesystem")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"files": map[string]any{
		"command": "node", "args": []string{script, dir}, "network": "off",
		"grants": []string{filepath.Join(downstream(b), "node_modules")}}}})
	cfgPath = filepath.Join(b.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir, file, script, cfgPath
}
