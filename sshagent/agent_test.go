//go:build linux

package sshagent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// fixture is a real ssh-agent holding two keys, and this package's agent
// in front of it.
type fixture struct {
	dir      string
	real     string // the real agent's socket
	a, b     string // the two keys' files (private; .pub beside)
	fpA, fpB string
	mu       sync.Mutex // guards events
	events   []Event
}

func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	for _, p := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed (scripts/deps.sh installs openssh-client)", p)
		}
	}
	dir, err := os.MkdirTemp("", "sshagent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fixture{dir: dir, real: filepath.Join(dir, "real.sock"), a: filepath.Join(dir, "a"), b: filepath.Join(dir, "b")}
	for _, k := range []string{f.a, f.b} {
		if out, err := run(t, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", filepath.Base(k), "-f", k); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	ag := exec.Command("ssh-agent", "-D", "-a", f.real)
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Process.Kill(); ag.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(f.real); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ssh-agent did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := run(t, []string{"SSH_AUTH_SOCK=" + f.real}, "ssh-add", f.a, f.b); err != nil {
		t.Fatalf("ssh-add: %v: %s", err, out)
	}
	f.fpA, f.fpB = fingerprint(t, f.a+".pub"), fingerprint(t, f.b+".pub")
	return f
}

func fingerprint(t *testing.T, pub string) string {
	t.Helper()
	b, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(k)
}

func (f *fixture) listen(t *testing.T, p Policy) *Server {
	t.Helper()
	p.Upstream = f.real
	if p.Keys == nil {
		p.Keys = []string{f.fpA}
	}
	if p.SignKeys == nil {
		p.SignKeys = []string{f.fpA}
	}
	if p.Namespaces == nil {
		p.Namespaces = []string{"git"}
	}
	p.Record = func(e Event) {
		f.mu.Lock()
		f.events = append(f.events, e)
		f.mu.Unlock()
	}
	s, err := Listen(f.dir, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// refusal is the last refused event, or fails.
func (f *fixture) refusal(t *testing.T, op string) Event {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.events) - 1; i >= 0; i-- {
		if e := f.events[i]; e.Op == op && e.Refused() {
			return e
		}
	}
	t.Fatalf("no refused %s among %+v", op, f.events)
	return Event{}
}

// TestRealPrograms: ssh-add and ssh-keygen against the session's agent.
func TestRealPrograms(t *testing.T) {
	f := newFixture(t)
	s := f.listen(t, Policy{})
	env := []string{"SSH_AUTH_SOCK=" + s.Socket()}

	out, err := run(t, env, "ssh-add", "-l")
	if err != nil || !strings.Contains(out, f.fpA) || strings.Contains(out, f.fpB) {
		t.Errorf("ssh-add -l lists %q (%v); want only %s", out, err, f.fpA)
	}
	if out, err := run(t, env, "ssh-add", "-D"); err == nil {
		t.Errorf("ssh-add -D succeeded: %s", out)
	}
	f.refusal(t, "remove-all")
	if out, err := run(t, env, "ssh-add", f.b); err == nil {
		t.Errorf("ssh-add of a key succeeded: %s", out)
	}
	f.refusal(t, "add")
	if out, err := run(t, env, "ssh-add", "-x"); err == nil {
		t.Errorf("ssh-add -x (lock) succeeded: %s", out)
	}
	// The real agent still holds both keys.
	if out, _ := run(t, []string{"SSH_AUTH_SOCK=" + f.real}, "ssh-add", "-l"); !strings.Contains(out, f.fpB) {
		t.Errorf("the real agent lost a key: %s", out)
	}

	msg := filepath.Join(f.dir, "msg")
	os.WriteFile(msg, []byte("hello\n"), 0o600)
	if out, err := run(t, env, "ssh-keygen", "-Y", "sign", "-n", "git", "-f", f.a+".pub", msg); err != nil {
		t.Fatalf("ssh-keygen -Y sign -n git: %v: %s", err, out)
	}
	signers := filepath.Join(f.dir, "allowed")
	pub, _ := os.ReadFile(f.a + ".pub")
	os.WriteFile(signers, append([]byte("me@example.com namespaces=\"git\" "), pub...), 0o600)
	if out, err := run(t, nil, "sh", "-c", "ssh-keygen -Y verify -f "+signers+" -I me@example.com -n git -s "+msg+".sig < "+msg); err != nil {
		t.Errorf("the signature does not verify: %v: %s", err, out)
	}
	os.Remove(msg + ".sig")
	if out, err := run(t, env, "ssh-keygen", "-Y", "sign", "-n", "file", "-f", f.a+".pub", msg); err == nil {
		t.Errorf("ssh-keygen -Y sign -n file succeeded: %s", out)
	}
	if e := f.refusal(t, "sign"); e.Purpose != "sshsig" || e.Namespace != "file" || !strings.Contains(e.Reason, `"file"`) {
		t.Errorf("refusal %+v", e)
	}
}

// client is a raw agent client on the session's socket.
func client(t *testing.T, s *Server) agent.ExtendedAgent {
	t.Helper()
	c, err := net.Dial("unix", s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return agent.NewClient(c)
}

func pubKey(t *testing.T, path string) ssh.PublicKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// userauthData is what ssh asks the agent to sign for a login.
func userauthData(sid []byte, key ssh.PublicKey) []byte {
	var b []byte
	b = appendString(b, sid)
	b = append(b, msgUserAuthRequest)
	b = appendString(b, []byte("git"))
	b = appendString(b, []byte("ssh-connection"))
	b = appendString(b, []byte(methodPublicKey))
	b = append(b, 1)
	b = appendString(b, []byte(key.Type()))
	return appendString(b, key.Marshal())
}

// bind sends a session-bind for a host key the test holds.
func bind(t *testing.T, c agent.ExtendedAgent, host ssh.Signer, sid []byte) error {
	t.Helper()
	sig, err := host.Sign(rand.Reader, sid)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	b = appendString(b, host.PublicKey().Marshal())
	b = appendString(b, sid)
	b = appendString(b, ssh.Marshal(sig))
	b = append(b, 0)
	_, err = c.Extension(SessionBind, b)
	return err
}

// TestUserauth: a login signature needs a binding to a known, allowed host.
func TestUserauth(t *testing.T) {
	f := newFixture(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	host, _ := ssh.NewSignerFromKey(priv)
	_, priv2, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(priv2)
	_, priv3, _ := ed25519.GenerateKey(rand.Reader)
	hashed, _ := ssh.NewSignerFromKey(priv3)
	kh := filepath.Join(f.dir, "known_hosts")
	line := func(h string, k ssh.PublicKey) string {
		return h + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + "\n"
	}
	hashedName := "|1|" + hashFor(t, "[git.test]:2222")
	os.WriteFile(kh, []byte("# comment\n"+line("[git.test]:2222,git-alias.test", host.PublicKey())+
		line("other.test", other.PublicKey())+line(hashedName, hashed.PublicKey())), 0o600)
	allowed := func(_ context.Context, h string, port int) (bool, string) {
		return h == "git.test" && port == 2222, ""
	}
	s := f.listen(t, Policy{KnownHosts: kh, HostAllowed: allowed, Candidates: []HostPort{{"git.test", 2222}}})
	keyA, keyB := pubKey(t, f.a+".pub"), pubKey(t, f.b+".pub")
	sid := bytes.Repeat([]byte{7}, 32)

	c := client(t, s)
	if _, err := c.Sign(keyA, userauthData(sid, keyA)); err == nil {
		t.Error("an unbound login was signed")
	} else if e := f.refusal(t, "sign"); !strings.Contains(e.Reason, "not bound") {
		t.Errorf("refusal %+v", e)
	}
	if err := bind(t, c, host, sid); err != nil {
		t.Fatalf("session-bind: %v", err)
	}
	sig, err := c.Sign(keyA, userauthData(sid, keyA))
	if err != nil {
		t.Fatalf("a bound login to an allowed host was refused: %v; %+v", err, f.events)
	}
	if err := keyA.Verify(userauthData(sid, keyA), sig); err != nil {
		t.Errorf("signature: %v", err)
	}
	if _, err := c.Sign(keyA, userauthData(bytes.Repeat([]byte{8}, 32), keyA)); err == nil {
		t.Error("a login for another session id was signed")
	}
	if _, err := c.Sign(keyB, userauthData(sid, keyB)); err == nil {
		t.Error("an unlisted key signed")
	}

	c2 := client(t, s)
	if err := bind(t, c2, other, sid); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Sign(keyA, userauthData(sid, keyA)); err == nil {
		t.Error("a login to a host off the allowlist was signed")
	} else if e := f.refusal(t, "sign"); !strings.Contains(e.Reason, "other.test") {
		t.Errorf("refusal %+v", e)
	}

	c3 := client(t, s)
	if err := bind(t, c3, hashed, sid); err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Sign(keyA, userauthData(sid, keyA)); err != nil {
		t.Errorf("a hashed known_hosts entry of an allowed host: %v; %+v", err, f.refusal(t, "sign"))
	}

	// A binding whose signature is not the host key's is refused.
	c4 := client(t, s)
	var b []byte
	b = appendString(b, host.PublicKey().Marshal())
	b = appendString(b, sid)
	badSig, _ := other.Sign(rand.Reader, sid)
	b = appendString(b, ssh.Marshal(badSig))
	b = append(b, 0)
	if _, err := c4.Extension(SessionBind, b); err == nil {
		t.Error("a forged session-bind was accepted")
	}
	if _, err := c4.Extension("query", nil); err == nil {
		t.Error("another extension was accepted")
	}
	f.refusal(t, "extension")
	// Data that is neither SSHSIG nor a login.
	if _, err := c.Sign(keyA, []byte("arbitrary bytes")); err == nil {
		t.Error("arbitrary data was signed")
	}
}

func hashFor(t *testing.T, host string) string {
	t.Helper()
	// knownhosts.HashHostname normalizes nothing: the host is given as
	// known_hosts writes it.
	return strings.TrimPrefix(knownhosts.HashHostname(host), "|1|")
}

// TestRateLimit: past max_per_minute, operations are refused.
func TestRateLimit(t *testing.T) {
	f := newFixture(t)
	s := f.listen(t, Policy{MaxPerMinute: 3})
	c := client(t, s)
	for i := 0; i < 3; i++ {
		if _, err := c.List(); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	if _, err := c.List(); err == nil {
		t.Error("the fourth listing in a minute was served")
	}
	if e := f.refusal(t, "list"); !strings.Contains(e.Reason, "rate limit") {
		t.Errorf("refusal %+v", e)
	}
}

// TestConnBound: at most MaxConns connections at once; Close ends them.
func TestConnBound(t *testing.T) {
	f := newFixture(t)
	s := f.listen(t, Policy{})
	var conns []net.Conn
	for i := 0; i < MaxConns+1; i++ {
		c, err := net.Dial("unix", s.Socket())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	last := conns[MaxConns]
	last.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := last.Read(make([]byte, 1)); err == nil {
		t.Error("a connection past the bound was served")
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err == nil {
		t.Error("a connection outlived Close")
	}
	if _, err := os.Stat(filepath.Dir(s.Socket())); !os.IsNotExist(err) {
		t.Errorf("socket directory left: %v", err)
	}
}

// TestCloseEndsUpstreamWait: Close does not wait for a real agent that
// never answers (one asking its user to confirm a key, say).
func TestCloseEndsUpstreamWait(t *testing.T) {
	dir := t.TempDir()
	up := filepath.Join(dir, "up.sock")
	ln, err := net.Listen("unix", up)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // never answers
		}
	}()
	s, err := Listen(dir, Policy{Upstream: up, Keys: []string{"SHA256:x"}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s)
	go c.List()
	time.Sleep(200 * time.Millisecond)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the real agent")
	}
}
