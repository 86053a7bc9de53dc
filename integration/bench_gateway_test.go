//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// so ratio-boxed is the gateway's own hop.
//
//	go test ./integration -run '^$' -bench GatewayVsDirect -benchtime 3x
func BenchmarkGatewayVsDirect(b *testing.B) {
	dir := b.TempDir()
	file := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(file, []byte("hello, world\nsecond line\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	script := serverScript(b, "server-filesystem")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"files": map[string]any{
		"command": "node", "args": []string{script, dir}, "network": "off",
		"grants": []string{filepath.Join(downstream(b), "node_modules")}}}})
	cfgPath := filepath.Join(b.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
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
	lArgs := fmt.Sprintf(`{"path":%q}`, file)
	const n = 500
	var lo, ld time.Duration
	var o, d, x time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o += callN(b, ours, n, "files__read_text_file", args)
		d += callN(b, direct, n, "read_text_file", args)
		x += callN(b, boxed, n, "read_text_file", args)
		lo += lOurs.readN(b, n, "files__read_text_file", lArgs)
		ld += lDirect.readN(b, n, "read_text_file", lArgs)
	}
	b.ReportMetric(float64(lo.Microseconds())/float64(n*b.N), "line-gateway-us/call")
	b.ReportMetric(float64(ld.Microseconds())/float64(n*b.N), "line-direct-us/call")
	b.ReportMetric(lo.Seconds()/ld.Seconds(), "ratio-line")
	b.ReportMetric(float64(o.Microseconds())/float64(n*b.N), "gateway-us/call")
	b.ReportMetric(float64(x.Microseconds())/float64(n*b.N), "boxed-direct-us/call")
	b.ReportMetric(o.Seconds()/x.Seconds(), "ratio-boxed")
	b.ReportMetric(float64(d.Microseconds())/float64(n*b.N), "direct-us/call")
	b.ReportMetric(o.Seconds()/d.Seconds(), "ratio")
	b.ReportMetric(float64(oStart.Milliseconds()), "gateway-start-ms")
	b.ReportMetric(float64(dStart.Milliseconds()), "direct-start-ms")
}
