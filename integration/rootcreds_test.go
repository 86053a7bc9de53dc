//go:build linux

package integration

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRootServerOtherUsersCredentials (issue 13 item 2): a server started
// by root reads no more through its file tools than its sandboxed commands
// can: another local user's 0600 ~/.ssh/id_rsa (kernel uid 0 without
// DAC_OVERRIDE cannot open it) and that user's world-readable
// ~/.aws/credentials (masked: the denylist of a root server covers every
// local user's home) are refused by read_file, grep and glob, in every
// mode, and `cat` in the sandbox fails on both.
func TestRootServerOtherUsersCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a server started by root needs the suite run as root")
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home := u.HomeDir
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		t.Skipf("%s has no home directory", testUser)
	}
	// The victim's files, created for the test and removed after it (the
	// directories only when the test made them).
	plant := func(rel, content string, mode os.FileMode) string {
		p := filepath.Join(home, rel)
		d := filepath.Dir(p)
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			_ = os.Chown(d, uid, gid)
			t.Cleanup(func() { os.Remove(d) })
		}
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("%s exists already; not touching it", p)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
		return p
	}
	key := plant(".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY----- victim-key-5150\n", 0o600)
	aws := plant(".aws/credentials", "[default]\naws_secret_access_key = victim-aws-5150\n", 0o644)
	if b, err := os.ReadFile(key); err != nil || !strings.Contains(string(b), "5150") {
		t.Fatalf("control: the test (root, all capabilities) cannot read %s: %v", key, err)
	}

	e := newEnv(t, runAs{name: "root", root: true})
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			m := e.mcp(t, "--sandbox", mode, "--sandbox-net", "off")
			for _, p := range []string{key, aws} {
				if r := m.call(t, "read_file", map[string]any{"path": p}); !r.IsError || strings.Contains(text(r), "5150") {
					t.Errorf("read_file %s: %s", filepath.Base(p), text(r))
				}
			}
			for _, dir := range []string{home, filepath.Dir(key), filepath.Dir(aws)} {
				r := m.call(t, "grep", map[string]any{"pattern": "victim-", "path": dir, "literal": true})
				if strings.Contains(text(r), "5150") {
					t.Errorf("grep in %s finds the secret: %s", dir, text(r))
				}
			}
			for _, pat := range []string{".ssh/*", ".aws/*", "**/id_rsa"} {
				r := m.call(t, "glob", map[string]any{"pattern": pat, "path": home})
				if strings.Contains(text(r), "id_rsa") || strings.Contains(text(r), "credentials") {
					t.Errorf("glob %s in the victim's home: %s", pat, text(r))
				}
			}
			if out := m.shellOut(t, "cat "+key+" "+aws+" 2>/dev/null; true"); strings.Contains(out, "5150") {
				t.Errorf("the sandbox reads the victim's secrets: %s", out)
			}
		})
	}
}
