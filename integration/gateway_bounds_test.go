//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostileSource is a downstream MCP server that tries to exhaust the
// server in front of it (docs/gateway.md, "What a server behind
// evener-mcp can make evener-mcp hold"). Its mode is its first argument:
//
//   - deaf: finishes the handshake, then stops reading its input and
//     floods requests (roots/list, ping);
//   - list: keeps serving, and floods notifications/tools/list_changed;
//     it writes how many tools/list it answered to the file named by its
//     second argument;
//   - mute: reads initialize, never answers it, never reads again, and
//     floods requests and list_changed;
//   - big: keeps serving, and floods answers to nothing it was asked,
//     each a line of 15 MiB;
//   - serve: answers every request at once and floods nothing (the
//     downstream of BenchmarkGatewayAddedCost).
//
// Each floods from 3 s after its start (so that the test can read the
// server's idle size first), for at most 60 s.
const hostileSource = `package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	mu  sync.Mutex
	out = bufio.NewWriterSize(os.Stdout, 64<<10)
)

func send(lines ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		out.WriteString(l)
		out.WriteByte('\n')
	}
	out.Flush()
}

// idOf is the raw id of a request line, "" for a notification.
func idOf(l string) string {
	i := strings.Index(l, "\"id\":")
	if i < 0 {
		return ""
	}
	rest := l[i+5:]
	j := strings.IndexAny(rest, ",}")
	if j < 0 {
		return ""
	}
	return rest[:j]
}

func answer(l string) {
	id := idOf(l)
	switch {
	case id == "":
	case strings.Contains(l, "\"method\":\"initialize\""):
		send("{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{\"listChanged\":true}},\"serverInfo\":{\"name\":\"hostile\",\"version\":\"1\"}}}")
	case strings.Contains(l, "\"method\":\"tools/list\""):
		send("{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"tools\":[{\"name\":\"x\",\"description\":\"a tool\",\"inputSchema\":{\"type\":\"object\"}}]}}")
	case strings.Contains(l, "\"method\":\"tools/call\""):
		send("{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}")
	case strings.Contains(l, "\"method\":"):
		send("{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{}}")
	}
}

func main() {
	mode := os.Args[1]
	start := time.Now()
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	flood := func(batch func(i int) []string) {
		time.Sleep(time.Until(start.Add(3 * time.Second)))
		for i := 0; time.Since(start) < 60*time.Second; i++ {
			send(batch(i)...)
		}
		os.Exit(0)
	}
	requests := func(i int) []string {
		b := make([]string, 0, 100)
		for k := 0; k < 50; k++ {
			b = append(b, fmt.Sprintf("{\"jsonrpc\":\"2.0\",\"id\":\"r-%d-%d\",\"method\":\"roots/list\"}", i, k),
				fmt.Sprintf("{\"jsonrpc\":\"2.0\",\"id\":\"p-%d-%d\",\"method\":\"ping\"}", i, k))
		}
		return b
	}
	changed := "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}"
	switch mode {
	case "serve":
		for {
			l, err := in.ReadString('\n')
			if err != nil {
				return
			}
			answer(l)
		}
	case "deaf":
		for {
			l, err := in.ReadString('\n')
			if err != nil {
				return
			}
			answer(l)
			if strings.Contains(l, "\"method\":\"tools/list\"") {
				break
			}
		}
		flood(requests)
	case "list":
		lists := 0
		go func() {
			for {
				l, err := in.ReadString('\n')
				if err != nil {
					os.Exit(0)
				}
				answer(l)
				if strings.Contains(l, "\"method\":\"tools/list\"") {
					lists++
					// Whole or not at all: the test may read it
					// meanwhile (a truncated file read as 0 lists).
					os.WriteFile(os.Args[2]+".tmp", []byte(strconv.Itoa(lists)), 0o644)
					os.Rename(os.Args[2]+".tmp", os.Args[2])
				}
			}
		}()
		flood(func(int) []string {
			b := make([]string, 100)
			for k := range b {
				b[k] = changed
			}
			return b
		})
	case "big":
		go func() {
			for {
				l, err := in.ReadString('\n')
				if err != nil {
					os.Exit(0)
				}
				answer(l)
			}
		}()
		pad := strings.Repeat("a", 15<<20)
		flood(func(i int) []string {
			return []string{"{\"jsonrpc\":\"2.0\",\"id\":\"nothing-" + strconv.Itoa(i) + "\",\"result\":{\"pad\":\"" + pad + "\"}}"}
		})
	case "mute":
		in.ReadString('\n')
		flood(func(i int) []string { return append(requests(i), changed) })
	}
}
`

