package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// upstreamServer is a plain HTTP server on 127.0.0.1 that reports what it
// received.
type upstreamServer struct {
	port int
	hits atomic.Int64
	last atomic.Value // http.Header of the last request (with "Host" added)
}

func startUpstream(t *testing.T) *upstreamServer {
	t.Helper()
	ln := listenLoopback(t, "127.0.0.1")
	u := &upstreamServer{port: portOf(ln)}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h := r.Header.Clone()
		h.Set("Host", r.Host)
		h.Set("X-Request-Uri", r.RequestURI)
		u.last.Store(h)
		w.Header().Set("Keep-Alive", "timeout=5") // hop-by-hop: must not reach the client
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprintf(w, "hello %s %s", r.Host, r.URL.RequestURI())
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		sum := sha256.New()
		n, err := io.Copy(sum, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %s", n, hex.EncodeToString(sum.Sum(nil)))
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select { // hold the rest until the client saw the first event
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
		io.WriteString(w, "data: second\n\n")
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		<-r.Context().Done() // until the proxy gives up on it
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *upstreamServer) lastHeader() http.Header {
	h, _ := u.last.Load().(http.Header)
	return h
}

// proxyClient is an http.Client using h's HTTP proxy with the given
// userinfo (the session's credentials when nil).
func proxyClient(h *harness, user *url.Userinfo) *http.Client {
	if user == nil {
		user = url.UserPassword(h.p.HTTPUser(), h.p.HTTPPassword())
	}
	pu := &url.URL{Scheme: "http", Host: h.p.HTTPAddr(), User: user}
	return &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(pu), ExpectContinueTimeout: 5 * time.Second},
		Timeout:   20 * time.Second,
	}
}

// rawConn is a raw client connection to h's HTTP proxy.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, h *harness) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", h.p.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{c, bufio.NewReader(c)}
}

func (r *rawConn) auth(h *harness) string {
	return "Proxy-Authorization: " + basicAuth(h.p.HTTPUser(), h.p.HTTPPassword()) + "\r\n"
}

