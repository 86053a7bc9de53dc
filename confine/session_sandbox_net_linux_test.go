//go:build linux

package confine

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeBridge serves two Unix sockets standing in for the session's
// proxies: each connection is answered with the proxy's name and closed.
func fakeBridge(t *testing.T, dir string) EgressBridge {
	t.Helper()
	b := EgressBridge{HTTPSocket: filepath.Join(dir, "http.sock"), SOCKSSocket: filepath.Join(dir, "socks.sock"),
		HTTPUser: "u1", HTTPPassword: "p1", SOCKSUser: "u2", SOCKSPassword: "p2"}
	for sock, name := range map[string]string{b.HTTPSocket: "http-proxy", b.SOCKSSocket: "socks-proxy"} {
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(name + "\n"))
				c.Close()
			}
		}()
	}
	return b
}

// runBash is runSh with bash (its /dev/tcp).
func runBash(t *testing.T, s *Launcher, script string) (string, Result) {
	t.Helper()
	var out bytes.Buffer
	res, err := s.Run(context.Background(), Command{Args: []string{"/bin/bash", "-c", script}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return out.String(), res
}

// sessionLauncherNet is a workspace-write launcher with the network on
// through a fake bridge (fakeBridge), its eligible commands in the session
// sandbox.
func sessionLauncherNet(t *testing.T) (*Launcher, fixture) {
	t.Helper()
	t.Setenv(SessionSandboxEnv, "1")
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	f := newFixtureUnder(t, "/var/tmp")
	p, err := Resolve(f.spec(ModeWorkspaceWrite, NetworkOn), h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	bridgeDir := filepath.Join(f.root, "bridge")
	mustMkdir(t, bridgeDir)
	if err := s.SetEgress(fakeBridge(t, bridgeDir)); err != nil {
		t.Fatal(err)
	}
	s.StartSpawner()
	return s, f
}

// TestSessionSandboxNetworkOn (docs/security.md, "Session sandbox"): with
// the network on, a session's commands run in the session sandbox, reach
// the session's proxies through the loopback ports the relay listens on
// once in the holder, with the environment a per-call spawn gets; nothing
// else is reachable (no interface but the loopback, the host's loopback
// not there); the relay serves every later call of the holder.
func TestSessionSandboxNetworkOn(t *testing.T) {
	s, _ := sessionLauncherNet(t)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hostPort := strconv.Itoa(host.Addr().(*net.TCPAddr).Port)
	probe := `for p in 3128 1080; do (exec 3<>/dev/tcp/127.0.0.1/$p && head -1 <&3) 2>&1 || echo no-$p; done
(exec 3<>/dev/tcp/127.0.0.1/` + hostPort + `) 2>/dev/null && echo reached-host || echo host-unreachable
awk 'NR>2 {sub(":","",$1); print $1}' /proc/net/dev | sort | tr '\n' ' '; echo`
	want := "http-proxy\nsocks-proxy\nhost-unreachable\nlo \n"
	for i := range 2 {
		out, res := runBash(t, s, probe)
		if res.ExitCode != 0 || out != want {
			t.Fatalf("call %d: exit %d: %q, want %q", i, res.ExitCode, out, want)
		}
	}
	b := currentBox(s)
	if b == nil {
		t.Fatal("the command did not run in the session sandbox")
	}
	envScript := `env | grep -iE '^(https?_proxy|all_proxy|no_proxy|GIT_SSH_COMMAND)=' | sort`
	session, _ := runBash(t, s, envScript)
	if currentBox(s) != b {
		t.Error("an unchanged plan built a new holder")
	}
	// The per-call path's environment, from the same launcher with the
	// opt-in off: the same proxies, the same credentials.
	t.Setenv(SessionSandboxEnv, "")
	perCall, res := runBash(t, s, envScript+"; "+probe)
	if res.ExitCode != 0 || perCall != session+want {
		t.Errorf("per call: exit %d\n%s\nsession:\n%s", res.ExitCode, perCall, session)
	}
	if !strings.Contains(session, "HTTP_PROXY=http://u1:p1@127.0.0.1:3128") || !strings.Contains(session, "ALL_PROXY=socks5h://u2:p2@127.0.0.1:1080") {
		t.Errorf("session environment: %q", session)
	}
}

// TestSessionSandboxNetworkShared: with the network on, a session's calls
// share the holder's network namespace (docs/security.md, "Session
// sandbox", says why that is safe): a server one call listens on is
// reachable from another call of the same session, never from the host or
// from another session; a call cannot take over the relay's ports.
func TestSessionSandboxNetworkShared(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	s, f := sessionLauncherNet(t)
	other, _ := sessionLauncherNet(t)
	port := strconv.Itoa(freeHostPort(t))
	server := `import socket
s=socket.socket(); s.bind(("127.0.0.1",` + port + `)); s.listen(4)
open("listening","w").close()
s.settimeout(20)
try:
    for _ in range(2):
        c,_=s.accept(); c.sendall(b"from-the-first-call\n"); c.close()
except Exception as e:
    print("no client", e, flush=True)
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var srvOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, Command{Args: []string{"/usr/bin/python3", "-c", server}, Stdout: &srvOut, Stderr: &srvOut, Timeout: 30 * time.Second})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(f.work, "listening")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Error("the host reached a session sandbox's listener")
	}
	client := `(exec 3<>/dev/tcp/127.0.0.1/` + port + ` && head -1 <&3) 2>/dev/null || echo unreachable`
	if out, _ := runBash(t, other, client); out != "unreachable\n" {
		t.Errorf("another session reached the listener: %q", out)
	}
	if out, _ := runBash(t, s, client); out != "from-the-first-call\n" {
		t.Errorf("the session's second call: %q, want the first call's server", out)
	}
	// The relay's ports are taken: a call cannot listen there in its
	// place (python3's bind fails with EADDRINUSE).
	hijack := `import socket
for p in (3128, 1080):
    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    except Exception:
        pass
    try:
        s.bind(("127.0.0.1", p)); s.listen(1); print("took", p)
    except OSError as e:
        print("refused", p, e.errno)
`
	var out bytes.Buffer
	if _, err := s.Run(ctx, Command{Args: []string{"/usr/bin/python3", "-c", hijack}, Stdout: &out, Stderr: &out, Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "took") {
		t.Errorf("a call took the relay's port: %q", out.String())
	}
	cancel()
	<-done
}

// TestSessionSandboxSessionLoopback: once a session shares its loopback
// (a terminal started), the session sandbox joins the loopback's network
// namespace, as a per-call spawn does: a server a per-call spawn (a
// terminal's) listens on is reachable from the session sandbox's call, and
// the proxies through the loopback holder's relay; the host reaches
// neither.
func TestSessionSandboxSessionLoopback(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	s, f := sessionLauncherNet(t)
	if out, _ := runBash(t, s, "echo before"); out != "before\n" {
		t.Fatalf("before: %q", out)
	}
	before := currentBox(s)
	if err := s.LoopbackAvailable(); err != nil {
		t.Skip(err)
	}
	s.ShareLoopback()
	port := strconv.Itoa(freeHostPort(t))
	server := `import socket
s=socket.socket(); s.bind(("127.0.0.1",` + port + `)); s.listen(4)
open("listening","w").close()
s.settimeout(20)
try:
    c,_=s.accept(); c.sendall(b"from-the-terminal\n"); c.close()
except Exception as e:
    print("no client", e, flush=True)
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The listener in a per-call spawn (the opt-in off for it), as a
	// terminal's command starts.
	t.Setenv(SessionSandboxEnv, "")
	var srvOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, Command{Args: []string{"/usr/bin/python3", "-c", server}, Stdout: &srvOut, Stderr: &srvOut, Timeout: 30 * time.Second})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(f.work, "listening")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the per-call spawn did not listen: %s", srvOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Setenv(SessionSandboxEnv, "1")
	out, res := runBash(t, s, `(exec 3<>/dev/tcp/127.0.0.1/`+port+` && head -1 <&3) 2>/dev/null || echo unreachable
for p in 3128 1080; do (exec 3<>/dev/tcp/127.0.0.1/$p && head -1 <&3) 2>&1 || echo no-$p; done`)
	if res.ExitCode != 0 || out != "from-the-terminal\nhttp-proxy\nsocks-proxy\n" {
		t.Errorf("the session sandbox's call in the session loopback: exit %d, %q", res.ExitCode, out)
	}
	if b := currentBox(s); b == nil || b == before {
		t.Error("the session sandbox was not rebuilt in the session loopback")
	}
	cancel()
	<-done
}
