//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// loopbackServer is an HTTP server on 127.0.0.1 that also counts raw TCP
// connections (for the SSH-banner case).
type loopbackServer struct {
	port  int
	hits  atomic.Int64
	banns atomic.Int64
}

func startLoopback(t *testing.T) *loopbackServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &loopbackServer{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		fmt.Fprintf(w, "LOOPBACK-OK %s\n", r.Host)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// startBannerServer accepts raw TCP and counts clients that speak SSH.
func startBannerServer(t *testing.T) *loopbackServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &loopbackServer{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(c, "SSH-2.0-evener-test\r\n")
				line, _ := bufio.NewReader(c).ReadString('\n')
				if strings.HasPrefix(line, "SSH-2.0-") {
					s.banns.Add(1)
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

// egressEnv writes a hosts file pinning the test names to loopback and a
// config allowing exactly what the case needs.
func egressFixture(t *testing.T, e *env, allow ...string) string {
	t.Helper()
	hosts := filepath.Join(e.root, "hosts")
	writeFile(t, hosts, "127.0.0.1 allowed.test other.test\n")
	e.extra = append(e.extra, "EVENER_MCP_HOSTS="+hosts)
	cfg := filepath.Join(e.root, "egress.toml")
	var quoted []string
	for _, a := range allow {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	writeFile(t, cfg, "allow_domains = ["+strings.Join(quoted, ", ")+"]\n")
	return cfg
}

// TestEgressNoRoute: with the network on, every way around the proxies
// finds no route, and the proxies refuse what the allowlist does not name.
func TestEgressNoRoute(t *testing.T) {
	srv := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := egressFixture(t, e)
		target := fmt.Sprintf("127.0.0.1:%d", srv.port)
		script := fmt.Sprintf(`
curl -sf -m 5 http://%[1]s/ && echo CURL_PROXY_REACHED
curl -sf -m 5 --noproxy '*' http://%[1]s/ && echo CURL_DIRECT_REACHED
env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy -u ALL_PROXY -u all_proxy curl -sf -m 5 http://%[1]s/ && echo CURL_UNSET_REACHED
wget -q -T 5 -O - http://%[1]s/ && echo WGET_REACHED
(exec 3<>/dev/tcp/127.0.0.1/%[2]d && echo DEVTCP_REACHED) 2>/dev/null
perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr=>"127.0.0.1:%[2]d",Timeout=>3) and print "PERL_REACHED\n"'
/usr/bin/python3 -c 'import socket; socket.create_connection(("127.0.0.1", %[2]d), 3); print("PY_REACHED")' 2>/dev/null
# DNS through whatever resolv.conf names: the namespace has no route to it.
getent hosts example.com && echo DNS_RESOLVED
/usr/bin/python3 -c 'import socket; socket.getaddrinfo("example.com", 443); print("PY_DNS_RESOLVED")' 2>/dev/null
echo DONE`, target, srv.port)
		for _, mode := range modes {
			before := srv.hits.Load()
			r := e.run(t, "exec", "--sandbox", mode, "--sandbox-net", "on", "--config", cfg, "--", "/bin/bash", "-c", script)
			if !strings.Contains(r.stdout, "DONE") {
				t.Fatalf("%s: %s", mode, r)
			}
			for _, leak := range []string{"CURL_PROXY_REACHED", "CURL_DIRECT_REACHED", "CURL_UNSET_REACHED", "WGET_REACHED", "DEVTCP_REACHED", "PERL_REACHED", "PY_REACHED", "PY_DNS_RESOLVED", "DNS_RESOLVED", "LOOPBACK-OK"} {
				if strings.Contains(r.stdout, leak) {
					t.Errorf("%s: %s", mode, leak)
				}
			}
			if srv.hits.Load() != before {
				t.Errorf("%s: the loopback server was reached", mode)
			}
			if !strings.Contains(r.stderr, "egress refused") {
				t.Errorf("%s: the refusal was not reported:\n%s", mode, r.stderr)
			}
			if line := startupLine(r); !strings.Contains(line, "network on via allowlist proxies") {
				t.Errorf("%s: startup line %q", mode, line)
			}
		}
	})
}

// TestEgressSpellings: every loopback and metadata spelling is refused
// through both proxies, whatever the allowlist says about names.
func TestEgressSpellings(t *testing.T) {
	srv := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := egressFixture(t, e, "allowed.test", "*.allowed.test")
		p := srv.port
		hosts := []string{"127.1", "2130706433", "0x7f.1", "0177.0.0.1", "0x7f000001", "[::ffff:127.0.0.1]", "[::1]", "localhost", "localhost.", "LOCALHOST",
			"169.254.169.254", "2852039166", "0xa9.0xfe.0xa9.0xfe", "[::ffff:169.254.169.254]", "[fd00:ec2::254]", "metadata.google.internal", "metadata.google.internal.",
			"allowed.test.evil.test", "evilallowed.test", "0.0.0.0", "[::]"}
		var script strings.Builder
		for i, h := range hosts {
			fmt.Fprintf(&script, "curl -sf -m 5 http://%s:%d/ >/dev/null && echo HTTP_REACHED_%d\n", h, p, i)
			fmt.Fprintf(&script, "curl -sf -m 5 -x \"$ALL_PROXY\" http://%s:%d/ >/dev/null && echo SOCKS_REACHED_%d\n", h, p, i)
			fmt.Fprintf(&script, "curl -sf -m 5 -p http://%s:%d/ >/dev/null && echo CONNECT_REACHED_%d\n", h, p, i)
		}
		// allowed.test names 127.0.0.1, which is not allowed literally.
		fmt.Fprintf(&script, "curl -sf -m 5 http://allowed.test:%d/ >/dev/null && echo REBIND_REACHED\n", p)
		script.WriteString("echo DONE\n")
		before := srv.hits.Load()
		r := e.run(t, "exec", "--sandbox", "workspace-write", "--sandbox-net", "on", "--config", cfg, "--", "/bin/bash", "-c", script.String())
		if !strings.Contains(r.stdout, "DONE") {
			t.Fatal(r)
		}
		if strings.Contains(r.stdout, "REACHED") || srv.hits.Load() != before {
			t.Errorf("a spelling got through:\n%s", r.stdout)
		}
		if n := strings.Count(r.stderr, "egress refused"); n < len(hosts) {
			t.Errorf("only %d refusals reported for %d spellings", n, len(hosts))
		}
	})
}

