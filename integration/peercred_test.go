//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// thirdUser is a second unprivileged account: the user a server started by
// testUser must refuse.
const thirdUser = "evener-peer"

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"peer-test","version":"1"}}}`

// account looks up (creating it when missing) a local account.
func account(t *testing.T, name string) runAs {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/bash", name).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v: %s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return runAs{name: name, uid: uid, gid: gid}
}

// asUser runs a client program as who (root when who.root), with a clean
// environment (no proxy variables), bounded in time; it returns stdout.
func asUser(t *testing.T, who runAs, name string, args ...string) (string, error) {
	t.Helper()
	return asUserIn(t, who, nil, name, args...)
}

func asUserIn(t *testing.T, who runAs, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "LANG=C"}
	cmd.Dir = "/"
	if !who.root {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(who.uid), Gid: uint32(who.gid), Groups: []uint32{}}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s as %s: %w: %s", name, who.name, err, errb.String())
	}
	return out.String(), err
}

// curlStatus POSTs body to url as who with curl and returns the HTTP status.
func curlStatus(t *testing.T, who runAs, method, url, body string, hdr ...string) int {
	t.Helper()
	args := []string{"-sS", "--noproxy", "*", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", "-X", method,
		"-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream"}
	for _, h := range hdr {
		args = append(args, "-H", h)
	}
	if body != "" {
		args = append(args, "--data", body)
	}
	out, err := asUser(t, who, "curl", append(args, url)...)
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("curl printed %q", out)
	}
	return code
}

// auditRecords are the records of the fixture's audit log with the given
// decision.
func auditRecords(t *testing.T, e *env, decision string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil && r["decision"] == decision {
			out = append(out, r)
		}
	}
	return out
}

// TestPeerCredHTTP: loopback is not an identity. A server started by root
// refuses another local user's client (403, and an audit record) and
// serves root's; a server started by an unprivileged user serves that user
// and root, and refuses a third user. A client that sends its request and
// closes before the server looks at it (its socket is then listed as uid 0)
// is refused too, and a page on another localhost port (an Origin header)
// drives nothing.
func TestPeerCredHTTP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as several local users")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	other := account(t, testUser)
	third := account(t, thirdUser)
	root := runAs{name: "root", root: true}

	t.Run("root server", func(t *testing.T) {
		e := newEnv(t, root)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		if code := curlStatus(t, other, "POST", srv.url, initializeBody); code != 403 {
			t.Errorf("another user's initialize on root's server: %d, want 403", code)
		}
		if code := curlStatus(t, other, "GET", "http://"+srv.addr+"/healthz", ""); code != 403 {
			t.Errorf("another user's /healthz: %d, want 403", code)
		}
		refused := auditRecords(t, e, "refused")
		if len(refused) < 2 || refused[0]["session"] != "serve" || refused[0]["rule"] != "peer-uid" ||
			!strings.Contains(fmt.Sprint(refused[0]["command"]), "uid "+strconv.Itoa(other.uid)) {
			t.Errorf("audit records of the refusals: %v", refused)
		}
		if !strings.Contains(srv.stderr.String(), "refused a connection") {
			t.Errorf("no warning on stderr:\n%s", srv.stderr.String())
		}

		// Send the request and close at once: the client's socket is an
		// orphan by the time the server looks, which the kernel lists as
		// uid 0. It must not pass for root. The padding (under the
		// server's 1 MiB header limit) makes the close come before the
		// server has read the whole header block, so before it looks.
		before := len(auditRecords(t, e, "session-start"))
		var req strings.Builder
		req.WriteString("POST /mcp HTTP/1.1\r\nHost: " + srv.addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n")
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&req, "X-Pad-%d: %s\r\n", i, strings.Repeat("a", 8000))
		}
		req.WriteString("Content-Length: " + strconv.Itoa(len(initializeBody)) + "\r\nConnection: close\r\n\r\n" + initializeBody)
		host, port, _ := strings.Cut(srv.addr, ":")
		const tries = 20
		for i := 0; i < tries; i++ {
			script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%s && cat >&3 && exec 3>&-`, host, port)
			if _, err := asUserIn(t, other, []byte(req.String()), "bash", "-c", script); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		if !waitFor(10*time.Second, func() bool { return len(auditRecords(t, e, "refused")) >= len(refused)+tries }) {
			t.Errorf("send-and-close: %d refusals recorded, want %d", len(auditRecords(t, e, "refused")), len(refused)+tries)
		}
		if after := len(auditRecords(t, e, "session-start")); after != before {
			t.Errorf("send-and-close as %s opened %d sessions on root's server", other.name, after-before)
		}

		// Root's own client works.
		m := srv.mustConnect(t, clientOpts{})
		if out := m.shellOut(t, "id -u"); strings.TrimSpace(out) != "0" {
			t.Errorf("root's session: id -u = %q", out)
		}
		// A page served from another localhost port, in root's own browser.
		if code := curlStatus(t, root, "POST", srv.url, initializeBody, "Origin: http://localhost:3000"); code != 403 {
			t.Errorf("a request with a localhost Origin: %d, want 403", code)
		}
		if code := curlStatus(t, root, "POST", srv.url, initializeBody, "Sec-Fetch-Site: same-site"); code != 403 {
			t.Errorf("a request with Sec-Fetch-Site: %d, want 403", code)
		}
		if code := curlStatus(t, root, "POST", srv.url, initializeBody); code != 200 {
			t.Errorf("root's own curl: %d, want 200", code)
		}
	})

	t.Run("user server", func(t *testing.T) {
		e := newEnv(t, other)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		// The user who started it: the README's client entry, unchanged.
		if code := curlStatus(t, other, "POST", srv.url, initializeBody); code != 200 {
			t.Errorf("the server's own user: %d, want 200", code)
		}
		// Root is allowed.
		m := srv.mustConnect(t, clientOpts{})
		if out := m.shellOut(t, "echo root-ok"); !strings.Contains(out, "root-ok") {
			t.Errorf("root's client on the user's server: %q", out)
		}
		// A third user is not.
		if code := curlStatus(t, third, "POST", srv.url, initializeBody); code != 403 {
			t.Errorf("a third user's initialize: %d, want 403", code)
		}
		if r := auditRecords(t, e, "refused"); len(r) != 1 || !strings.Contains(fmt.Sprint(r[0]["command"]), "uid "+strconv.Itoa(third.uid)) {
			t.Errorf("audit records: %v", r)
		}
	})
}
