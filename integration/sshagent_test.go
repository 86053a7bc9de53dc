//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The brokered SSH agent (docs/ssh-agent.md) with the real programs: a real
// ssh-agent holding two keys, git commit -S with gpg.format = ssh, ssh-add,
// ssh-keygen -Y sign, and ssh and git over SSH to two local sshd through
// the session's SOCKS proxy; as root and as the unprivileged user, over
// stdio and HTTP, from shell and from a terminal.

// sshFixture is one identity's SSH world.
type sshFixture struct {
	e          *env
	user       string
	keyA, keyB string // private key files; .pub beside
	fpA, fpB   string
	real       string // the real agent's socket
	portA      int    // sshd A: its host key is known as [allowed.test]:portA
	portB      int    // sshd B: its host key is known only as [other.test]:portB
	remote     string // a bare repository reached over SSH
	cfg        string // the server's --config
}

func needSSH(t *testing.T) {
	t.Helper()
	for _, p := range []string{"ssh", "ssh-agent", "ssh-add", "ssh-keygen", "/usr/sbin/sshd", "git"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs openssh-client and openssh-server)", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the test's sshd logs users in: run as root")
	}
}

// asIdentity runs a program as the fixture's identity.
func (f *sshFixture) asIdentity(cmd *exec.Cmd) {
	if !f.e.id.root && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(f.e.id.uid), Gid: uint32(f.e.id.gid)}}
	}
}

func mustRun(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	return string(out)
}