// TestEgressAllowed: a name allowed with its port (resolving to a loopback
// address that is itself allowed literally) gets through over plain HTTP,
// CONNECT and SOCKS5; the same name on another port does not; git's SSH
// transport goes through SOCKS.
func TestEgressAllowed(t *testing.T) {
	srv := startLoopback(t)
	ssh := startBannerServer(t)
	other := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := egressFixture(t, e,
			fmt.Sprintf("allowed.test:%d", srv.port), fmt.Sprintf("127.0.0.1:%d", srv.port),
			fmt.Sprintf("allowed.test:%d", ssh.port), fmt.Sprintf("127.0.0.1:%d", ssh.port))
		script := fmt.Sprintf(`
curl -sf -m 5 http://allowed.test:%[1]d/ && echo HTTP_OK
curl -sf -m 5 -p http://allowed.test:%[1]d/ && echo CONNECT_OK
curl -sf -m 5 -x "$ALL_PROXY" http://allowed.test:%[1]d/ && echo SOCKS_OK
curl -sf -m 5 http://allowed.test:%[2]d/ >/dev/null && echo OTHER_PORT_REACHED
curl -sf -m 5 http://other.test:%[1]d/ >/dev/null && echo OTHER_NAME_REACHED
GIT_TERMINAL_PROMPT=0 timeout 20 git ls-remote ssh://git@allowed.test:%[3]d/repo.git >/dev/null 2>&1; echo GIT_TRIED
echo DONE`, srv.port, other.port, ssh.port)
		before, otherBefore, sshBefore := srv.hits.Load(), other.hits.Load(), ssh.banns.Load()
		r := e.run(t, "exec", "--sandbox", "workspace-write", "--sandbox-net", "on", "--config", cfg, "--", "/bin/bash", "-c", script)
		for _, want := range []string{"HTTP_OK", "CONNECT_OK", "SOCKS_OK", "GIT_TRIED", "DONE"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s missing:\n%s", want, r)
			}
		}
		if got := srv.hits.Load() - before; got != 3 {
			t.Errorf("the allowed server saw %d requests, want 3", got)
		}
		if strings.Contains(r.stdout, "REACHED") || other.hits.Load() != otherBefore {
			t.Errorf("another port or name got through:\n%s", r.stdout)
		}
		if ssh.banns.Load() == sshBefore {
			t.Errorf("git over SSH did not reach the server through SOCKS:\n%s", r)
		}
	})
}

