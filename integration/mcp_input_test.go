//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rawConn speaks JSON-RPC lines to the server directly, so malformed input
// can be sent exactly as an attacker would write it.
type rawConn struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	// stderr is the server's standard error.
	stderr *lockedBuffer
}

func (e *env) raw(t *testing.T, flags ...string) *rawConn {
	t.Helper()
	return e.rawWith(t, "{}", flags...)
}

// rawWith is raw with the client's capabilities (JSON) in initialize.
func (e *env) rawWith(t *testing.T, caps string, flags ...string) *rawConn {
	t.Helper()
	rc := e.rawStart(t, flags...)
	rc.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"clientInfo":{"name":"raw","version":"1"}}}`)
	rc.expect(0)
	rc.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return rc
}

// rawStart starts the stdio server with flags and no handshake.
func (e *env) rawStart(t *testing.T, flags ...string) *rawConn {
	t.Helper()
	e.chown(t)
	cmd := exec.Command(binPath, flags...)
	cmd.Env = e.serverEnv(t)
	cmd.Dir = e.work
	if !e.id.root && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
	}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{t: t, cmd: cmd, in: in, lines: make(chan string, 100), stderr: stderr}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			rc.lines <- sc.Text()
		}
		close(rc.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	return rc
}

// close ends the session (stdin closed), waits (bounded) for the server to
// exit and returns its stderr.
func (r *rawConn) close() string {
	r.t.Helper()
	r.in.Close()
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		r.cmd.Process.Kill()
		r.t.Errorf("the server did not exit within 15 s of stdin closing")
	}
	return r.stderr.String()
}

func (r *rawConn) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// expect waits for the response with the given id (skipping notifications).
func (r *rawConn) expect(id any) map[string]any {
	r.t.Helper()
	var m map[string]any
	r.readUntil(fmt.Sprintf("the response for id %v", id), func(l string) bool {
		m = nil
		if json.Unmarshal([]byte(l), &m) != nil {
			r.t.Fatalf("server wrote a non-JSON line: %q", l)
		}
		_, isNote := m["method"]
		return !isNote && fmt.Sprint(m["id"]) == fmt.Sprint(id)
	})
	return m
}

// readUntil returns the lines the server writes up to and including the
// first that done accepts, failing the test after 30 s or at the end of
// the output; what names the line awaited.
func (r *rawConn) readUntil(what string, done func(line string) bool) []string {
	r.t.Helper()
	var out []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("server closed its output waiting for %s", what)
			}
			out = append(out, l)
			if done(l) {
				return out
			}
		case <-deadline:
			r.t.Fatalf("no %s; lines: %q", what, out)
		}
	}
}

// alive proves the server still serves after whatever came before.
func (r *rawConn) alive(id int) {
	r.t.Helper()
	r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README"}}}`, id))
	m := r.expect(id)
	if !strings.Contains(fmt.Sprint(m["result"]), "worktree file") {
		r.t.Fatalf("the server stopped serving correctly: %v", m)
	}
}

func isProtocolError(m map[string]any) bool { _, ok := m["error"]; return ok }

func isToolError(m map[string]any) bool {
	res, _ := m["result"].(map[string]any)
	return res != nil && res["isError"] == true
}

