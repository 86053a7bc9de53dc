package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDecider allows exactly its rules (host as asked, and port) and denies
// everything else; it records every call and never resolves anything.
type fakeDecider struct {
	mu    sync.Mutex // guards rules and calls
	rules map[string]fakeRule
	calls []string
}

type fakeRule struct {
	port int
	addr netip.Addr
}

func newFakeDecider() *fakeDecider { return &fakeDecider{rules: map[string]fakeRule{}} }

// allow makes host:port allowed, to be dialed at addr.
func (f *fakeDecider) allow(host string, port int, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[host] = fakeRule{port, netip.MustParseAddr(addr)}
}

func (f *fakeDecider) Decide(ctx context.Context, host string, port int) Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, net.JoinHostPort(host, strconv.Itoa(port)))
	if r, ok := f.rules[host]; ok && r.port == port {
		return Decision{Allow: true, Host: host, Port: port, Addrs: []netip.Addr{r.addr}, Rule: host}
	}
	return Decision{Host: host, Port: port, Rule: "test-deny", Reason: fmt.Sprintf("%s is not on the test allowlist", net.JoinHostPort(host, strconv.Itoa(port)))}
}

func (f *fakeDecider) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// harness is a session's proxies with recorders for violations and dials.
type harness struct {
	p   *proxyPair
	dec *fakeDecider

	mu         sync.Mutex // guards violations and dials
	violations []Violation
	dials      []string
}

func (h *harness) Violations() []Violation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Violation(nil), h.violations...)
}

func (h *harness) Dials() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dials...)
}

// startHarness starts proxies on dec. The Dial hook records each address
// and returns the bare *net.TCPConn, so tunnels still splice.
func startHarness(tb testing.TB, dec *fakeDecider) *harness {
	tb.Helper()
	h := &harness{dec: dec}
	var d net.Dialer
	p, err := startProxies(proxyOptions{
		Decider: dec,
		OnViolation: func(v Violation) {
			h.mu.Lock()
			h.violations = append(h.violations, v)
			h.mu.Unlock()
		},
		DialTimeout: 5 * time.Second,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			h.mu.Lock()
			h.dials = append(h.dials, addr)
			h.mu.Unlock()
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	h.p = p
	tb.Cleanup(func() { p.Close() })
	return h
}

// listenLoopback listens on ip:0 and closes at cleanup.
func listenLoopback(tb testing.TB, ip string) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

func portOf(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// startEcho serves TCP echo on ip; it returns the port.
func startEcho(tb testing.TB, ip string) int {
	ln := listenLoopback(tb, ip)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return portOf(ln)
}

// startSink reads each connection to its end, then writes back the byte
// count (8 bytes, big endian) and closes.
func startSink(tb testing.TB) int {
	ln := listenLoopback(tb, "127.0.0.1")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256<<10)
				var n int64
				for {
					m, err := c.Read(buf)
					n += int64(m)
					if err != nil {
						break
					}
				}
				binary.Write(c, binary.BigEndian, n)
			}()
		}
	}()
	return portOf(ln)
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// connectTunnel opens a CONNECT tunnel to target through h's HTTP proxy
// and returns the connection (the tunnel when the response is 200).
func connectTunnel(tb testing.TB, h *harness, target string) (net.Conn, *http.Response) {
	tb.Helper()
	c, err := net.Dial("tcp", h.p.HTTPAddr())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, basicAuth(h.p.HTTPUser(), h.p.HTTPPassword()))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode == 200 && br.Buffered() > 0 {
		tb.Fatalf("%d bytes after the CONNECT response", br.Buffered())
	}
	return c, resp
}

