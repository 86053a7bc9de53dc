//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A nested repository is code that waits: its config (core.fsmonitor,
// core.pager, an alias) runs when the user's own git reaches it after the
// sandbox's turn, through a gitlink in the writable index, a `gitdir:` file,
// a linked worktree's commondir, or a bare repository the user later enters.
// After each sandboxed command the launcher sweeps the project and
// neutralises every git directory and `.git` entry that command left (see
// the README's "Git" section); these tests plant each shape and then run the
// host's git as the user would.

// nestCase is one way to leave a repository for the user's git: plant is
// the shell run inside the sandbox, probes are the host git commands (run in
// the named directory, relative to the worktree) that would run it.
type nestCase struct {
	name   string
	plant  string
	probes []nestProbe
	// mayFail: the plant is expected to fail inside the sandbox (a surface
	// that is pinned read-only); the host probes run all the same.
	mayFail bool
}

type nestProbe struct {
	dir  string
	args []string
	tty  bool // run under a pseudo-terminal, so a configured pager starts
}

// nestPayload sets the three code-running keys of the repository at dir,
// each touching a marker named after the case in the marker directory.
func nestPayload(dir, name, marks string) string {
	m := func(k string) string { return q(marks, name+"-"+k) }
	return fmt.Sprintf("git -C %[1]s config core.fsmonitor \"touch %[2]s; false\" && git -C %[1]s config core.pager \"touch %[3]s; cat\" && git -C %[1]s config alias.st \"!touch %[4]s\"",
		dir, m("fsmonitor"), m("pager"), m("alias"))
}

// rootProbes are what a user types at the project root.
var rootProbes = []nestProbe{{dir: ".", args: []string{"status"}}, {dir: ".", args: []string{"diff"}}, {dir: ".", args: []string{"log", "-p"}}}

// inProbes are what a user types inside dir.
func inProbes(dir string) []nestProbe {
	return []nestProbe{
		{dir: dir, args: []string{"status"}}, {dir: dir, args: []string{"diff"}},
		{dir: dir, args: []string{"st"}}, {dir: dir, args: []string{"log", "-p"}, tty: true},
	}
}

func nestCases(marks string) []nestCase {
	commit := func(d string) string {
		return fmt.Sprintf("git init -q %[1]s && echo y > %[1]s/g && git -C %[1]s add g && git -C %[1]s commit -qm s", d)
	}
	gitlink := func(path, shaFrom string) string {
		return fmt.Sprintf("git update-index --add --cacheinfo 160000,$(git -C %s rev-parse HEAD),%s", shaFrom, path)
	}
	return []nestCase{
		{name: "gitlink", plant: commit("sub") + " && " + nestPayload("sub", "gitlink", marks) + " && " + gitlink("sub", "sub"),
			probes: append(append([]nestProbe{}, rootProbes...), inProbes("sub")...)},
		{name: "modules", plant: commit("mod") + " && mkdir -p .git/modules && mv mod/.git .git/modules/evil && echo 'gitdir: ../.git/modules/evil' > mod/.git && " +
			nestPayload("mod", "modules", marks) + " && " + gitlink("mod", "mod"),
			probes: append(append([]nestProbe{}, rootProbes...), inProbes("mod")...)},
		{name: "worktree", plant: "git worktree add -q wt 2>&1 && git clone -q --bare . evil.git && " + nestPayload("evil.git", "worktree", marks) +
			" && echo \"$PWD/evil.git\" > .git/worktrees/wt/commondir && " + gitlink("wt", "."),
			probes: append(append(append([]nestProbe{}, rootProbes...), inProbes("wt")...), nestProbe{dir: "evil.git", args: []string{"st"}})},
		{name: "bare", plant: "git init -q --bare bare.git && " + nestPayload("bare.git", "bare", marks),
			probes: []nestProbe{{dir: "bare.git", args: []string{"st"}}, {dir: "bare.git", args: []string{"config", "-l"}, tty: true}}},
		// An existing directory of the user's becomes a bare repository:
		// git takes it for one when the user works inside it.
		{name: "becomes-bare", plant: "echo 'ref: refs/heads/main' > src/HEAD && mkdir src/objects src/refs && " + nestPayload("src", "becomes-bare", marks),
			probes: []nestProbe{{dir: "src", args: []string{"st"}}, {dir: "src", args: []string{"config", "-l"}, tty: true}}},
		// The user's own nested clone: its config is pinned read-only.
		{name: "existing", plant: nestPayload("vendor/lib", "existing", marks) + " ; " + gitlink("vendor/lib", "vendor/lib"), mayFail: true,
			probes: append(append([]nestProbe{}, rootProbes...), inProbes("vendor/lib")...)},
		// ... and carried out of the way to be replaced by a copy with a
		// planted config.
		{name: "swapped", plant: "mv vendor/other/.git vendor/other/.git-old && cp -a vendor/other/.git-old vendor/other/.git && " +
			nestPayload("vendor/other", "swapped", marks) + " && " + gitlink("vendor/other", "vendor/other"),
			probes: append(append([]nestProbe{}, rootProbes...), inProbes("vendor/other")...)},
	}
}