// TestMCPMalformedInput: malformed JSON-RPC, duplicate keys, wrong types,
// unknown keys, huge and deeply nested messages, NUL bytes and invalid
// UTF-8 each get a clean error; the server keeps serving with bounded
// memory.
func TestMCPMalformedInput(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		seedSecrets(t, e)
		r := e.raw(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		secret := filepath.Join(e.home, ".ssh", "id_rsa")
		cases := []struct {
			name string
			line string
			id   any
			want func(map[string]any) bool
		}{
			{"not JSON", `{"jsonrpc":"2.0","id":1,"method":`, nil, nil},
			{"duplicate key smuggling a path", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README","path":"` + secret + `"}}}`, 2, isProtocolError},
			{"duplicate key differing in case", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README","Path":"x"}}}`, 3, isToolError},
			{"unknown key", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README","follow":true}}}`, 4, isToolError},
			{"wrong type", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{"path":42}}}`, 5, isToolError},
			{"negative offset", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README","offset":-5}}}`, 6, isToolError},
			{"huge number", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README","limit":1e300}}}`, 7, isToolError},
			{"NUL in path", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"READ\u0000ME"}}}`, 8, isToolError},
			{"option-looking grep pattern", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"--pre=sh"}}}`, 9, func(m map[string]any) bool { return !isProtocolError(m) && !isToolError(m) }},
			{"option-looking path", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"list_dir","arguments":{"path":"-rf"}}}`, 10, isToolError},
			{"option-looking workdir", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"shell","arguments":{"command":"pwd","workdir":"--bind / /"}}}`, 11, isToolError},
			{"unknown tool", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}`, 12, func(m map[string]any) bool { return isProtocolError(m) || isToolError(m) }},
			{"deep nesting", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README","x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}}`, 13, isProtocolError},
			{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"\xff\xfe\"}}}", 14, isProtocolError},
			{"pathological regex", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"(a*)*b"}}}`, 15, func(m map[string]any) bool { return !isProtocolError(m) }},
		}
		next := 100
		for _, c := range cases {
			r.send(c.line)
			if c.id != nil {
				m := r.expect(c.id)
				if !c.want(m) {
					t.Errorf("%s: unexpected answer %v", c.name, m)
				}
				if strings.Contains(fmt.Sprint(m), "SECRET") {
					t.Errorf("%s: a secret leaked: %v", c.name, m)
				}
			}
			r.alive(next)
			next++
		}
		// A 100 MB argument: refused without the server growing by as
		// much, and the server keeps serving.
		big := `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big","content":"` + strings.Repeat("x", 100<<20) + `"}}}`
		go r.send(big)
		m := r.expect(50)
		if !isProtocolError(m) {
			t.Errorf("100 MB message: %v", m)
		}
		if rss := rssKB(r.cmd.Process.Pid); rss > 200<<10 {
			t.Errorf("server RSS %d KiB after a 100 MB message", rss)
		}
		r.alive(next)
	})
}

func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			var n int
			fmt.Sscan(f[1], &n)
			return n
		}
	}
	return 0
}

// TestMCPSwapRace: while a goroutine swaps a worktree directory with a
// symlink to a secret directory, thousands of read_file and write_file
// calls run through MCP; nothing outside is ever read or written.
func TestMCPSwapRace(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		seedSecrets(t, e)
		d := filepath.Join(e.work, "d")
		writeFile(t, filepath.Join(d, "id_rsa"), "harmless\n")
		link := filepath.Join(e.work, "d-link")
		must(t, os.Symlink(filepath.Join(e.home, ".ssh"), link))
		m := e.mcp(t, "--sandbox", "restricted", "--sandbox-net", "off")
		before, _ := os.ReadDir(filepath.Join(e.home, ".ssh"))

		stopSwaps := swapRace(t, d, link)
		deadline := time.Now().Add(15 * time.Second)
		calls := 0
		for i := 0; i < 3000 && time.Now().Before(deadline); i++ {
			r := m.call(t, "read_file", map[string]any{"path": "d/id_rsa"})
			if strings.Contains(text(r), "SECRET") {
				t.Fatalf("call %d read the secret through the swapped directory", i)
			}
			m.call(t, "write_file", map[string]any{"path": "d/planted", "content": "x"})
			calls += 2
		}
		swaps := stopSwaps()
		after, _ := os.ReadDir(filepath.Join(e.home, ".ssh"))
		if len(after) != len(before) {
			t.Errorf("the secret directory changed: %d entries before, %d after", len(before), len(after))
		}
		t.Logf("%d calls against %d swaps", calls, swaps)
		if swaps < 100 {
			t.Errorf("only %d swaps: the race was not exercised", swaps)
		}
	})
}

// renameExchange atomically swaps two paths.
func renameExchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// swapRace swaps directory d with link (a symlink to a secret directory)
// as fast as it can until the returned stop is called, which reports how
// many swaps there were. It first shows that the swap really exposes the
// secret (d/id_rsa) to a careless reader: otherwise the race proves nothing.
func swapRace(t *testing.T, d, link string) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	swaps := 0
	go func() {
		defer wg.Done()
		for i := 0; i < 50_000_000; i++ {
			select {
			case <-done:
				return
			default:
			}
			_ = renameExchange(d, link)
			swaps++
		}
	}()
	stop = func() int {
		close(done)
		wg.Wait()
		return swaps
	}
	exposed := false
	for i := 0; i < 20000 && !exposed; i++ {
		b, _ := os.ReadFile(filepath.Join(d, "id_rsa"))
		exposed = strings.Contains(string(b), "SECRET")
	}
	if !exposed {
		stop()
		t.Fatalf("the swap never exposed the secret to a plain read: the race would prove nothing")
	}
	return stop
}