func keygen(t *testing.T, path string) string {
	t.Helper()
	mustRun(t, exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", filepath.Base(path), "-f", path))
	out := mustRun(t, exec.Command("ssh-keygen", "-lf", path+".pub"))
	return strings.Fields(out)[1]
}

func readPub(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	return f[0] + " " + f[1]
}

// startSSHD starts an sshd on a free loopback port with its own host key
// and config; it logs in with the keys in authorized.
func startSSHD(t *testing.T, dir, authorized string) (port int, hostKey string) {
	t.Helper()
	mustMkdir(t, dir)
	_ = os.MkdirAll("/run/sshd", 0o755) // its privilege-separation directory
	hk := filepath.Join(dir, "host_key")
	keygen(t, hk)
	port = freePort(t)
	cfg := filepath.Join(dir, "sshd_config")
	writeFile(t, cfg, fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile none
StrictModes no
UsePAM yes
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthenticationMethods publickey
`, port, hk, authorized))
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd on %d:\n%s", port, log.String())
		}
	})
	if !waitFor(10*time.Second, func() bool { return dialable(port) }) {
		t.Fatalf("sshd did not listen:\n%s", log.String())
	}
	return port, readPub(t, hk)
}

func newSSHFixture(t *testing.T, e *env) *sshFixture {
	t.Helper()
	f := &sshFixture{e: e, user: "root"}
	if !e.id.root {
		f.user = testUser
	}
	keys := filepath.Join(e.root, "keys")
	mustMkdir(t, keys)
	f.keyA, f.keyB = filepath.Join(keys, "a"), filepath.Join(keys, "b")
	f.fpA, f.fpB = keygen(t, f.keyA), keygen(t, f.keyB)
	// sshd's files are root's, outside the fixture handed to the identity.
	hostsDir, err := os.MkdirTemp(baseDir, "sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostsDir) })
	os.Chmod(hostsDir, 0o755) // sshd reads authorized_keys as the user
	authorized := filepath.Join(hostsDir, "authorized_keys")
	writeFile(t, authorized, readPub(t, f.keyA)+"\n"+readPub(t, f.keyB)+"\n")
	var hostA, hostB string
	f.portA, hostA = startSSHD(t, filepath.Join(hostsDir, "a"), authorized)
	f.portB, hostB = startSSHD(t, filepath.Join(hostsDir, "b"), authorized)

	// The real agent, run as the identity (ssh-agent serves its own uid
	// only), holding both keys; its socket lies where a sandbox could see
	// it, so only the mask keeps it out.
	agentDir := filepath.Join(e.root, "agent")
	mustMkdir(t, agentDir)
	e.chown(t)
	f.real = filepath.Join(agentDir, "real.sock")
	ag := exec.Command("ssh-agent", "-D", "-a", f.real)
	f.asIdentity(ag)
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Process.Kill(); ag.Wait() })
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(f.real); return err == nil }) {
		t.Fatal("ssh-agent did not listen")
	}
	add := exec.Command("ssh-add", f.keyA, f.keyB)
	add.Env = []string{"SSH_AUTH_SOCK=" + f.real, "PATH=/usr/bin:/bin"}
	f.asIdentity(add)
	mustRun(t, add)

	// The user's known_hosts (the agent's): A's host key is allowed.test's,
	// B's is other.test's. The sandbox's ssh has its own file in the
	// worktree, which names B by its address.
	knownHosts := filepath.Join(e.root, "known_hosts")
	writeFile(t, knownHosts, fmt.Sprintf("[allowed.test]:%d %s\n[other.test]:%d %s\n", f.portA, hostA, f.portB, hostB))
	initRepo(t, e.work)
	writeFile(t, filepath.Join(e.work, "kh"), fmt.Sprintf("[allowed.test]:%d %s\n[127.0.0.1]:%d %s\n", f.portA, hostA, f.portB, hostB))
	pubA, _ := os.ReadFile(f.keyA + ".pub")
	writeFile(t, filepath.Join(e.work, "signing.pub"), string(pubA))
	writeFile(t, filepath.Join(e.work, "allowed_signers"), `s@example.test namespaces="git" `+string(pubA))
	writeFile(t, filepath.Join(e.work, "raw_agent.py"), rawAgentClient)
	hostGit(t, e.work, "add", ".")
	hostGit(t, e.work, "commit", "-qm", "fixture")
	f.remote = filepath.Join(e.root, "remote.git")
	hostGit(t, e.root, "init", "-q", "--bare", f.remote)

	hosts := filepath.Join(e.root, "hosts")
	writeFile(t, hosts, "127.0.0.1 allowed.test other.test\n")
	e.extra = append(e.extra, "EVENER_MCP_HOSTS="+hosts, "SSH_AUTH_SOCK="+f.real)
	f.cfg = filepath.Join(e.root, "ssh.toml")
	writeFile(t, f.cfg, fmt.Sprintf(`allow_domains = ["allowed.test:%[1]d", "127.0.0.1:%[1]d", "127.0.0.1:%[2]d"]

[ssh_agent]
keys = [%[3]q]
sign_keys = [%[3]q]
known_hosts = %[4]q
`, f.portA, f.portB, f.keyA+".pub", knownHosts))
	return f
}

// rawAgentClient lists the agent's first key and asks it to sign a login
// for a session it never bound: what a program that skips ssh's binding
// would do.
const rawAgentClient = `import os, socket, struct
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["SSH_AUTH_SOCK"])
def recv(n):
    d = b""
    while len(d) < n:
        c = s.recv(n - len(d))
        if not c:
            raise SystemExit("closed")
        d += c
    return d
def call(b):
    s.sendall(struct.pack(">I", len(b)) + b)
    return recv(struct.unpack(">I", recv(4))[0])
def st(x):
    return struct.pack(">I", len(x)) + x
r = call(b"\x0b")
bl = struct.unpack(">I", r[5:9])[0]
blob = r[9:9 + bl]
typ = blob[4:4 + struct.unpack(">I", blob[:4])[0]]
data = st(b"\x07" * 32) + b"\x32" + st(b"git") + st(b"ssh-connection") + st(b"publickey") + b"\x01" + st(typ) + st(blob)
r = call(b"\x0d" + st(blob) + st(data) + struct.pack(">I", 0))
print("RAW_SIGNED" if r[0] == 14 else "RAW_REFUSED")
`

// sshCmd is the sandbox's ssh: the proxy command the session sets, and the
// worktree's known hosts.
const sshCmd = `S="$GIT_SSH_COMMAND -o UserKnownHostsFile=$PWD/kh -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10"`

func (f *sshFixture) signScript() string {
	return `ssh-add -l; echo "LIST=$?"
ssh-add -D; echo "DELETE=$?"
SSH_AUTH_SOCK=` + f.real + ` ssh-add -l; echo "REAL=$?"
echo data > msg.txt; ssh-keygen -Y sign -n file -f signing.pub msg.txt; echo "FILESIG=$?"
git -c gpg.format=ssh -c user.signingkey=$PWD/signing.pub -c user.name=S -c user.email=s@example.test commit -q -S --allow-empty -m signed; echo "COMMIT=$?"
git -c gpg.ssh.allowedSignersFile=$PWD/allowed_signers verify-commit HEAD; echo "VERIFY=$?"
`
}

func (f *sshFixture) loginScript() string {
	return sshCmd + fmt.Sprintf(`
eval "$S -p %[1]d %[3]s@allowed.test echo SSH_ALLOWED_OK"; echo "SSH_A=$?"
eval "$S -p %[2]d %[3]s@127.0.0.1 echo SSH_OTHER_OK"; echo "SSH_B=$?"
GIT_SSH_COMMAND="$S" git push -q ssh://%[3]s@allowed.test:%[1]d%[4]s HEAD:refs/heads/main; echo "PUSH=$?"
/usr/bin/python3 raw_agent.py
`, f.portA, f.portB, f.user, f.remote)
}

func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: no %q in:\n%s", what, w, out)
		}
	}
}

func avoidLines(t *testing.T, what, out string, avoid ...string) {
	t.Helper()
	for _, w := range avoid {
		if strings.Contains(out, w) {
			t.Errorf("%s: %q in:\n%s", what, w, out)
		}
	}
}

// agentViolations are the ssh-agent violations of a shell result.
func agentViolations(t *testing.T, r *mcp.CallToolResult) []string {
	t.Helper()
	vs, _ := structured(t, r)["violations"].([]any)
	var out []string
	for _, v := range vs {
		m, _ := v.(map[string]any)
		if m["action"] == "ssh-agent" {
			out = append(out, fmt.Sprint(m["raw"]))
		}
	}
	return out
}

func (f *sshFixture) checkSign(t *testing.T, what string, r *mcp.CallToolResult) {
	t.Helper()
	out, _ := structured(t, r)["output"].(string)
	wantLines(t, what, out, f.fpA, "LIST=0", "DELETE=1", "FILESIG=255", "COMMIT=0", `Good "git" signature`, "VERIFY=0")
	avoidLines(t, what, out, f.fpB, "REAL=0")
	joined := strings.Join(agentViolations(t, r), "\n")
	wantLines(t, what+" violations", joined, "remove-all", `namespace "file" is not allowed`)
}

func (f *sshFixture) checkLogin(t *testing.T, what string, r *mcp.CallToolResult) {
	t.Helper()
	out, _ := structured(t, r)["output"].(string)
	wantLines(t, what, out, "SSH_ALLOWED_OK", "SSH_A=0", "SSH_B=255", "PUSH=0", "RAW_REFUSED")
	avoidLines(t, what, out, "SSH_OTHER_OK", "RAW_SIGNED")
	joined := strings.Join(agentViolations(t, r), "\n")
	wantLines(t, what+" violations", joined, fmt.Sprintf("belongs to other.test:%d, not on this session's allowlist", f.portB), "not bound")
}

// TestSSHAgentStdio: over stdio, from the shell and a terminal.
func TestSSHAgentStdio(t *testing.T) {
	needSSH(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		f := newSSHFixture(t, e)
		m := e.mcp(t, "--config", f.cfg)
		if p := m.preamble(t); !strings.Contains(p, "SSH agent: $SSH_AUTH_SOCK is this session's own agent") {
			t.Errorf("the preamble does not tell of the agent:\n%s", p)
		}
		f.checkSign(t, "sign", m.call(t, "shell", map[string]any{"command": f.signScript()}))
		f.checkLogin(t, "login", m.call(t, "shell", map[string]any{"command": f.loginScript()}))
		if out := hostGit(t, f.remote, "log", "--format=%G? %s", "-1", "main"); !strings.Contains(out, "signed") {
			t.Errorf("the pushed branch: %q", out)
		}

		// The violations resource has them too.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req := mcp.ReadResourceRequest{}
		req.Params.URI = violationsURI
		res, err := m.c.ReadResource(ctx, req)
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("violations resource: %v", err)
		}
		var doc struct {
			Violations []violationEntry `json:"violations"`
		}
		json.Unmarshal([]byte(res.Contents[0].(mcp.TextResourceContents).Text), &doc)
		n := 0
		for _, v := range doc.Violations {
			if v.Action == "ssh-agent" {
				n++
			}
		}
		if n < 4 {
			t.Errorf("the violations resource holds %d ssh-agent violations: %+v", n, doc.Violations)
		}

		// A terminal's programs see the agent too.
		tid := m.termStart(t, map[string]any{"command": "bash -c '" + sshCmd + fmt.Sprintf(`; ssh-add -l; eval "$S -p %d %s@allowed.test echo TERM_SSH_OK"; sleep 1'`, f.portA, f.user)})
		out := m.termUntil(t, tid, "TERM_SSH_OK")
		wantLines(t, "terminal", out, f.fpA)

		// Every operation is in the audit log, with the key and purpose.
		raw, _ := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
		var audit strings.Builder
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.Contains(l, `"tool":"ssh-agent"`) {
				audit.WriteString(l + "\n")
			}
		}
		wantLines(t, "audit", audit.String(), `"tool":"ssh-agent"`, `"decision":"ssh-agent-allowed","rule":"sign:sshsig"`,
			`"decision":"ssh-agent-refused","rule":"sign:userauth"`, `"rule":"session-bind"`, f.fpA)
		avoidLines(t, "audit", audit.String(), f.real, e.root)
	})
}

// TestSSHAgentHTTP: over HTTP, and a session without the option sees no
// agent at all.
func TestSSHAgentHTTP(t *testing.T) {
	needSSH(t)
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		f := newSSHFixture(t, e)
		srv := e.serve(t, "--config", f.cfg)
		m := srv.mustConnect(t, clientOpts{})
		f.checkSign(t, "http sign", m.call(t, "shell", map[string]any{"command": f.signScript()}))
		f.checkLogin(t, "http login", m.call(t, "shell", map[string]any{"command": f.loginScript()}))

		// Without the option: no agent, and the real one is masked.
		r := e.run(t, "exec", "--sandbox", "workspace-write", "--", "/bin/bash", "-c",
			`echo "SOCK=${SSH_AUTH_SOCK:-none}"; ls /tmp/.evener-ssh-agent 2>/dev/null && echo AGENT_DIR; SSH_AUTH_SOCK=`+f.real+` ssh-add -l; echo "REAL=$?"`)
		wantLines(t, "no option", r.stdout, "SOCK=none", "REAL=2")
		avoidLines(t, "no option", r.stdout, "AGENT_DIR", f.fpA)
	})
}