var hostileOnce struct {
	sync.Once
	path string
	err  error
}

// hostileBin builds hostileSource (once per run) beside the server.
func hostileBin(t testing.TB) string {
	t.Helper()
	hostileOnce.Do(func() {
		src := filepath.Join(baseDir, "hostile-src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			hostileOnce.err = err
			return
		}
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(hostileSource), 0o644); err != nil {
			hostileOnce.err = err
			return
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hostile\n\ngo 1.21\n"), 0o644); err != nil {
			hostileOnce.err = err
			return
		}
		hostileOnce.path = filepath.Join(baseDir, "hostile")
		cmd := exec.Command("go", "build", "-o", hostileOnce.path, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			hostileOnce.err = fmt.Errorf("build the hostile server: %v\n%s", err, out)
		}
	})
	if hostileOnce.err != nil {
		t.Fatal(hostileOnce.err)
	}
	return hostileOnce.path
}

// TestGatewayBounds: a hostile downstream (hostileSource, each of its
// three modes) grows the server by less than 64 MiB over its idle size
// while it floods for 20 s; the session's own tools and another downstream
// keep answering; a call of the hostile server's tool returns (an error is
// fine) rather than hang; a server that stopped reading is stopped and
// named in a warning and the preamble; over HTTP, the tools of another
// session keep answering too. Before the bounds the server grew by hundreds of MiB
// a second: the test kills it as soon as it passes the bound, so a failing
// run holds at most a few hundred MiB.
func TestGatewayBounds(t *testing.T) {
	const (
		boundMiB = 64
		flood    = 20 * time.Second
	)
	bin := hostileBin(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		// Over HTTP (serve), two sessions, each with its instances: one
		// session's downstream must not take the other's tools down.
		for _, name := range []string{"deaf", "list", "mute", "big", "http-deaf"} {
			t.Run(name, func(t *testing.T) {
				mode, overHTTP := strings.CutPrefix(name, "http-")
				e := newEnv(t, id)
				count := filepath.Join(e.work, "lists")
				cfg := e.mcpConfig(t, map[string]any{
					"bad":  map[string]any{"command": bin, "args": []string{mode, count}, "network": "off"},
					"good": map[string]any{"command": "node", "args": []string{e.script(t, "crashy.cjs", crashyServer)}},
				})
				flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off", "--mcp-config", cfg}
				var sessions []*mcpConn
				var proc *os.Process
				if overHTTP {
					srv := e.serve(t, flags...)
					sessions = []*mcpConn{srv.mustConnect(t, clientOpts{}), srv.mustConnect(t, clientOpts{})}
					proc = srv.cmd.Process
				} else {
					m := e.mcp(t, flags...)
					sessions = []*mcpConn{m}
					proc = m.cmd.Process
				}
				m, pid := sessions[0], proc.Pid
				// The other downstream up and the server warm, within
				// the hostile one's first 3 s.
				for _, s := range sessions {
					if !waitFor(3*time.Second, func() bool {
						r, err := s.callWithin(2*time.Second, "good__echo", nil)
						return err == nil && !r.IsError
					}) {
						t.Fatalf("the good downstream did not answer\nstderr:\n%s", m.stderr.String())
					}
					if r, err := s.callWithin(5*time.Second, "read_file", map[string]any{"path": "README"}); err != nil || r.IsError {
						t.Fatalf("read_file: %v", err)
					}
				}
				base, err := procStatusKiB(pid, "VmRSS")
				if err != nil {
					t.Fatal(err)
				}
				// A call of the hostile server's tool, while it floods:
				// it must come back, with an error or not.
				badDone := make(chan string, 1)
				if mode != "mute" {
					go func() {
						time.Sleep(4 * time.Second)
						t0 := time.Now()
						r, err := m.callWithin(flood, "bad__x", nil)
						switch {
						case err != nil:
							badDone <- fmt.Sprintf("%v after %s", err, time.Since(t0).Round(time.Millisecond))
						default:
							badDone <- fmt.Sprintf("%q (error %v) after %s", text(r), r.IsError, time.Since(t0).Round(time.Millisecond))
						}
					}()
				}
				var peak int64
				killed := ""
				deadline := time.Now().Add(flood)
				nextCall := time.Now()
				var slowest time.Duration
				named := false // the preamble named the stopped server
				for time.Now().Before(deadline) && killed == "" {
					if mode == "deaf" && !named {
						named = strings.Contains(m.preamble(t), "bad is unavailable (stopped: it read none of its input")
					}
					rss, err := procStatusKiB(pid, "VmRSS")
					if err != nil {
						t.Fatalf("the server is gone: %v\nstderr:\n%s", err, m.stderr.String())
					}
					peak = max(peak, rss)
					if rss-base > boundMiB<<10 || rss > 300<<10 {
						_ = proc.Kill() // before it takes the machine down
						killed = fmt.Sprintf("killed at %d MiB (%d MiB idle) after %s", rss>>10, base>>10, flood-time.Until(deadline))
						break
					}
					if time.Now().After(nextCall) {
						nextCall = time.Now().Add(time.Second)
						for i, s := range sessions {
							for _, c := range []struct {
								tool string
								args map[string]any
							}{{"read_file", map[string]any{"path": "README"}}, {"good__echo", nil}} {
								t0 := time.Now()
								r, err := s.callWithin(10*time.Second, c.tool, c.args)
								slowest = max(slowest, time.Since(t0))
								if err != nil || r.IsError {
									msg := ""
									if r != nil {
										msg = text(r)
									}
									t.Errorf("session %d: %s during the flood: %v %s", i, c.tool, err, msg)
								}
							}
						}
						continue
					}
					time.Sleep(100 * time.Millisecond)
				}
				if killed != "" {
					t.Fatalf("the server grew past its bound: %s\nstderr (tail):\n%s", killed, tail(m.stderr.String(), 3000))
				}
				if hwm, err := procStatusKiB(pid, "VmHWM"); err == nil {
					peak = max(peak, hwm)
				}
				t.Logf("%s %s: RSS %d MiB idle, peak %d MiB (+%d MiB); slowest call of another tool %s",
					id.name, name, base>>10, peak>>10, (peak-base)>>10, slowest.Round(time.Millisecond))
				if peak-base > boundMiB<<10 {
					t.Errorf("the server peaked %d MiB above its idle size, bound %d MiB", (peak-base)>>10, boundMiB)
				}
				if mode != "mute" {
					select {
					case r := <-badDone:
						t.Logf("the hostile server's tool: %s", r)
					case <-time.After(5 * time.Second):
						t.Errorf("a call of the hostile server's tool hung past %s", flood)
					}
				}
				switch mode {
				case "deaf":
					if !strings.Contains(m.stderr.String(), "stopped: it read none of its input") {
						t.Errorf("no warning that the server was stopped for not reading:\n%s", tail(m.stderr.String(), 3000))
					}
					if !named {
						t.Errorf("the preamble never named the stopped server")
					}
				case "list":
					b, _ := os.ReadFile(count)
					n, _ := strconv.Atoi(string(b))
					// A refresh at most every RefreshGap (100 ms), plus
					// the handshake's list.
					if n < 2 || n > int(flood/(100*time.Millisecond))+5 {
						t.Errorf("%d tools/list for a flood of list_changed over %s", n, flood)
					}
					t.Logf("%d tools/list answered", n)
				}
			})
		}
	})
}

// tail is the end of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