// transfer writes size bytes into c, half-closes it and reads the sink's
// count back.
func transfer(tb testing.TB, c net.Conn, size int64) time.Duration {
	tb.Helper()
	buf := make([]byte, 256<<10)
	start := time.Now()
	for left := size; left > 0; {
		n := int64(len(buf))
		if left < n {
			n = left
		}
		if _, err := c.Write(buf[:n]); err != nil {
			tb.Fatal(err)
		}
		left -= n
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		tb.Fatal(err)
	}
	var got int64
	if err := binary.Read(c, binary.BigEndian, &got); err != nil {
		tb.Fatal(err)
	}
	d := time.Since(start)
	if got != size {
		tb.Fatalf("sink received %d bytes, want %d", got, size)
	}
	c.Close()
	return d
}

func TestStartListensOnLoopbackWithRandomCredentials(t *testing.T) {
	a := startHarness(t, newFakeDecider())
	b := startHarness(t, newFakeDecider())
	for _, addr := range []string{a.p.HTTPAddr(), a.p.SOCKSAddr(), b.p.HTTPAddr(), b.p.SOCKSAddr()} {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || ap.Addr() != netip.MustParseAddr("127.0.0.1") || ap.Port() == 0 {
			t.Errorf("listening on %q, want 127.0.0.1:port", addr)
		}
	}
	seen := map[string]bool{}
	for _, c := range []string{a.p.HTTPUser(), a.p.HTTPPassword(), a.p.SOCKSUser(), a.p.SOCKSPassword(),
		b.p.HTTPUser(), b.p.HTTPPassword(), b.p.SOCKSUser(), b.p.SOCKSPassword()} {
		if len(c) < 32 || strings.Trim(c, "0123456789abcdef") != "" {
			t.Errorf("credential %q is not 16+ random bytes in hex", c)
		}
		if seen[c] {
			t.Errorf("credential %q repeated", c)
		}
		seen[c] = true
	}
	if _, err := startProxies(proxyOptions{}); err == nil {
		t.Error("startProxies without a Decider succeeded")
	}
}

