//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// httpServer is `evener-mcp serve` started as the fixture's identity on a
// free loopback port.
type httpServer struct {
	e      *env
	cmd    *exec.Cmd
	url    string
	addr   string
	stderr *lockedBuffer
	done   chan struct{}
	token  string
}

var servingLine = regexp.MustCompile(`serving MCP at http://([0-9.:\[\]]+)/mcp`)

// serve starts the HTTP server with flags and waits (bounded) for it to
// listen.
func (e *env) serve(t *testing.T, flags ...string) *httpServer {
	t.Helper()
	e.chown(t)
	s := &httpServer{e: e, stderr: &lockedBuffer{}, done: make(chan struct{})}
	args := append([]string{"serve", "--listen", "127.0.0.1:0"}, flags...)
	s.cmd = exec.Command(binPath, args...)
	s.cmd.Dir = e.work
	s.cmd.Env = e.serverEnv(t)
	if !e.id.root && os.Geteuid() == 0 {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = pw
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	pw.Close()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.stderr.Write([]byte(line + "\n"))
			if m := servingLine.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	select {
	case s.addr = <-found:
	case <-s.done:
		t.Fatalf("serve exited before listening:\n%s", s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen within 30 s:\n%s", s.stderr.String())
	}
	s.url = "http://" + s.addr + "/mcp"
	return s
}

// stop sends SIGTERM and waits (bounded) for the server to exit.
func (s *httpServer) stop(t *testing.T) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("serve did not exit within 30 s of SIGTERM:\n%s", s.stderr.String())
	}
}

// clientOpts shape one HTTP client.
type clientOpts struct {
	narrowing   map[string]any                                                                      // capabilities.experimental["evener-mcp/session"]
	elicitation func(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) // nil: no elicitation capability
	roots       []string                                                                            // nil: no roots capability
	token       string
	listen      bool // open the standalone GET stream (mcp-go sends roots/list only there)
	noListen    bool // never open it, even with roots declared
}

type elicitFunc func(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitFunc) Elicit(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, r)
}

type rootsFunc []string

func (r rootsFunc) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	res := &mcp.ListRootsResult{}
	for _, p := range r {
		res.Roots = append(res.Roots, mcp.Root{URI: "file://" + p, Name: filepath.Base(p)})
	}
	return res, nil
}

// connect opens an MCP session over Streamable HTTP with mcp-go's client.
func (s *httpServer) connect(t *testing.T, o clientOpts) (*mcpConn, error) {
	t.Helper()
	var topts []transport.StreamableHTTPCOption
	if o.token != "" {
		topts = append(topts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + o.token}))
	}
	if (o.listen || o.roots != nil) && !o.noListen {
		topts = append(topts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(s.url, topts...)
	if err != nil {
		t.Fatal(err)
	}
	var copts []client.ClientOption
	if o.elicitation != nil {
		copts = append(copts, client.WithElicitationHandler(elicitFunc(o.elicitation)))
	}
	if o.roots != nil {
		copts = append(copts, client.WithRootsHandler(rootsFunc(o.roots)))
	}
	c := client.NewClient(tr, copts...)
	m := &mcpConn{stderr: s.stderr}
	c.OnNotification(m.recordProgress)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Start's context lives as long as the client: the standalone GET
	// stream (continuous listening) runs under it.
	if err := c.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("start client: %w", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "evener-integration-http", Version: "1"}
	if o.narrowing != nil {
		req.Params.Capabilities.Experimental = map[string]any{"evener-mcp/session": o.narrowing}
	}
	if m.init, err = c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, err
	}
	m.c = c
	return m, nil
}

func (s *httpServer) mustConnect(t *testing.T, o clientOpts) *mcpConn {
	t.Helper()
	m, err := s.connect(t, o)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr.String())
	}
	t.Cleanup(func() { m.c.Close() })
	return m
}

// shellOut runs a shell command and returns its output.
func (m *mcpConn) shellOut(t *testing.T, cmd string) string {
	t.Helper()
	r := m.call(t, "shell", map[string]any{"command": cmd})
	out, _ := structured(t, r)["output"].(string)
	if r.IsError {
		t.Fatalf("shell %q: %s", cmd, text(r))
	}
	return out
}

// ---------------------------------------------------------------------------
// What a server leaves on the host.

// procEntry is one process of the host's process table.
type procEntry struct {
	ppid int
	comm string
}

// procTable reads pid -> (ppid, comm) for every process.
func procTable() map[int]procEntry {
	t := map[int]procEntry{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		t[p] = procEntry{ppid: pp, comm: s[i+1 : j]}
	}
	return t
}

// descendants are the pids below pid in the process tree.
func descendants(pid int) []int {
	children := map[int][]int{}
	for p, e := range procTable() {
		children[e.ppid] = append(children[e.ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 100000 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// foreign reports whether pid runs under an evener-mcp server this test
// binary did not start (someone else's server on the same machine: people
// who develop this project run it): an ancestor above pid is a server
// process ("evener-mcp-serv", the kernel's 15-byte comm of
// evener-mcp-server) and the test binary is not. A process of ours, or one
// that left its server's tree (reparented to init: exactly what a test
// must see), is not foreign.
func foreign(t map[int]procEntry, pid int) bool {
	self := os.Getpid()
	server := false
	e, ok := t[pid]
	for p, n := e.ppid, 0; ok && p > 1 && n < 4096; n++ {
		if p == self {
			return false
		}
		if e, ok = t[p]; !ok {
			break
		}
		if e.comm == "evener-mcp-serv" {
			server = true
		}
		p = e.ppid
	}
	return server
}

// procsWith lists processes whose command line contains marker, leaving
// out those under another test's or user's evener-mcp server (foreign).
func procsWith(marker string) []int {
	var out []int
	table := procTable()
	for p := range table {
		if p == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) && !foreign(table, p) {
			out = append(out, p)
		}
	}
	return out
}

// waitFor polls cond every 50 ms for at most d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fdCounts counts a process's open descriptors: sockets and the rest.
func fdCounts(pid int) (sockets, other int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if strings.HasPrefix(l, "socket:") {
			sockets++
		} else {
			other++
		}
	}
	return
}

// listeningPorts are the TCP ports pid listens on (from its own netns view).
func listeningPorts(pid int) []int {
	inodes := map[string]bool{}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] {
				continue
			}
			if i := strings.LastIndexByte(fs[1], ':'); i >= 0 {
				if p, err := strconv.ParseInt(fs[1][i+1:], 16, 32); err == nil {
					ports = append(ports, int(p))
				}
			}
		}
	}
	return ports
}

// entries lists a directory's names.
func entries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// dialable reports whether a TCP connect to 127.0.0.1:port succeeds.
func dialable(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err == nil {
		c.Close()
		return true
	}
	return false
}

func bufioScanner(r io.Reader, buf []byte) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(buf, 4<<20)
	return sc
}

// raw sends one hand-made request to /mcp (JSON, accepting both answer
// forms) with the given headers; the caller closes the body.
func (s *httpServer) raw(t *testing.T, method, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