// nestFixture is a worktree with a repository, a plain directory src/ and
// two nested clones of the user's (untracked) under vendor/.
func nestFixture(t *testing.T, id runAs) (*env, string) {
	t.Helper()
	e := newEnv(t, id)
	initRepo(t, e.work)
	writeFile(t, filepath.Join(e.work, "src", "main.c"), "int main(){}\n")
	initRepo(t, filepath.Join(e.work, "vendor", "lib"))
	initRepo(t, filepath.Join(e.work, "vendor", "other"))
	marks := filepath.Join(e.root, "marks")
	mustMkdir(t, marks)
	return e, marks
}

// nestScript is every case's plant, each reporting PLANTED-<name>.
func nestScript(cases []nestCase) string {
	var b strings.Builder
	b.WriteString("export GIT_AUTHOR_NAME=S GIT_AUTHOR_EMAIL=s@example.test GIT_COMMITTER_NAME=S GIT_COMMITTER_EMAIL=s@example.test\n")
	for _, c := range cases {
		fmt.Fprintf(&b, "if ( %s ) >/dev/null 2>&1; then echo PLANTED-%s; else echo FAILED-%s; fi\n", c.plant, c.name, c.name)
	}
	return b.String()
}

// hostGitAs runs the user's git on the host, as the fixture's identity,
// with the fake HOME and no system configuration: what the user types
// after the agent's turn. Its outcome does not matter, only what it ran.
func hostGitAs(t *testing.T, e *env, p nestProbe) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"-C", filepath.Join(e.work, p.dir)}, p.args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	if p.tty {
		line := "git"
		for _, a := range args {
			line += " " + q(a)
		}
		cmd = exec.CommandContext(ctx, "script", "-qec", line, "/dev/null")
	}
	cmd.Dir = e.work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1", "TERM=dumb", "LANG=C.UTF-8"}
	if !e.id.root && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func markers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("marker directory: %v", err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// probeAll runs every case's host probes and returns the markers written.
func probeAll(t *testing.T, e *env, marks string, cases []nestCase) []string {
	t.Helper()
	for _, c := range cases {
		for _, p := range c.probes {
			hostGitAs(t, e, p)
		}
	}
	return markers(t, marks)
}

// TestGitNest: in both writable modes, as root and as the unprivileged user,
// no git command the user runs anywhere in the project after the sandbox's
// turn runs what the sandbox planted.
func TestGitNest(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) is needed to give git a terminal for its pager")
	}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range []string{"workspace-write", "restricted"} {
			t.Run(mode, func(t *testing.T) {
				e, marks := nestFixture(t, id)
				cases := nestCases(marks)
				r := e.sh(t, mode, nestScript(cases))
				for _, c := range cases {
					if !c.mayFail && !strings.Contains(r.stdout, "PLANTED-"+c.name) {
						t.Errorf("%s: the plant failed inside the sandbox, so the case proves nothing:\n%s", c.name, r)
					}
				}
				if m := markers(t, marks); len(m) != 0 {
					t.Fatalf("markers written during the sandbox's turn (the marker directory must be out of its reach): %v", m)
				}
				if m := probeAll(t, e, marks, cases); len(m) != 0 {
					t.Errorf("the user's git ran code the sandbox planted: %v\n%s", m, r)
				}
				// The user's own nested clones are intact or set aside, never
				// carrying the planted config.
				for _, d := range []string{"vendor/lib/.git/config", "vendor/other/.git-old/config"} {
					if b, err := os.ReadFile(filepath.Join(e.work, d)); err == nil && strings.Contains(string(b), "fsmonitor") {
						t.Errorf("%s holds the planted config", d)
					}
				}
				// The worktree's own repository still works for the user.
				if out := hostGitAs(t, e, nestProbe{dir: ".", args: []string{"log", "--oneline"}}); !strings.Contains(out, "first") {
					t.Errorf("the user's repository is broken after the sweep:\n%s", out)
				}
			})
		}
	})
}

