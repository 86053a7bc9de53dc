package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// unreachableFixture is a session's proxies over the real Allowlist, whose
// names come from a hosts file (the EVENER_MCP_HOSTS mechanism) and never
// from DNS: up.test, gone.test and slow.test name 127.0.0.1; nx.invalid is
// allowed but resolves nowhere (the RFC 6761 "invalid" TLD, answered
// without a query); slowdns.test is allowed but its lookup never answers.
type unreachableFixture struct {
	h                    *harness
	up, closed, blackhol int
}

func startUnreachableFixture(t *testing.T) *unreachableFixture {
	t.Helper()
	f := &unreachableFixture{up: startEcho(t, "127.0.0.1"), blackhol: startBlackhole(t)}
	ln := listenLoopback(t, "127.0.0.1")
	f.closed = portOf(ln)
	ln.Close() // nothing listens there now

	hostsFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostsFile, []byte("127.0.0.1 up.test gone.test slow.test other.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts, err := loadHosts(hostsFile)
	if err != nil {
		t.Fatal(err)
	}
	res := resolverFunc(func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "slowdns.test":
			<-ctx.Done() // a resolver that never answers
			return nil, ctx.Err()
		case "up.test", "gone.test", "slow.test", "other.test", "nx.invalid":
			return hosts.LookupNetIP(ctx, host)
		}
		t.Errorf("unexpected lookup of %q", host)
		return nil, fmt.Errorf("lookup of %q refused by the test", host)
	})
	var patterns []string
	for _, p := range []int{f.up, f.closed, f.blackhol} {
		patterns = append(patterns, fmt.Sprintf("127.0.0.1:%d", p))
	}
	patterns = append(patterns,
		fmt.Sprintf("up.test:%d", f.up), fmt.Sprintf("gone.test:%d", f.closed), fmt.Sprintf("slow.test:%d", f.blackhol),
		fmt.Sprintf("nx.invalid:%d", f.closed), fmt.Sprintf("slowdns.test:%d", f.closed))
	al := mustAllowlist(t, patterns, res)

	h := &harness{}
	p, err := startProxies(proxyOptions{
		Decider: al,
		OnViolation: func(v Violation) {
			h.mu.Lock()
			h.violations = append(h.violations, v)
			h.mu.Unlock()
		},
		DialTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h.p = p
	f.h = h
	return f
}

// TestUnreachableIsNotRefusal: a policy refusal is 403 (SOCKS5 reply 2) and
// a violation; an allowed name that does not resolve is 502 (SOCKS5 4), an
// allowed destination refusing the connection 502 (SOCKS5 5), one whose
// connection times out 504 (SOCKS5 6); none of those is a violation, and
// each says why in the status line and the body, for CONNECT, plain HTTP
// and SOCKS5 alike.
func TestUnreachableIsNotRefusal(t *testing.T) {
	f := startUnreachableFixture(t)
	h := f.h
	cases := []struct {
		name      string
		host      string
		port      int
		status    int
		socks     byte
		why       string // in the status line and the body
		violation bool
	}{
		{"policy: name not allowed", "other.test", f.closed, http.StatusForbidden, socksNotAllowed, "not on the allowlist", true},
		{"policy: port not allowed", "up.test", f.closed, http.StatusForbidden, socksNotAllowed, "is allowed only on", true},
		{"lookup failed", "nx.invalid", f.closed, http.StatusBadGateway, socksHostUnreachable, "nx.invalid did not resolve (no such host)", false},
		{"lookup timed out", "slowdns.test", f.closed, http.StatusBadGateway, socksHostUnreachable, "slowdns.test did not resolve (lookup timed out)", false},
		{"connection refused", "gone.test", f.closed, http.StatusBadGateway, socksConnRefused, fmt.Sprintf("cannot connect to gone.test:%d (connection refused)", f.closed), false},
		{"connection timed out", "slow.test", f.blackhol, http.StatusGatewayTimeout, socksTTLExpired, fmt.Sprintf("cannot connect to slow.test:%d (connection timed out)", f.blackhol), false},
		{"allowed and up", "up.test", f.up, http.StatusOK, socksSucceeded, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := fmt.Sprintf("%s:%d", c.host, c.port)
			before := len(h.Violations())
			start := time.Now()

			// CONNECT.
			conn, resp := connectTunnel(t, h, target)
			body := ""
			if resp.StatusCode != http.StatusOK {
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				body = string(b)
			}
			conn.Close()
			checkAnswer(t, "CONNECT", resp, body, c.status, c.why)

			// Plain HTTP (the echo server answers no HTTP; only refusals
			// and failures are judged here).
			if c.status != http.StatusOK {
				r := dialRaw(t, h)
				fmt.Fprintf(r, "GET http://%s/x HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, r.auth(h))
				resp, body := r.read(t, "GET")
				checkAnswer(t, "plain HTTP", resp, body, c.status, c.why)
			}

			// SOCKS5.
			sc, code := socksConnect(t, h, c.host, c.port, h.p.SOCKSUser(), h.p.SOCKSPassword())
			sc.Close()
			if code != c.socks {
				t.Errorf("SOCKS5 reply %#x, want %#x", code, c.socks)
			}

			got := h.Violations()[before:]
			if c.violation {
				if len(got) != 3 {
					t.Errorf("%d violations for three refusals: %v", len(got), got)
				}
				for _, v := range got {
					if v.Target != target {
						t.Errorf("violation target %q, want %q", v.Target, target)
					}
				}
			} else if len(got) != 0 {
				t.Errorf("violations for a destination the allowlist admits: %v", got)
			}
			// Three attempts, each bounded by the 1s dial (or lookup) timeout.
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// checkAnswer judges one HTTP proxy answer: the status, the reason after the
// standard phrase and in the body, deniedHeader on refusals only, and no
// checked address or dialer text leaking into a failure.
func checkAnswer(t *testing.T, via string, resp *http.Response, body string, status int, why string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: %s (%q), want %d", via, resp.Status, body, status)
		return
	}
	switch {
	case status == http.StatusOK:
	case status == http.StatusForbidden:
		if d := resp.Header.Get(deniedHeader); !strings.Contains(d, why) || !strings.Contains(body, "egress refused") {
			t.Errorf("%s: refusal %s, %s %q, body %q", via, resp.Status, deniedHeader, d, body)
		}
	default:
		if resp.Header.Get(deniedHeader) != "" {
			t.Errorf("%s: %s carries %s: %q", via, resp.Status, deniedHeader, resp.Header.Get(deniedHeader))
		}
		if !strings.Contains(resp.Status, why) || !strings.Contains(body, why) || !strings.Contains(body, "not a policy refusal") {
			t.Errorf("%s: %s, body %q; want %q in both", via, resp.Status, body, why)
		}
		for _, leak := range []string{"127.0.0.1", "dial tcp", ": lookup ", "i/o timeout", "context deadline"} {
			if strings.Contains(resp.Status+body, leak) {
				t.Errorf("%s: %q in %s %q", via, leak, resp.Status, body)
			}
		}
	}
}

// TestInvalidTLDNeverQueried: a name under "invalid" fails as "no such host"
// without a DNS query (RFC 6761), whatever DNS this host has or lacks.
func TestInvalidTLDNeverQueried(t *testing.T) {
	var mu sync.Mutex // guards queried
	var queried []string
	saved := net.DefaultResolver
	t.Cleanup(func() { net.DefaultResolver = saved })
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		queried = append(queried, addr)
		mu.Unlock()
		return nil, errors.New("no DNS in this test")
	}}
	for _, h := range []string{"nx.invalid", "a.b.INVALID", "invalid", "x.invalid."} {
		_, err := defaultResolver{}.LookupNetIP(context.Background(), h)
		var de *net.DNSError
		if err == nil || !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: %v", h, err)
		}
	}
	mu.Lock()
	if len(queried) != 0 {
		t.Errorf("queries sent for invalid names: %v", queried)
	}
	mu.Unlock()
	// The control: another name does reach the (failing) DNS dialer.
	if _, err := (defaultResolver{}).LookupNetIP(context.Background(), "nx.test"); err == nil {
		t.Error("nx.test resolved without DNS")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queried) == 0 {
		t.Error("the control lookup sent no query: the test cannot see queries")
	}
}
