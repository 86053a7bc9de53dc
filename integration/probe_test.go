//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// perSession is what probe shows for the bridge directory and credentials.
const perSession = "<per-session>"

// leakedSecret matches what must never reach probe's output: a bridge
// directory (evener-egress-*) or a proxy credential (32 hex digits).
var leakedSecret = regexp.MustCompile(`evener-egress-|[0-9a-f]{32}`)

// TestProbeDefaults: `evener-mcp probe` with no flags (the README's first
// command, scripts/run.sh) exits 0 and prints the host report and, the
// network being on by default, the egress part of the plan as a command
// would get it, per-session values redacted; nothing is left behind.
func TestProbeDefaults(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		r := e.run(t, "probe")
		if r.code != 0 {
			t.Fatalf("probe with the defaults: %s", r)
		}
		for _, want := range []string{
			"host:     linux/", "bwrap:    ", "policy:   workspace-write, network on",
			"egress:   through the session's allowlist proxies",
			"relay:  /tmp/.evener-egress/evener-mcp __egress-relay --",
			"bridge: /tmp/.evener-egress/http.sock <- " + perSession + "/http.sock",
			"bridge: /tmp/.evener-egress/socks.sock <- " + perSession + "/socks.sock",
			"HTTP_PROXY=http://" + perSession + ":" + perSession + "@127.0.0.1:3128",
			"ALL_PROXY=socks5h://" + perSession + ":" + perSession + "@127.0.0.1:1080",
			"mount plan (for a command in the workdir):",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q missing:\n%s", want, r.stdout)
			}
		}
		if !strings.Contains(startupLine(r), "network on via allowlist proxies") {
			t.Errorf("startup line: %s", r.stderr)
		}
		if m := leakedSecret.FindString(r.stdout + r.stderr); m != "" {
			t.Errorf("a per-session value leaked: %q", m)
		}
		checkNothingLeft(t, e)
	})
}

// TestProbeJSON: `probe --json` with the network on carries the egress plan
// (relay, the two bridge sockets, the proxy variables, the allowlist), the
// same redaction in the mount plan and the argv; with the network off it
// carries none.
func TestProbeJSON(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		r := e.run(t, "probe", "--json")
		if r.code != 0 {
			t.Fatalf("probe --json: %s", r)
		}
		var rep struct {
			Policy struct {
				Mode, Network string
			}
			Egress *struct {
				Relay      []string `json:"relay"`
				HTTPProxy  string   `json:"http_proxy"`
				SOCKSProxy string   `json:"socks_proxy"`
				Mounts     []struct{ Src, Dst string }
				Env        map[string]string `json:"env"`
				Allowlist  []string          `json:"allowlist"`
			} `json:"egress"`
			MountPlan []struct{ Src, Dst string } `json:"mount_plan"`
			Argv      []string                    `json:"bwrap_argv"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		if rep.Policy.Network != "on" || rep.Policy.Mode != "workspace-write" {
			t.Errorf("policy %+v", rep.Policy)
		}
		eg := rep.Egress
		if eg == nil {
			t.Fatalf("no egress plan with the network on:\n%s", r.stdout)
		}
		if strings.Join(eg.Relay, " ") != "/tmp/.evener-egress/evener-mcp __egress-relay --" {
			t.Errorf("relay %q", eg.Relay)
		}
		if eg.HTTPProxy != "127.0.0.1:3128" || eg.SOCKSProxy != "127.0.0.1:1080" {
			t.Errorf("proxies %q %q", eg.HTTPProxy, eg.SOCKSProxy)
		}
		sockets := map[string]string{}
		for _, m := range eg.Mounts {
			sockets[m.Dst] = m.Src
		}
		if sockets["/tmp/.evener-egress/http.sock"] != perSession+"/http.sock" ||
			sockets["/tmp/.evener-egress/socks.sock"] != perSession+"/socks.sock" ||
			!strings.HasSuffix(sockets["/tmp/.evener-egress/evener-mcp"], "/evener-mcp-inside") {
			t.Errorf("egress mounts %+v", eg.Mounts)
		}
		for _, k := range []string{"HTTP_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
			if !strings.Contains(eg.Env[k], perSession+":"+perSession+"@127.0.0.1:") {
				t.Errorf("%s=%q", k, eg.Env[k])
			}
		}
		if v, ok := eg.Env["NO_PROXY"]; !ok || v != "" {
			t.Errorf("NO_PROXY=%q (set: %v)", v, ok)
		}
		if !strings.Contains(eg.Env["GIT_SSH_COMMAND"], "__egress-connect") {
			t.Errorf("GIT_SSH_COMMAND=%q", eg.Env["GIT_SSH_COMMAND"])
		}
		if len(eg.Allowlist) == 0 {
			t.Error("no allowlist in the egress plan")
		}
		inPlan := false
		for _, m := range rep.MountPlan {
			inPlan = inPlan || m.Src == perSession+"/http.sock"
		}
		if !inPlan || !strings.Contains(strings.Join(rep.Argv, " "), "--ro-bind "+perSession+"/socks.sock /tmp/.evener-egress/socks.sock") {
			t.Errorf("the mount plan or argv lacks the redacted bridge:\n%v\n%v", rep.MountPlan, rep.Argv)
		}
		if m := leakedSecret.FindString(r.stdout + r.stderr); m != "" {
			t.Errorf("a per-session value leaked: %q", m)
		}

		off := e.run(t, "probe", "--json", "--sandbox-net", "off")
		if off.code != 0 {
			t.Fatalf("probe --json --sandbox-net off: %s", off)
		}
		var offRep map[string]any
		if err := json.Unmarshal([]byte(off.stdout), &offRep); err != nil {
			t.Fatal(err)
		}
		if _, ok := offRep["egress"]; ok || strings.Contains(off.stdout, ".evener-egress") {
			t.Errorf("an egress plan with the network off:\n%s", off.stdout)
		}
		checkNothingLeft(t, e)
	})
}

// checkNothingLeft: the probe's scratch, bridge directory and sockets are
// gone from the TMPDIR it was given.
func checkNothingLeft(t *testing.T, e *env) {
	t.Helper()
	ents, err := os.ReadDir(e.root + "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		t.Errorf("left in TMPDIR: %s", d.Name())
	}
}