// TestGitNestShell: the same through the MCP shell tool of a long-lived
// server, between two calls, while the session is still open; the result
// of the planting call says what was set aside.
func TestGitNestShell(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e, marks := nestFixture(t, id)
		cases := nestCases(marks)[:1]
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		r := m.call(t, "shell", map[string]any{"command": nestScript(cases)})
		out := text(r)
		if !strings.Contains(out, "PLANTED-gitlink") {
			t.Fatalf("the plant failed:\n%s", out)
		}
		if got := probeAll(t, e, marks, cases); len(got) != 0 {
			t.Errorf("the user's git ran code the sandbox planted: %v\n%s", got, out)
		}
		if !strings.Contains(out, "[git: ") || !strings.Contains(out, "evener-quarantine") {
			t.Errorf("the result does not say what was set aside:\n%s", out)
		}
		if v, _ := structured(t, r)["violations"].([]any); !strings.Contains(fmt.Sprint(v), "git-set-aside") {
			t.Errorf("no git-set-aside violation: %v", v)
		}
		// The session keeps working, its repository too.
		r = m.call(t, "shell", map[string]any{"command": "git log --oneline | wc -l"})
		if s := structured(t, r); s["exit_code"] != float64(0) {
			t.Errorf("a later call failed: %s", text(r))
		}
	})
}

// TestGitNestControl shows every plant works when nothing sweeps (mode
// off): the tests above cannot pass for the wrong reason.
func TestGitNestControl(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) is needed")
	}
	e, marks := nestFixture(t, identities(t)[0])
	cases := nestCases(marks)
	r := e.sh(t, "off", nestScript(cases))
	for _, m := range markers(t, marks) {
		os.Remove(filepath.Join(marks, m))
	}
	got := strings.Join(probeAll(t, e, marks, cases), " ")
	for _, c := range cases {
		if c.mayFail {
			continue
		}
		if !strings.Contains(r.stdout, "PLANTED-"+c.name) {
			t.Errorf("%s: the plant fails even unsandboxed:\n%s", c.name, r)
		}
		for _, k := range []string{"alias", "pager"} {
			if !strings.Contains(got, c.name+"-"+k) {
				t.Errorf("%s: the user's git did not run the planted %s (markers: %s): the probe is broken", c.name, k, got)
			}
		}
	}
	for _, c := range []string{"gitlink", "modules", "worktree"} {
		if !strings.Contains(got, c+"-fsmonitor") {
			t.Errorf("%s: a plain git status did not run the planted fsmonitor (markers: %s)", c, got)
		}
	}
}