func TestPrintableASCII(t *testing.T) {
	for in, want := range map[string]string{
		"plain reason":           "plain reason",
		"a\r\nX-Injected: 1":     `a\x0d\x0aX-Injected: 1`,
		"nul\x00":                `nul\x00`,
		"é":                      `\xc3\xa9`,
		`back\slash`:             `back\\slash`,
		strings.Repeat("x", 600): strings.Repeat("x", 500) + "...",
	} {
		if got := printableASCII(in, 500); got != want {
			t.Errorf("printableASCII(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCloseEndsTunnels: a reader blocked on an open CONNECT or SOCKS tunnel
// returns when the session's proxies close; Close is idempotent and leaves
// no goroutine behind.
func TestCloseEndsTunnels(t *testing.T) {
	before := runtime.NumGoroutine()
	echo := startEcho(t, "127.0.0.1")
	dec := newFakeDecider()
	dec.allow("allowed.test", echo, "127.0.0.1")
	h := startHarness(t, dec)

	httpTun, resp := connectTunnel(t, h, fmt.Sprintf("allowed.test:%d", echo))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	socksTun, code := socksConnect(t, h, "allowed.test", echo, h.p.SOCKSUser(), h.p.SOCKSPassword())
	if code != socksSucceeded {
		t.Fatalf("SOCKS CONNECT: reply %#x", code)
	}
	// An idle keep-alive client of the plain-HTTP side, too.
	idle, err := net.Dial("tcp", h.p.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	ended := make(chan string, 3)
	for name, c := range map[string]net.Conn{"connect": httpTun, "socks": socksTun, "idle": idle} {
		go func() {
			// Prove the tunnel is live, then block.
			if name != "idle" {
				if _, err := io.WriteString(c, "ping"); err != nil {
					ended <- name + ": write: " + err.Error()
					return
				}
				b := make([]byte, 4)
				if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
					ended <- fmt.Sprintf("%s: echo %q %v", name, b, err)
					return
				}
			}
			_, err := c.Read(make([]byte, 1))
			ended <- name + ": " + fmt.Sprint(err)
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the readers block
	closed := make(chan error, 1)
	go func() { closed <- h.p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	for range 3 {
		select {
		case msg := <-ended:
			if !strings.Contains(msg, "EOF") && !strings.Contains(msg, "reset") {
				t.Errorf("reader ended with %s", msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a reader blocked on a tunnel did not return after Close")
		}
	}
	if err := h.p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", h.p.HTTPAddr(), time.Second); err == nil {
		c.Close()
		t.Error("the HTTP proxy still accepts after Close")
	}

	// Every goroutine the proxies started is gone (the test's own echo
	// server goroutines end as their clients close).
	httpTun.Close()
	socksTun.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestDialsTheDecidedAddress: the proxies dial the address the decision
// checked, not the name: "localhost" (which a resolver would answer with
// 127.0.0.1) is decided to 127.0.0.2, where the only server listens, and an
// unresolvable name works just as well.
func TestDialsTheDecidedAddress(t *testing.T) {
	ln := listenLoopback(t, "127.0.0.2")
	port := portOf(ln)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "reached %s", r.Host)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	// Nothing listens on 127.0.0.1:port: a dial by name would be refused.
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Skip("127.0.0.1 has a listener on the same port by chance")
	}

	dec := newFakeDecider()
	dec.allow("localhost", port, "127.0.0.2")
	dec.allow("rebind.invalid", port, "127.0.0.2")
	h := startHarness(t, dec)
	want := fmt.Sprintf("127.0.0.2:%d", port)

	for _, name := range []string{"localhost", "rebind.invalid"} {
		// Plain HTTP.
		resp, err := proxyClient(h, nil).Get(fmt.Sprintf("http://%s:%d/", name, port))
		if err != nil {
			t.Fatalf("%s plain GET: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "reached "+name) {
			t.Errorf("%s plain GET: %s %q", name, resp.Status, body)
		}
		// CONNECT.
		c, resp := connectTunnel(t, h, fmt.Sprintf("%s:%d", name, port))
		if resp.StatusCode != 200 {
			t.Fatalf("%s CONNECT: %s", name, resp.Status)
		}
		checkHTTPOverTunnel(t, c, name)
		// SOCKS5 by domain name.
		c, code := socksConnect(t, h, name, port, h.p.SOCKSUser(), h.p.SOCKSPassword())
		if code != socksSucceeded {
			t.Fatalf("%s SOCKS: reply %#x", name, code)
		}
		checkHTTPOverTunnel(t, c, name)
	}
	for _, d := range h.Dials() {
		if d != want {
			t.Errorf("dialed %q, want only the decided %q", d, want)
		}
	}
	// Six connections; the second plain GET may reuse the pooled upstream
	// connection to the same checked address.
	if len(h.Dials()) < 5 {
		t.Errorf("dials: %v", h.Dials())
	}
}

func checkHTTPOverTunnel(t *testing.T, c net.Conn, name string) {
	t.Helper()
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s over tunnel: %v", name, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "reached "+name) {
		t.Errorf("%s over tunnel: %s %q", name, resp.Status, body)
	}
}

// TestDialFailure: an allowed target that refuses the connection is a 502
// or SOCKS reply 0x05, not a violation.
func TestDialFailure(t *testing.T) {
	ln := listenLoopback(t, "127.0.0.1")
	port := portOf(ln)
	ln.Close() // nothing listens there now
	dec := newFakeDecider()
	dec.allow("gone.test", port, "127.0.0.1")
	h := startHarness(t, dec)
	_, resp := connectTunnel(t, h, fmt.Sprintf("gone.test:%d", port))
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("CONNECT to a closed port: %s", resp.Status)
	}
	_, code := socksConnect(t, h, "gone.test", port, h.p.SOCKSUser(), h.p.SOCKSPassword())
	if code != socksConnRefused {
		t.Errorf("SOCKS to a closed port: reply %#x", code)
	}
	if v := h.Violations(); len(v) != 0 {
		t.Errorf("violations for dial failures: %v", v)
	}
}

// TestThroughput256MiB moves 256 MiB through a CONNECT tunnel and checks
// every byte arrived (the speed is BenchmarkConnectThroughput's business).
func TestThroughput256MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 256 MiB")
	}
	sink := startSink(t)
	dec := newFakeDecider()
	dec.allow("allowed.test", sink, "127.0.0.1")
	h := startHarness(t, dec)
	c, resp := connectTunnel(t, h, fmt.Sprintf("allowed.test:%d", sink))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	d := transfer(t, c, 256<<20)
	t.Logf("256 MiB through CONNECT in %v (%.0f MB/s)", d, float64(256<<20)/d.Seconds()/1e6)
}

// BenchmarkConnectThroughput moves 1 GiB over direct loopback and 1 GiB
// through a CONNECT tunnel per iteration (one connection each, the order
// alternating between iterations so background load falls on both alike) and
// reports both rates and their ratio; the target is connect/direct >= 0.70.
// Run it with -benchtime=Nx: each iteration moves 2 GiB.
func BenchmarkConnectThroughput(b *testing.B) {
	const size = 1 << 30
	sink := startSink(b)
	dec := newFakeDecider()
	dec.allow("allowed.test", sink, "127.0.0.1")
	h := startHarness(b, dec)
	direct := func() time.Duration {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", sink))
		if err != nil {
			b.Fatal(err)
		}
		return transfer(b, c, size)
	}
	connect := func() time.Duration {
		c, resp := connectTunnel(b, h, fmt.Sprintf("allowed.test:%d", sink))
		if resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %s", resp.Status)
		}
		return transfer(b, c, size)
	}
	var td, tc time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			td += direct()
			tc += connect()
		} else {
			tc += connect()
			td += direct()
		}
		n++
	}
	dr := float64(size) * float64(n) / td.Seconds() / 1e6
	cr := float64(size) * float64(n) / tc.Seconds() / 1e6
	b.ReportMetric(dr, "direct-MB/s")
	b.ReportMetric(cr, "connect-MB/s")
	b.ReportMetric(cr/dr, "connect/direct")
	b.ReportMetric(0, "ns/op")
}

// TestDialTriesEveryCheckedAddress: when the first checked address refuses,
// the next one is dialed (CONNECT, SOCKS and plain HTTP alike), and none
// other.
func TestDialTriesEveryCheckedAddress(t *testing.T) {
	up := startUpstream(t)
	dec := deciderFunc(func(host string, port int) Decision {
		if host != "multi.test" || port != up.port {
			return Decision{Reason: "no"}
		}
		return Decision{Allow: true, Host: host, Port: port, Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.1")}}
	})
	var mu sync.Mutex // guards dials
	var dials []string
	var d net.Dialer
	p, err := startProxies(proxyOptions{Decider: dec, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, addr)
		mu.Unlock()
		return d.DialContext(ctx, network, addr)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := &harness{p: p}
	target := fmt.Sprintf("multi.test:%d", up.port)
	c, resp := connectTunnel(t, h, target)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	c.Close()
	c, code := socksConnect(t, h, "multi.test", up.port, p.SOCKSUser(), p.SOCKSPassword())
	if code != socksSucceeded {
		t.Fatalf("SOCKS: %#x", code)
	}
	c.Close()
	r, err := proxyClient(h, nil).Get("http://" + target + "/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("GET: %s", r.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	first, second := fmt.Sprintf("127.0.0.3:%d", up.port), fmt.Sprintf("127.0.0.1:%d", up.port)
	want := []string{first, second, first, second, first, second}
	if strings.Join(dials, " ") != strings.Join(want, " ") {
		t.Errorf("dials %v, want %v", dials, want)
	}
}

// TestViolationJSON: the one violation type marshals under the names a
// shell result and the violations resource show (docs/observability.md, "Violations").
func TestViolationJSON(t *testing.T) {
	b, err := json.Marshal(Violation{Action: actionNetworkOutbound, Target: "example.test:443", Raw: "http CONNECT: no"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"action":"network-outbound","target":"example.test:443","raw":"http CONNECT: no"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
