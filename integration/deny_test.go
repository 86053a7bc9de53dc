//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretFiles are the README's credential denylist plus the
// extras, relative to HOME, each seeded with a unique secret. The list is
// written out here rather than imported so the test checks the product
// against the spec, not against itself.
var secretFiles = []string{
	".ssh/id_rsa", ".aws/credentials", ".config/gcloud/credentials.db", ".netrc",
	".config/evener/hub.json", ".gnupg/private-keys-v1.d/k.key", ".docker/config.json",
	".kube/config", ".git-credentials",
	".npmrc", ".pypirc", ".config/gh/hosts.yml", ".cargo/credentials.toml", ".pgpass",
	".vault-token", ".bash_history", ".zsh_history",
}

func secretOf(rel string) string {
	return "SECRET-" + strings.NewReplacer("/", "-", ".", "").Replace(rel)
}

func seedSecrets(t *testing.T, e *env) {
	for _, rel := range secretFiles {
		writeFile(t, filepath.Join(e.home, rel), secretOf(rel)+"\n")
	}
}

// TestDenylistUnreadable tries every credential path directly, through a
// recursive grep of HOME, through find, and through a symlink planted in the
// worktree, in every sandboxed mode and as both identities.
func TestDenylistUnreadable(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		seedSecrets(t, e)
		if err := os.Symlink(filepath.Join(e.home, ".ssh", "id_rsa"), filepath.Join(e.work, "key-link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(e.home, ".aws"), filepath.Join(e.work, "aws-link")); err != nil {
			t.Fatal(err)
		}
		var script strings.Builder
		for _, rel := range secretFiles {
			fmt.Fprintf(&script, "cat %s 2>&1\n", q(e.home, rel))
		}
		fmt.Fprintf(&script, "grep -r SECRET %s 2>&1\n", q(e.home))
		fmt.Fprintf(&script, "find %s -type f -exec cat {} + 2>&1\n", q(e.home))
		fmt.Fprintf(&script, "cat key-link aws-link/credentials 2>&1\n")
		fmt.Fprintf(&script, "tar -cf - -C %s . 2>/dev/null | strings\n", q(e.home))
		fmt.Fprintf(&script, "echo DONE\n")

		// The probe works: with the sandbox off, every secret is read.
		off := e.sh(t, "off", script.String())
		for _, rel := range secretFiles {
			if !strings.Contains(off.stdout, secretOf(rel)) {
				t.Fatalf("probe is broken: %s not read with the sandbox off\n%s", rel, off)
			}
		}
		for _, mode := range modes {
			r := e.sh(t, mode, script.String())
			if !strings.Contains(r.stdout, "DONE") {
				t.Fatalf("%s: script did not finish\n%s", mode, r)
			}
			for _, rel := range secretFiles {
				if strings.Contains(r.stdout, secretOf(rel)) {
					t.Errorf("%s: %s leaked", mode, rel)
				}
			}
		}
	})
}

// TestDenylistResolvedSpelling masks a credential directory reached through
// a symlink at both spellings, and a relocated XDG_CONFIG_HOME.
func TestDenylistResolvedSpelling(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		real := filepath.Join(e.root, "dotfiles", "kube")
		writeFile(t, filepath.Join(real, "config"), "SECRET-kube-real\n")
		if err := os.Symlink(real, filepath.Join(e.home, ".kube")); err != nil {
			t.Fatal(err)
		}
		xdg := filepath.Join(e.root, "xdg")
		writeFile(t, filepath.Join(xdg, "evener", "credentials"), "SECRET-xdg-evener\n")
		e.extra = append(e.extra, "XDG_CONFIG_HOME="+xdg)
		script := fmt.Sprintf("cat %s %s %s 2>&1; echo DONE", q(e.home, ".kube", "config"), q(real, "config"), q(xdg, "evener", "credentials"))
		if off := e.sh(t, "off", script); !strings.Contains(off.stdout, "SECRET-kube-real") || !strings.Contains(off.stdout, "SECRET-xdg-evener") {
			t.Fatalf("probe is broken:\n%s", off)
		}
		for _, mode := range []string{"read-only", "workspace-write"} {
			r := e.sh(t, mode, script)
			if strings.Contains(r.stdout, "SECRET-") || !strings.Contains(r.stdout, "DONE") {
				t.Errorf("%s: a spelling leaked:\n%s", mode, r)
			}
		}
	})
}

// TestPseudoFilesystems checks /sys, /run/user, the host's processes and a
// privileged daemon socket are out of reach.
func TestPseudoFilesystems(t *testing.T) {
	var sock string
	if os.Geteuid() == 0 {
		// A stand-in docker daemon socket, connectable by anyone on the host.
		sock = "/run/docker.sock"
		if _, err := os.Lstat(sock); err == nil {
			t.Logf("%s already exists; using it as is", sock)
		} else {
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_ = os.Chmod(sock, 0o666)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("DAEMON-ANSWERED\n"))
					c.Close()
				}
			}()
		}
	}
	connect := `perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => "/run/docker.sock") or die "refused: $!\n"; print <$s>;' 2>&1`
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		if sock != "" {
			if off := e.sh(t, "off", connect); !strings.Contains(off.stdout, "DAEMON-ANSWERED") {
				t.Fatalf("probe is broken: the daemon socket does not answer unsandboxed:\n%s", off)
			}
		}
		for _, mode := range modes {
			script := `ls /sys 2>/dev/null | wc -l; ls /run/user 2>/dev/null | wc -l; ls -d /proc/[0-9]* | wc -l; ` + connect
			r := e.sh(t, mode, script)
			lines := strings.Split(r.stdout, "\n")
			if len(lines) < 4 {
				t.Fatalf("%s: %s", mode, r)
			}
			if strings.TrimSpace(lines[0]) != "0" {
				t.Errorf("%s: /sys lists %s entries", mode, lines[0])
			}
			if strings.TrimSpace(lines[1]) != "0" {
				t.Errorf("%s: /run/user lists %s entries", mode, lines[1])
			}
			if n := strings.TrimSpace(lines[2]); n == "" || len(n) > 1 {
				t.Errorf("%s: /proc shows %s processes: the host's are visible", mode, n)
			}
			if strings.Contains(r.stdout, "DAEMON-ANSWERED") {
				t.Errorf("%s: the daemon control socket answered from inside the sandbox", mode)
			}
		}
	})
}

// TestRootSecrets: a server started by root must not hand /etc/shadow to a
// command that is still kernel uid 0.
func TestRootSecrets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the case is a root-started server")
	}
	e := newEnv(t, runAs{name: "root", root: true})
	for _, mode := range modes {
		r := e.sh(t, mode, "cat /etc/shadow 2>&1 | head -1; echo DONE")
		if strings.Contains(r.stdout, "root:") {
			t.Errorf("%s: /etc/shadow readable: %s", mode, r)
		}
	}
}