// roundTrip reads one response (for method) and its whole body.
func (r *rawConn) read(t *testing.T, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(r.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(body)
}

func startHTTPFixture(t *testing.T) (*harness, *upstreamServer, int) {
	up := startUpstream(t)
	echo := startEcho(t, "127.0.0.1")
	dec := newFakeDecider()
	dec.allow("allowed.test", up.port, "127.0.0.1")
	dec.allow("echo.test", echo, "127.0.0.1")
	return startHarness(t, dec), up, echo
}

func TestHTTPConnectAllowed(t *testing.T) {
	h, _, echo := startHTTPFixture(t)
	c, resp := connectTunnel(t, h, fmt.Sprintf("echo.test:%d", echo))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for _, msg := range []string{"hello", strings.Repeat("x", 100000)} {
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo: %v (%d bytes)", err, len(got))
		}
	}
	if d := h.Dials(); len(d) != 1 || d[0] != fmt.Sprintf("127.0.0.1:%d", echo) {
		t.Errorf("dials %v", d)
	}
	if v := h.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestHTTPConnectEarlyData: bytes sent in the same write as the CONNECT
// head (a TLS ClientHello, typically) are not lost.
func TestHTTPConnectEarlyData(t *testing.T) {
	h, _, echo := startHTTPFixture(t)
	r := dialRaw(t, h)
	target := fmt.Sprintf("echo.test:%d", echo)
	fmt.Fprintf(r, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\nearly-bytes", target, target, r.auth(h))
	resp, err := http.ReadResponse(r.br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	got := make([]byte, len("early-bytes"))
	if _, err := io.ReadFull(r.br, got); err != nil || string(got) != "early-bytes" {
		t.Fatalf("early data: %q %v", got, err)
	}
}

func TestHTTPConnectDenied(t *testing.T) {
	h, up, echo := startHTTPFixture(t)
	for _, target := range []string{"denied.test:443", fmt.Sprintf("echo.test:%d", up.port), "169.254.169.254:80", "[::1]:" + fmt.Sprint(echo)} {
		before := len(h.Violations())
		_, resp := connectTunnel(t, h, target)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s: %s", target, resp.Status)
			continue
		}
		host, port, _ := net.SplitHostPort(target)
		reason := resp.Header.Get(deniedHeader)
		if reason != net.JoinHostPort(host, port)+" is not on the test allowlist" {
			t.Errorf("CONNECT %s: %s header %q", target, deniedHeader, reason)
		}
		if !strings.Contains(string(body), "refused") {
			t.Errorf("CONNECT %s: body %q", target, body)
		}
		v := h.Violations()
		if len(v) != before+1 {
			t.Fatalf("CONNECT %s: violations %v", target, v)
		}
		want := Violation{Action: "network-outbound", Target: net.JoinHostPort(host, port), Raw: "http CONNECT: " + target + " is not on the test allowlist"}
		if target[0] == '[' {
			want.Raw = "http CONNECT: " + net.JoinHostPort(host, port) + " is not on the test allowlist"
		}
		if v[len(v)-1] != want {
			t.Errorf("CONNECT %s: violation %+v, want %+v", target, v[len(v)-1], want)
		}
	}
	if d := h.Dials(); len(d) != 0 {
		t.Errorf("a refused CONNECT dialed %v", d)
	}
}

// TestHTTPDeniedReasonCannotInjectHeaders: the reason is one escaped line.
func TestHTTPDeniedReasonCannotInjectHeaders(t *testing.T) {
	p, err := startProxies(proxyOptions{Decider: deciderFunc(func(host string, port int) Decision {
		return Decision{Reason: "bad\r\nX-Injected: 1\r\n\r\nHTTP/1.1 200 OK"}
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, _ := net.Dial("tcp", p.HTTPAddr())
	defer c.Close()
	fmt.Fprintf(c, "CONNECT x.test:443 HTTP/1.1\r\nProxy-Authorization: %s\r\n\r\n", basicAuth(p.HTTPUser(), p.HTTPPassword()))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 403 || resp.Header.Get("X-Injected") != "" || strings.ContainsAny(resp.Header.Get(deniedHeader), "\r\n") {
		t.Errorf("%s %v", resp.Status, resp.Header)
	}
}

type deciderFunc func(host string, port int) Decision

func (f deciderFunc) Decide(_ context.Context, host string, port int) Decision { return f(host, port) }

func TestHTTPPlainGet(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	resp, err := proxyClient(h, nil).Get(fmt.Sprintf("http://allowed.test:%d/path?q=1", up.port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("hello allowed.test:%d /path?q=1", up.port) {
		t.Fatalf("%s %q", resp.Status, body)
	}
	if resp.Header.Get("X-Upstream") != "yes" || resp.Header.Get("Keep-Alive") != "" {
		t.Errorf("response headers %v", resp.Header)
	}
	got := up.lastHeader()
	for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Forwarded-For", "Forwarded", "Via"} {
		if v := got.Get(k); v != "" {
			t.Errorf("upstream received %s: %q", k, v)
		}
	}
	if got.Get("X-Request-Uri") != "/path?q=1" {
		t.Errorf("upstream request-URI %q", got.Get("X-Request-Uri"))
	}
	if d := h.Dials(); len(d) != 1 || d[0] != fmt.Sprintf("127.0.0.1:%d", up.port) {
		t.Errorf("dials %v", d)
	}
}

// TestHTTPHopByHopStripped: Proxy-Authorization, Connection and the
// headers it names, Keep-Alive, Upgrade-less TE do not reach the upstream.
func TestHTTPHopByHopStripped(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	r := dialRaw(t, h)
	fmt.Fprintf(r, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\n%sConnection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: 30\r\nTe: trailers\r\nProxy-Connection: keep-alive\r\nX-Kept: k\r\n\r\n",
		up.port, up.port, r.auth(h))
	resp, body := r.read(t, "GET")
	if resp.StatusCode != 200 {
		t.Fatalf("%s %q", resp.Status, body)
	}
	got := up.lastHeader()
	for _, k := range []string{"Proxy-Authorization", "X-Secret", "Keep-Alive", "Te", "Proxy-Connection"} {
		if v := got.Get(k); v != "" {
			t.Errorf("upstream received %s: %q", k, v)
		}
	}
	if got.Get("X-Kept") != "k" {
		t.Errorf("end-to-end header lost: %v", got)
	}
	if _, ok := got["User-Agent"]; ok {
		t.Errorf("the proxy added a User-Agent: %v", got["User-Agent"])
	}
}

func TestHTTPAuthRequired(t *testing.T) {
	h, up, echo := startHTTPFixture(t)
	wrong := []*url.Userinfo{
		url.UserPassword(h.p.HTTPUser(), "wrong"),
		url.UserPassword("wrong", h.p.HTTPPassword()),
		url.UserPassword(h.p.SOCKSUser(), h.p.SOCKSPassword()), // the other proxy's
	}
	for _, u := range wrong {
		resp, err := proxyClient(h, u).Get(fmt.Sprintf("http://allowed.test:%d/", up.port))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusProxyAuthRequired || !strings.HasPrefix(resp.Header.Get("Proxy-Authenticate"), "Basic") {
			t.Errorf("%v: %s %v", u, resp.Status, resp.Header)
		}
	}
	// No credentials at all, plain and CONNECT, on one connection.
	r := dialRaw(t, h)
	fmt.Fprintf(r, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", up.port, up.port)
	if resp, _ := r.read(t, "GET"); resp.StatusCode != http.StatusProxyAuthRequired || resp.Header.Get("Proxy-Authenticate") == "" {
		t.Errorf("no credentials: %s", resp.Status)
	}
	fmt.Fprintf(r, "CONNECT echo.test:%d HTTP/1.1\r\nProxy-Authorization: Bearer x\r\n\r\n", echo)
	if resp, _ := r.read(t, "CONNECT"); resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("CONNECT with a bearer token: %s", resp.Status)
	}
	// And then the right ones on the same connection.
	fmt.Fprintf(r, "CONNECT echo.test:%d HTTP/1.1\r\n%s\r\n", echo, r.auth(h))
	if resp, err := http.ReadResponse(r.br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Errorf("CONNECT after 407: %v %v", resp, err)
	}
	if up.hits.Load() != 0 || len(h.dec.Calls()) != 1 {
		t.Errorf("unauthenticated requests reached the upstream (%d) or the decider (%v)", up.hits.Load(), h.dec.Calls())
	}
}

// TestHTTPKeepAliveDecidedPerRequest: a second request on the same client
// connection is decided again; the first does not open the way.
func TestHTTPKeepAliveDecidedPerRequest(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	r := dialRaw(t, h)
	get := func(host string) string {
		return fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, host, r.auth(h))
	}
	allowed := fmt.Sprintf("allowed.test:%d", up.port)
	denied := fmt.Sprintf("denied.test:%d", up.port)

	io.WriteString(r, get(allowed))
	if resp, body := r.read(t, "GET"); resp.StatusCode != 200 || !strings.HasPrefix(body, "hello allowed.test") {
		t.Fatalf("first: %s %q", resp.Status, body)
	}
	io.WriteString(r, get(denied))
	resp, _ := r.read(t, "GET")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(deniedHeader) == "" {
		t.Fatalf("second (denied host, same connection): %s", resp.Status)
	}
	// Pipelined: allowed then denied in one write.
	io.WriteString(r, get(allowed)+get(denied))
	if resp, _ := r.read(t, "GET"); resp.StatusCode != 200 {
		t.Errorf("pipelined first: %s", resp.Status)
	}
	if resp, _ := r.read(t, "GET"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("pipelined second: %s", resp.Status)
	}
	if got := up.hits.Load(); got != 2 {
		t.Errorf("upstream saw %d requests, want 2", got)
	}
	calls := h.dec.Calls()
	if len(calls) != 4 || calls[1] != denied || calls[3] != denied {
		t.Errorf("decider calls %v", calls)
	}
	if v := h.Violations(); len(v) != 2 || v[0].Target != denied {
		t.Errorf("violations %v", v)
	}
}

// TestHTTPHostHeaderMismatch: a Host header naming another host than the
// request line is refused; other spellings of the same host are not.
func TestHTTPHostHeaderMismatch(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	uri := fmt.Sprintf("http://allowed.test:%d/", up.port)
	for _, tc := range []struct {
		uri, host string
		ok        bool
	}{
		{uri, "evil.test", false},
		{uri, fmt.Sprintf("evil.test:%d", up.port), false},
		{uri, "allowed.test", false}, // port 80
		{uri, fmt.Sprintf("allowed.test:%d", up.port+1), false},
		{uri, fmt.Sprintf("allowed.test.evil.test:%d", up.port), false},
		{uri, "", false},
		{uri, fmt.Sprintf("ALLOWED.test.:%d", up.port), true},
		{uri, fmt.Sprintf("allowed.test:%d", up.port), true},
		{fmt.Sprintf("http://denied.test:%d/", up.port), fmt.Sprintf("allowed.test:%d", up.port), false},
	} {
		r := dialRaw(t, h)
		hits, calls := up.hits.Load(), len(h.dec.Calls())
		fmt.Fprintf(r, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", tc.uri, tc.host, r.auth(h))
		resp, body := r.read(t, "GET")
		if tc.ok {
			if resp.StatusCode != 200 {
				t.Errorf("Host %q for %s: %s %q", tc.host, tc.uri, resp.Status, body)
			}
			continue
		}
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get(deniedHeader), "Host header") {
			t.Errorf("Host %q for %s: %s %v", tc.host, tc.uri, resp.Status, resp.Header)
		}
		if up.hits.Load() != hits || len(h.dec.Calls()) != calls {
			t.Errorf("Host %q for %s: reached the upstream or the decider", tc.host, tc.uri)
		}
	}
	// Two Host headers are malformed.
	r := dialRaw(t, h)
	fmt.Fprintf(r, "GET %s HTTP/1.1\r\nHost: allowed.test:%d\r\nHost: evil.test\r\n%s\r\n", uri, up.port, r.auth(h))
	if resp, _ := r.read(t, "GET"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("two Host headers: %s", resp.Status)
	}
}

func TestHTTPMalformedAndUnsupported(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	for name, tc := range map[string]struct {
		req  string
		want int
	}{
		"origin form":      {"GET / HTTP/1.1\r\nHost: allowed.test\r\n%s\r\n", 400},
		"https absolute":   {"GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n%s\r\n", 400},
		"userinfo":         {"GET http://allowed.test@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n%s\r\n", 400},
		"upgrade":          {fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\nConnection: upgrade\r\nUpgrade: websocket\r\n", up.port, up.port) + "%s\r\n", 400},
		"CONNECT no port":  {"CONNECT allowed.test HTTP/1.1\r\n%s\r\n", 400},
		"CONNECT userinfo": {"CONNECT a@evil.test:443 HTTP/1.1\r\n%s\r\n", 400},
		"CONNECT port 0":   {"CONNECT allowed.test:0 HTTP/1.1\r\n%s\r\n", 400},
		"CONNECT big port": {"CONNECT allowed.test:65536 HTTP/1.1\r\n%s\r\n", 400},
		"bad request line": {"GARBAGE\r\n%s\r\n", 400},
		"bad header":       {"GET http://allowed.test/ HTTP/1.1\r\nBad Header\r\n%s\r\n", 400},
		"huge head":        {"GET http://allowed.test/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 70000) + "\r\n%s\r\n", 431},
	} {
		r := dialRaw(t, h)
		fmt.Fprintf(r, tc.req, r.auth(h))
		resp, err := http.ReadResponse(r.br, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", name, resp.Status, tc.want)
		}
	}
	if up.hits.Load() != 0 || len(h.Dials()) != 0 {
		t.Errorf("a malformed request went out: hits %d dials %v", up.hits.Load(), h.Dials())
	}
}

// TestHTTPSlowHeadIsBounded: a client that stops mid-head holds nothing
// past Close (the 30s head timeout itself is a constant).
func TestHTTPSlowHeadIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the head timeout")
	}
	// The timeout is a constant (30s); check the mechanism on the idle side
	// instead of waiting: a partial head keeps the server waiting, and Close
	// still ends the connection at once.
	h, _, _ := startHTTPFixture(t)
	r := dialRaw(t, h)
	io.WriteString(r, "GET http://allowed.test/ HTTP/1.1\r\nHost: allo")
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { _, err := r.br.ReadByte(); done <- err }()
	h.p.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("got a response to a partial head")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a connection stuck in a head")
	}
}

func TestHTTPPostBodies(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	c := proxyClient(h, nil)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	sum := sha256.Sum256(payload)
	want := fmt.Sprintf("%d %s", len(payload), hex.EncodeToString(sum[:]))
	target := fmt.Sprintf("http://allowed.test:%d/upload", up.port)
	for name, mk := range map[string]func() *http.Request{
		"content-length": func() *http.Request {
			req, _ := http.NewRequest("POST", target, bytes.NewReader(payload))
			return req
		},
		"chunked": func() *http.Request {
			req, _ := http.NewRequest("POST", target, io.MultiReader(bytes.NewReader(payload)))
			return req
		},
		"expect-100": func() *http.Request {
			req, _ := http.NewRequest("PUT", target, bytes.NewReader(payload))
			req.Header.Set("Expect", "100-continue")
			return req
		},
	} {
		for i := range 2 { // twice: the second reuses the connection
			resp, err := c.Do(mk())
			if err != nil {
				t.Fatalf("%s #%d: %v", name, i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != want {
				t.Errorf("%s #%d: %s %q", name, i, resp.Status, body)
			}
		}
	}
}

// TestHTTPHeadThenGet: a HEAD response has no body, so the next response on
// the connection is framed correctly.
func TestHTTPHeadThenGet(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	r := dialRaw(t, h)
	host := fmt.Sprintf("allowed.test:%d", up.port)
	fmt.Fprintf(r, "HEAD http://%s/ HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, host, r.auth(h))
	if resp, body := r.read(t, "HEAD"); resp.StatusCode != 200 || body != "" {
		t.Fatalf("HEAD: %s %q", resp.Status, body)
	}
	fmt.Fprintf(r, "GET http://%s/x HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, host, r.auth(h))
	if resp, body := r.read(t, "GET"); resp.StatusCode != 200 || body != "hello "+host+" /x" {
		t.Fatalf("GET after HEAD: %s %q", resp.Status, body)
	}
	// HTTP/1.0: answered, then closed.
	fmt.Fprintf(r, "GET http://%s/y HTTP/1.0\r\nHost: %s\r\n%s\r\n", host, host, r.auth(h))
	if resp, body := r.read(t, "GET"); resp.StatusCode != 200 || body != "hello "+host+" /y" {
		t.Fatalf("HTTP/1.0 GET: %s %q", resp.Status, body)
	}
	if _, err := r.br.ReadByte(); err != io.EOF {
		t.Errorf("HTTP/1.0 connection left open: %v", err)
	}
}

// TestHTTPStreamingResponse: an event stream reaches the client as it is
// produced, not when it ends.
func TestHTTPStreamingResponse(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	resp, err := proxyClient(h, nil).Get(fmt.Sprintf("http://allowed.test:%d/stream", up.port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("%q %v", line, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("first event took %v: the response was buffered", d)
	}
}

// TestHTTPCloseEndsPendingRequest: Close does not wait for an upstream that
// never answers; the client gets an error and the upstream request ends.
func TestHTTPCloseEndsPendingRequest(t *testing.T) {
	h, up, _ := startHTTPFixture(t)
	errc := make(chan error, 1)
	go func() {
		resp, err := proxyClient(h, nil).Get(fmt.Sprintf("http://allowed.test:%d/hang", up.port))
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("got %s", resp.Status)
		}
		errc <- err
	}()
	for i := 0; up.hits.Load() == 0 && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if up.hits.Load() == 0 {
		t.Fatal("the request never reached the upstream")
	}
	closed := make(chan struct{})
	go func() { h.p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a hanging upstream")
	}
	select {
	case err := <-errc:
		// Either the connection is cut, or the proxy answers 502 for the
		// upstream it just cancelled before cutting it; both end the wait.
		// A success would mean the hanging upstream answered.
		if err == nil || (strings.Contains(err.Error(), "got ") && !strings.Contains(err.Error(), "502")) {
			t.Errorf("client: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client is still waiting after Close")
	}
}
