//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkShellSessionVsBwrap (docs/speed.md, "Session sandbox"): `shell
// true` over stdio, side by side in one run, for a server that builds a
// bubblewrap per call (EVENER_MCP_SESSION_SANDBOX=0) and one with the
// session sandbox (the default), against a bare `bwrap --unshare-pid
// --unshare-net bash -c true`; then a 40-call burst of one session on each
// server, and the session sandbox's holder memory (the RSS of its
// processes: bwrap, the spawner, the idle slots). Target: session-ms at
// most bwrap-bash-ms; burst-session-ms no more than burst-ms.
//
// Each identity runs with the network off and on (the default: the relay
// to the session's proxies runs in front of every per-call command, and
// once in the session sandbox's holder).
func BenchmarkShellSessionVsBwrap(b *testing.B) {
	for _, id := range identities(b) {
		for _, netw := range []string{"off", "on"} {
			b.Run(id.name+"/net="+netw, func(b *testing.B) { benchShellSession(b, id, netw) })
		}
	}
}

func benchShellSession(b *testing.B, id runAs, netw string) {
	e := newEnv(b, id)
	e.chown(b)
	base := e.extra[:len(e.extra):len(e.extra)]
	e.extra = append(base, "EVENER_MCP_SESSION_SANDBOX=0")
	per := startLineClientAs(b, e, binPath, "--sandbox", "workspace-write", "--sandbox-net", netw)
	e.extra = append(base, "EVENER_MCP_SESSION_SANDBOX=1")
	ses := startLineClientAs(b, e, binPath, "--sandbox", "workspace-write", "--sandbox-net", netw)
	n := 0
	call := func(lc *lineClient) time.Duration {
		n++
		start := time.Now()
		resp := lc.roundTrip(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"shell","arguments":{"command":"true"}}}`, n))
		d := time.Since(start)
		if !strings.Contains(resp, `"exit_code":0`) {
			b.Fatalf("shell: %s", resp)
		}
		return d
	}
	call(per)
	call(ses) // the holder, built
	bare := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net"}
	var a, s, cb []time.Duration
	for i := 0; i < b.N; i++ {
		a = append(a, call(per))
		s = append(s, call(ses))
		cb = append(cb, timeCmd(b, e, exec.Command("bwrap", append(bare, "bash", "-c", "true")...)))
	}
	var burst, burstS []time.Duration
	for i := 0; i < max(3, b.N/20); i++ {
		for _, c := range []struct {
			lc  *lineClient
			out *[]time.Duration
		}{{per, &burst}, {ses, &burstS}} {
			start := time.Now()
			for range 40 {
				call(c.lc)
			}
			*c.out = append(*c.out, time.Since(start))
		}
	}
	b.ReportMetric(float64(median(a).Microseconds())/1000, "shell-ms")
	b.ReportMetric(float64(median(s).Microseconds())/1000, "session-ms")
	b.ReportMetric(float64(median(cb).Microseconds())/1000, "bwrap-bash-ms")
	b.ReportMetric(float64(median(a))/float64(median(cb)), "ratio-bash")
	b.ReportMetric(float64(median(s))/float64(median(cb)), "ratio-bash-session")
	b.ReportMetric(float64(median(burst).Microseconds())/1000, "burst-ms")
	b.ReportMetric(float64(median(burstS).Microseconds())/1000, "burst-session-ms")
	b.ReportMetric(float64(holderRSS(b, ses.cmd.Process.Pid))/1024, "holder-MiB")
}

// holderRSS sums the resident memory (KiB) of the session sandbox's
// processes below server pid: the bwrap that holds it and everything
// running this binary below that bwrap (the spawner and idle slots).
func holderRSS(b *testing.B, server int) int {
	total := 0
	var walk func(pid int, inHolder bool)
	walk = func(pid int, inHolder bool) {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if !inHolder && strings.Contains(string(cmdline), "__session-spawner") {
			inHolder = true
		}
		if inHolder && (strings.HasSuffix(exe, "bwrap") || strings.Contains(exe, "evener-mcp")) {
			total += max(rssKiB(pid), 0)
		}
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		for _, t := range tasks {
			kids, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
			for _, k := range strings.Fields(string(kids)) {
				if kp, err := strconv.Atoi(k); err == nil {
					walk(kp, inHolder)
				}
			}
		}
	}
	walk(server, false)
	return total
}