// TestEgressShellViolations: over MCP, a refused connection is listed in
// the violations of the shell call that caused it, and in the audit log.
func TestEgressShellViolations(t *testing.T) {
	srv := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := egressFixture(t, e)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "on", "--config", cfg)
		r := m.call(t, "shell", map[string]any{"command": fmt.Sprintf("curl -sf -m 5 http://169.254.169.254/latest/meta-data/; curl -sf -m 5 http://127.0.0.1:%d/; true", srv.port)})
		v, _ := structured(t, r)["violations"].([]any)
		var targets []string
		for _, x := range v {
			vm := x.(map[string]any)
			if vm["action"] == "network-outbound" {
				targets = append(targets, vm["target"].(string))
			}
		}
		joined := strings.Join(targets, " ")
		if !strings.Contains(joined, "169.254.169.254") || !strings.Contains(joined, "127.0.0.1") {
			t.Errorf("network violations not attributed to the call: %v", v)
		}
		b, err := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
		if err != nil || !strings.Contains(string(b), `"tool":"egress"`) || !strings.Contains(string(b), "169.254.169.254") {
			t.Errorf("egress refusals missing from the audit log: %v\n%s", err, b)
		}
		if !strings.Contains(m.init.Instructions, "network: on") {
			t.Errorf("preamble: %s", m.init.Instructions)
		}
	})
}

