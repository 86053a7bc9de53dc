package confine

import (
	"strings"
	"testing"
)

// RedactEgress leaves no per-session value (bridge directory, credentials)
// anywhere in what probe prints, keeps the original intact, and picks out the
// relay, the bridge mounts and the proxy variables.
func TestRedactEgress(t *testing.T) {
	b := EgressBridge{
		HTTPSocket: "/var/tmp/evener-egress-123/http.sock", SOCKSSocket: "/var/tmp/evener-egress-123/socks.sock",
		HTTPUser: "0123456789abcdef0123456789abcdef", HTTPPassword: "fedcba9876543210fedcba9876543210",
		SOCKSUser: "00112233445566778899aabbccddeeff", SOCKSPassword: "ffeeddccbbaa99887766554433221100",
	}
	l := Layout{Egress: &EgressMounts{Exe: "/opt/evener/evener-mcp", HTTPSocket: b.HTTPSocket, SOCKSSocket: b.SOCKSSocket}}
	plan := MountPlan{{Kind: MountROBind, Src: "/", Dst: "/", Why: "root"}}
	plan = append(plan, Mount{Kind: MountTmpfs, Dst: "/tmp", Why: "tmp"})
	plan = append(plan,
		Mount{Kind: MountROBind, Src: l.Egress.Exe, Dst: relayExe, Why: "egress relay (this binary)"},
		Mount{Kind: MountROBind, Src: b.HTTPSocket, Dst: relayHTTPSock, Why: "egress: the session's HTTP proxy"},
		Mount{Kind: MountROBind, Src: b.SOCKSSocket, Dst: relaySOCKSSock, Why: "egress: the session's SOCKS5 proxy"})
	var env []string
	env = append(env, "PATH=/usr/bin:/bin", "HOME=/home/u")
	for k, v := range egressEnv(b) {
		env = append(env, k+"="+v)
	}
	args := append([]string{"bwrap", "--unshare-net"}, plan.Args()...)
	args = append(args, "--chdir", "/w", "--", relayExe, RelaySubcommand, "--", "true")
	pr := &Prepared{Path: "/usr/bin/bwrap", Args: args, Env: env, Plan: plan, Sandboxed: true}
	before := strings.Join(pr.Args, " ") + strings.Join(pr.Env, " ")

	red, ep := RedactEgress(pr, b)

	if after := strings.Join(pr.Args, " ") + strings.Join(pr.Env, " "); after != before || pr.Plan[3].Src != b.HTTPSocket {
		t.Error("the original Prepared was changed")
	}
	all := strings.Join(red.Args, "\n") + strings.Join(red.Env, "\n") + red.Plan.String() + red.Profile
	for k, v := range ep.Env {
		all += k + "=" + v + "\n"
	}
	for _, m := range ep.Mounts {
		all += m.Src + m.Dst + "\n"
	}
	for _, secret := range []string{"evener-egress-123", b.HTTPUser, b.HTTPPassword, b.SOCKSUser, b.SOCKSPassword} {
		if strings.Contains(all, secret) {
			t.Errorf("%q left in the redacted output", secret)
		}
	}
	if got := strings.Join(ep.Relay, " "); got != relayExe+" "+RelaySubcommand+" --" {
		t.Errorf("relay %q", got)
	}
	if ep.HTTPProxy != "127.0.0.1:3128" || ep.SOCKSProxy != "127.0.0.1:1080" {
		t.Errorf("proxies %q %q", ep.HTTPProxy, ep.SOCKSProxy)
	}
	if len(ep.Mounts) != 3 || ep.Mounts[1].Src != PerSession+"/http.sock" || ep.Mounts[2].Src != PerSession+"/socks.sock" || ep.Mounts[0].Src != "/opt/evener/evener-mcp" {
		t.Errorf("mounts %+v", ep.Mounts)
	}
	if ep.Env["HTTP_PROXY"] != "http://"+PerSession+":"+PerSession+"@127.0.0.1:3128" || ep.Env["all_proxy"] != "socks5h://"+PerSession+":"+PerSession+"@127.0.0.1:1080" {
		t.Errorf("env %v", ep.Env)
	}
	if _, ok := ep.Env["PATH"]; ok {
		t.Error("a variable that is not a proxy variable in the egress plan")
	}
}
