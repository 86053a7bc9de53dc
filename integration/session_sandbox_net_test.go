//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestSessionSandboxEgress (docs/security.md, "Session sandbox"): with the
// opt-in set and the network on, a server session's shell runs in the
// session sandbox (its spawner runs below the server) and has exactly the
// per-call network: an allowed name gets through over plain HTTP, CONNECT
// and SOCKS5 and git's SSH transport goes through SOCKS, while another
// port, another name, every way around the proxies and DNS find nothing;
// a refusal is attributed to the call that caused it.
func TestSessionSandboxEgress(t *testing.T) {
	srv := startLoopback(t)
	ssh := startBannerServer(t)
	other := startLoopback(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "EVENER_MCP_SESSION_SANDBOX=1")
		cfg := egressFixture(t, e,
			fmt.Sprintf("allowed.test:%d", srv.port), fmt.Sprintf("127.0.0.1:%d", srv.port),
			fmt.Sprintf("allowed.test:%d", ssh.port), fmt.Sprintf("127.0.0.1:%d", ssh.port))
		m := e.mcp(t, "--sandbox", "workspace-write", "--config", cfg) // the default network: on
		allowed := fmt.Sprintf(`
curl -sf -m 5 http://allowed.test:%[1]d/ && echo HTTP_OK
curl -sf -m 5 -p http://allowed.test:%[1]d/ && echo CONNECT_OK
curl -sf -m 5 -x "$ALL_PROXY" http://allowed.test:%[1]d/ && echo SOCKS_OK
curl -sf -m 5 http://allowed.test:%[2]d/ >/dev/null && echo OTHER_PORT_REACHED
curl -sf -m 5 http://other.test:%[1]d/ >/dev/null && echo OTHER_NAME_REACHED
GIT_TERMINAL_PROMPT=0 timeout 20 git ls-remote ssh://git@allowed.test:%[3]d/repo.git >/dev/null 2>&1; echo GIT_TRIED
echo DONE`, srv.port, other.port, ssh.port)
		before, otherBefore, sshBefore := srv.hits.Load(), other.hits.Load(), ssh.banns.Load()
		out := m.shellOut(t, allowed)
		for _, want := range []string{"HTTP_OK", "CONNECT_OK", "SOCKS_OK", "GIT_TRIED", "DONE"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s missing:\n%s", want, out)
			}
		}
		if got := srv.hits.Load() - before; got != 3 {
			t.Errorf("the allowed server saw %d requests, want 3", got)
		}
		if strings.Contains(out, "REACHED") || other.hits.Load() != otherBefore {
			t.Errorf("another port or name got through:\n%s", out)
		}
		if ssh.banns.Load() == sshBefore {
			t.Errorf("git over SSH did not reach the server through SOCKS:\n%s", out)
		}
		if len(ownProcs(m.cmd.Process.Pid, "__session-spawner")) == 0 {
			t.Fatal("the shell did not run in the session sandbox (no spawner below the server)")
		}

		around := fmt.Sprintf(`
curl -sf -m 5 --noproxy '*' http://127.0.0.1:%[1]d/ && echo CURL_DIRECT_REACHED
env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy -u ALL_PROXY -u all_proxy curl -sf -m 5 http://127.0.0.1:%[1]d/ && echo CURL_UNSET_REACHED
(exec 3<>/dev/tcp/127.0.0.1/%[1]d && echo DEVTCP_REACHED) 2>/dev/null
/usr/bin/python3 -c 'import socket; socket.create_connection(("127.0.0.1", %[1]d), 3); print("PY_REACHED")' 2>/dev/null
getent hosts example.com && echo DNS_RESOLVED
curl -sf -m 5 http://169.254.169.254/latest/meta-data/ && echo METADATA_REACHED
echo DONE`, srv.port)
		before = srv.hits.Load()
		r := m.call(t, "shell", map[string]any{"command": around})
		out = text(r)
		if !strings.Contains(out, "DONE") {
			t.Fatalf("around the proxies: %s", out)
		}
		for _, leak := range []string{"CURL_DIRECT_REACHED", "CURL_UNSET_REACHED", "DEVTCP_REACHED", "PY_REACHED", "DNS_RESOLVED", "METADATA_REACHED"} {
			if strings.Contains(out, leak) {
				t.Errorf("%s:\n%s", leak, out)
			}
		}
		if srv.hits.Load() != before {
			t.Error("the loopback server was reached around the proxies")
		}
		v, _ := structured(t, r)["violations"].([]any)
		found := false
		for _, x := range v {
			if vm, ok := x.(map[string]any); ok && vm["action"] == "network-outbound" && strings.Contains(fmt.Sprint(vm["target"]), "169.254.169.254") {
				found = true
			}
		}
		if !found {
			t.Errorf("the refused metadata request is not among the call's violations: %v", v)
		}
	})
}