// TestSplitBinaries: evener-mcp hands the MCP modes to evener-mcp-server
// beside it; without it, the MCP mode fails with one clear line while
// exec still works, and the server alone still relays egress (it carries
// the same hidden helper).
func TestSplitBinaries(t *testing.T) {
	srv := startLoopback(t)
	alone := filepath.Join(baseDir, "alone")
	mustMkdir(t, alone)
	copyBin := func(name string) string {
		b, err := os.ReadFile(filepath.Join(baseDir, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(alone, name)
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	small := copyBin("evener-mcp")
	server := copyBin("evener-mcp-server")
	e := newEnv(t, identities(t)[0])
	cfg := egressFixture(t, e, fmt.Sprintf("allowed.test:%d", srv.port), fmt.Sprintf("127.0.0.1:%d", srv.port))
	saved := binPath
	defer func() { binPath = saved }()

	// The server binary on its own: its shell relays through itself.
	must(t, os.Remove(small))
	binPath = server
	m := e.mcp(t, "--sandbox", "workspace-write", "--config", cfg)
	r := m.call(t, "shell", map[string]any{"command": fmt.Sprintf("curl -sf -m 5 http://allowed.test:%d/ && echo VIA_SERVER", srv.port)})
	if !strings.Contains(text(r), "VIA_SERVER") {
		t.Errorf("relay through the server binary: %s", text(r))
	}

	// evener-mcp on its own: exec works, the MCP mode says what is missing.
	small = copyBin("evener-mcp")
	must(t, os.Remove(server))
	binPath = small
	res := e.run(t, "exec", "--sandbox", "workspace-write", "--config", cfg, "--", "/bin/sh", "-c", fmt.Sprintf("curl -sf -m 5 http://allowed.test:%d/ && echo VIA_SMALL", srv.port))
	if !strings.Contains(res.stdout, "VIA_SMALL") {
		t.Errorf("exec from evener-mcp alone: %s", res)
	}
	res = e.run(t, "--sandbox", "workspace-write")
	if res.code != 2 || !strings.Contains(res.stderr, "evener-mcp-server must be installed beside evener-mcp") {
		t.Errorf("MCP mode without the server binary: %s", res)
	}
}

// socksReplyScript is a SOCKS5 client (RFC 1928/1929) that prints the reply
// code the session's proxy gives for each host:port argument, reading the
// proxy and its credentials from ALL_PROXY as the sandbox's tools do.
const socksReplyScript = `import os, socket, sys, urllib.parse
u = urllib.parse.urlsplit(os.environ["ALL_PROXY"])
def exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return b
        b += c
    return b
def reply(host, port):
    s = socket.create_connection((u.hostname, u.port), 10)
    s.settimeout(15)
    s.sendall(b"\x05\x01\x02")
    if exact(s, 2) != b"\x05\x02":
        return -1
    user, pw = urllib.parse.unquote(u.username).encode(), urllib.parse.unquote(u.password).encode()
    s.sendall(bytes([1, len(user)]) + user + bytes([len(pw)]) + pw)
    if exact(s, 2) != b"\x01\x00":
        return -2
    h = host.encode()
    s.sendall(bytes([5, 1, 0, 3, len(h)]) + h + port.to_bytes(2, "big"))
    r = exact(s, 10)
    return r[1] if len(r) == 10 else -3
for a in sys.argv[1:]:
    h, p = a.rsplit(":", 1)
    print("SOCKS %s %d" % (a, reply(h, int(p))))
`

// TestEgressUnreachable: through the built binary and bubblewrap, a policy
// refusal (a name not on the allowlist) is 403 over plain HTTP and CONNECT
// and SOCKS5 reply 2, and is reported; an allowed name that does not
// resolve (nx.invalid: never sent to DNS) is 502 and SOCKS5 4; an allowed
// name whose address has nothing listening is 502 and SOCKS5 5. Neither
// failure is reported as a refusal.
func TestEgressUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := egressFixture(t, e, fmt.Sprintf("allowed.test:%d", port), fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("nx.invalid:%d", port))
		writeFile(t, filepath.Join(e.work, "socks_reply.py"), socksReplyScript)
		cases := []struct {
			host          string
			http, connect string
			socks         int
			line          string // in the plain-HTTP status line
		}{
			{"other.test", "403", "403", 2, "Forbidden"},
			{"nx.invalid", "502", "502", 4, "nx.invalid did not resolve (no such host)"},
			{"allowed.test", "502", "502", 5, fmt.Sprintf("cannot connect to allowed.test:%d (connection refused)", port)},
		}
		var script strings.Builder
		var targets []string
		for _, c := range cases {
			tg := fmt.Sprintf("%s:%d", c.host, port)
			targets = append(targets, tg)
			fmt.Fprintf(&script, "curl -s -o /dev/null -m 10 -w 'HTTP %[1]s %%{http_code}\\n' http://%[1]s/\n", tg)
			fmt.Fprintf(&script, "echo \"LINE %[1]s $(curl -s -i -m 10 http://%[1]s/ | head -n1 | tr -d '\\r')\"\n", tg)
			fmt.Fprintf(&script, "curl -s -o /dev/null -m 10 -p -w 'CONNECT %[1]s %%{http_connect}\\n' http://%[1]s/\n", tg)
		}
		fmt.Fprintf(&script, "/usr/bin/python3 socks_reply.py %s\necho DONE\n", strings.Join(targets, " "))
		r := e.run(t, "exec", "--sandbox", "workspace-write", "--sandbox-net", "on", "--config", cfg, "--", "/bin/bash", "-c", script.String())
		if !strings.Contains(r.stdout, "DONE") {
			t.Fatal(r)
		}
		for i, c := range cases {
			tg := targets[i]
			for _, want := range []string{
				fmt.Sprintf("HTTP %s %s\n", tg, c.http),
				fmt.Sprintf("CONNECT %s %s\n", tg, c.connect),
				fmt.Sprintf("SOCKS %s %d\n", tg, c.socks),
			} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("want %q:\n%s", want, r)
				}
			}
			if l := fmt.Sprintf("LINE %s HTTP/1.1 %s ", tg, c.http); !strings.Contains(r.stdout, l) || !strings.Contains(r.stdout, c.line) {
				t.Errorf("want a status line %q... with %q:\n%s", l, c.line, r.stdout)
			}
		}
		// Four refusals of other.test (plain HTTP twice, CONNECT, SOCKS5);
		// nothing for the allowed names.
		if n := strings.Count(r.stderr, "egress refused other.test:"); n != 4 {
			t.Errorf("%d refusals of other.test reported, want 4:\n%s", n, r.stderr)
		}
		if n := strings.Count(r.stderr, "egress refused"); n != 4 {
			t.Errorf("an allowed destination reported as refused:\n%s", r.stderr)
		}
	})
}
