package config

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSSHAgent: [ssh_agent] from trusted layers, its defaults, --ssh-agent,
// and the project file ignored.
func TestSSHAgent(t *testing.T) {
	e := newTestEnv(t)
	// A real key and the fingerprint ssh-keygen prints for it.
	pub := filepath.Join(e.root, "k.pub")
	e.write(t, pub, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBpYV5ZsIkVhYJp8HcqKEMS+ek4XB2wC8U0Q7gpOfWYB me@example\n")
	want := "SHA256:eHUb+P87fHHSMbyVU/pJUNDrmPCRJNBQbm0asg2P7x4"
	if out, err := exec.Command("ssh-keygen", "-lf", pub).Output(); err == nil && !strings.Contains(string(out), want) {
		t.Fatalf("ssh-keygen -lf prints %q, not %s", out, want)
	}
	fp2 := "SHA256:" + strings.Repeat("A", 43)
	e.write(t, e.globalPath(), `[ssh_agent]
keys = ["`+pub+`"]
sign_keys = ["`+fp2+`"]
max_per_minute = 5
`)
	env := append(e.env, "SSH_AUTH_SOCK=/run/agent.sock")
	c, err := Load(Flags{Workdir: e.wd}, env)
	if err != nil {
		t.Fatal(err)
	}
	a := c.SSHAgent
	if a == nil || !slices.Equal(a.Keys, []string{want}) || !slices.Equal(a.SignKeys, []string{fp2}) ||
		!slices.Equal(a.Namespaces, []string{"git"}) || a.Socket != "/run/agent.sock" ||
		a.KnownHosts != filepath.Join(e.home, ".ssh/known_hosts") || a.MaxPerMinute != 5 {
		t.Fatalf("ssh agent %+v (want key %s)", a, want)
	}

	// The flag offers its key for both.
	c, err = Load(Flags{Workdir: e.wd, SSHAgent: []string{fp2}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.SSHAgent.Keys, fp2) || !slices.Contains(c.SSHAgent.SignKeys, fp2) {
		t.Errorf("--ssh-agent: %+v", c.SSHAgent)
	}

	// The project file cannot turn it on or change it.
	e2 := newTestEnv(t)
	e2.write(t, e2.projectPath(), "[ssh_agent]\nkeys = [\""+fp2+"\"]\n")
	c, err = Load(Flags{Workdir: e2.wd}, append(e2.env, "SSH_AUTH_SOCK=/run/agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if c.SSHAgent != nil || !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "ignoring ssh_agent") }) {
		t.Errorf("project ssh_agent: %+v, warnings %v", c.SSHAgent, c.Warnings)
	}
	// Without the option: no agent.
	if c, err := Load(Flags{Workdir: e2.wd}, e2.env); err != nil || c.SSHAgent != nil {
		t.Errorf("no option: %+v %v", c, err)
	}

	for _, bad := range []struct {
		flags      Flags
		env        []string
		file, want string
	}{
		{Flags{SSHAgent: []string{"SHA256:short"}}, env, "", "not a SHA256 fingerprint"},
		{Flags{SSHAgent: []string{fp2}}, e.env, "", "SSH_AUTH_SOCK"},
		{Flags{SSHAgent: []string{filepath.Join(e.root, "missing.pub")}}, env, "", "public key"},
		{Flags{}, env, "[ssh_agent]\nnamespaces = [\"git\"]\n", "no key is named"},
		{Flags{}, env, "[ssh_agent]\nkeys = [\"" + fp2 + "\"]\nmax_per_minute = 0\n", "max_per_minute"},
		{Flags{}, env, "[ssh_agent]\nkeys = [\"" + fp2 + "\"]\nnamespaces = [\"a b\"]\n", "namespace"},
		{Flags{}, env, "[ssh_agent]\nkeys = [\"" + fp2 + "\"]\nbogus = 1\n", "unknown key"},
	} {
		e3 := newTestEnv(t)
		if bad.file != "" {
			e3.write(t, e3.globalPath(), bad.file)
		}
		bad.flags.Workdir = e3.wd
		envs := bad.env
		if len(envs) > 0 && envs[0] == e.env[0] {
			envs = append([]string{"HOME=" + e3.home}, envs[1:]...)
		}
		if _, err := Load(bad.flags, envs); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v %q: error %v, want %q", bad.flags, bad.file, err, bad.want)
		}
	}
}
