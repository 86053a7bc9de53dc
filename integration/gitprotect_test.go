//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Protected paths and git (docs/protected-paths.md, "Protected paths and runner state",
// "Git"), over MCP, as root and as the unprivileged user.

// shellViolations is a shell result's violations.
func shellViolations(t *testing.T, m *mcpConn, script string) (string, []map[string]any) {
	t.Helper()
	r := m.call(t, "shell", map[string]any{"command": script})
	if r.IsError {
		t.Fatalf("shell: %s", text(r))
	}
	var out []map[string]any
	vs, _ := structured(t, r)["violations"].([]any)
	for _, v := range vs {
		if mv, ok := v.(map[string]any); ok {
			out = append(out, mv)
		}
	}
	return text(r), out
}

func hasViolation(vs []map[string]any, action, target string) bool {
	for _, v := range vs {
		if v["action"] == action && v["target"] == target {
			return true
		}
	}
	return false
}

// TestGitSweepKeepsProtected: a command that makes the directory of a
// protected file look like a repository (HEAD, objects, refs beside it)
// has that repository set aside and reported, and the protected file stays
// where it is, unchanged: the sweep never renames it (so the model cannot
// rewrite it under its quarantine name, and renaming that back cannot
// install the model's content).
func TestGitSweepKeepsProtected(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		initRepo(t, e.work)
		writeFile(t, filepath.Join(e.work, "app", "config"), "user config\n")
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--protect", filepath.Join(e.work, "app", "config"))
		w := watchViolations(m)
		out, vs := shellViolations(t, m, "echo x > app/config 2>/dev/null && echo DIRECT-WRITE; mkdir -p app/objects app/refs && echo 'ref: refs/heads/main' > app/HEAD && echo PLANTED")
		if strings.Contains(out, "DIRECT-WRITE") || !strings.Contains(out, "PLANTED") {
			t.Fatalf("the plant did not run as planned:\n%s", out)
		}
		if !hasViolation(vs, "git-set-aside", "app") {
			t.Errorf("the planted repository is not reported: %v\n%s", vs, out)
		}
		if strings.Contains(out, e.root) {
			t.Errorf("a host path in the result:\n%s", out)
		}
		// What the model would do next: write the quarantine name.
		out, _ = shellViolations(t, m, "ls -a app; echo model > app/config.evener-quarantine; cat app/config")
		if !strings.Contains(out, "user config") {
			t.Errorf("app/config as the sandbox sees it:\n%s", out)
		}
		if b, err := os.ReadFile(filepath.Join(e.work, "app", "config")); err != nil || string(b) != "user config\n" {
			t.Errorf("the protected app/config moved or changed: %q, %v", b, err)
		}
		if _, err := os.Lstat(filepath.Join(e.work, "app", "HEAD")); err == nil {
			t.Errorf("the planted app/HEAD was not set aside")
		}
		if _, vsr := w.read(t); findViolation(vsr, "git-set-aside", "app") == nil {
			t.Errorf("the violations resource lacks the planted repository: %v", vsr)
		}
	})
}

// guardRepo makes e's worktree a repository with a committed workflow, a
// second branch and a tag, and returns main's commit and the workflow.
func guardRepo(t *testing.T, e *env) (main, workflow string) {
	t.Helper()
	initRepo(t, e.work)
	workflow = "on: push\njobs: {}\n"
	writeFile(t, filepath.Join(e.work, ".github", "workflows", "ci.yml"), workflow)
	hostGit(t, e.work, "add", ".")
	hostGit(t, e.work, "commit", "-qm", "workflow")
	hostGit(t, e.work, "branch", "side")
	hostGit(t, e.work, "tag", "v1")
	return strings.TrimSpace(hostGit(t, e.work, "rev-parse", "HEAD")), workflow
}

// gitAttack puts an attacker's workflow into git without writing the
// protected file: a blob, an index entry, a commit, refs moved.
const gitAttack = `export GIT_CONFIG_NOSYSTEM=1
G="git -c user.name=x -c user.email=x@x.test"
echo evil > .github/workflows/ci.yml 2>/dev/null && echo DIRECT-WRITE
printf 'on: push\njobs: {steal: {runs-on: x, steps: [{run: evil}]}}\n' > "$TMPDIR/evil.yml"
b=$($G hash-object -w "$TMPDIR/evil.yml")
$G update-index --cacheinfo "100644,$b,.github/workflows/ci.yml" && $G commit -qm innocent && echo COMMITTED
$G update-ref refs/heads/side HEAD && $G update-ref refs/heads/release HEAD && $G update-ref refs/tags/v1 HEAD && echo MOVED
`

// checkGitClean: on the host, git holds the user's workflow everywhere
// again; what the user would do next (status, discard, push) finds nothing
// of the attacker's; the attacker's commit is kept under
// refs/evener-quarantine/.
func checkGitClean(t *testing.T, e *env, main, workflow string) {
	t.Helper()
	for _, r := range []string{"HEAD", "refs/heads/main", "refs/heads/side", "refs/tags/v1"} {
		if got := strings.TrimSpace(hostGit(t, e.work, "rev-parse", r)); got != main {
			t.Errorf("%s is %s, want %s", r, got, main)
		}
	}
	if got := hostGit(t, e.work, "for-each-ref", "--format=%(refname)", "refs/heads/release"); got != "" {
		t.Errorf("the branch the command created survives: %s", got)
	}
	if got := hostGit(t, e.work, "status", "--porcelain", "--", ".github"); got != "" {
		t.Errorf("git status shows the protected path changed: %q", got)
	}
	hostGit(t, e.work, "checkout", "--", ".github/workflows/ci.yml")
	if b, _ := os.ReadFile(filepath.Join(e.work, ".github", "workflows", "ci.yml")); string(b) != workflow {
		t.Errorf("git checkout -- wrote %q", b)
	}
	if got := hostGit(t, e.work, "for-each-ref", "--format=%(refname)", "refs/evener-quarantine/"); got == "" {
		t.Errorf("the offending commit is not kept under refs/evener-quarantine/")
	}
	if got := hostGit(t, e.work, "log", "--format=%s", "-1", "main"); strings.Contains(got, "innocent") {
		t.Errorf("main still holds the attacker's commit")
	}
}

// TestGitProtectedInGit: with .github/workflows protected, a command that
// cannot write the workflow puts its own into git instead (hash-object,
// update-index, commit, update-ref of other branches, a tag and a new
// branch): after the command every ref it moved and the index entry are
// set back, the commit kept reachable, and the call's result and the
// violations resource report protected-in-git; the same holds when a
// terminal does it and ends.
func TestGitProtectedInGit(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		main, workflow := guardRepo(t, e)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--protect", ".github/workflows")
		w := watchViolations(m)
		out, vs := shellViolations(t, m, gitAttack)
		if strings.Contains(out, "DIRECT-WRITE") || !strings.Contains(out, "COMMITTED") || !strings.Contains(out, "MOVED") {
			t.Fatalf("the attack did not run as planned:\n%s", out)
		}
		if !hasViolation(vs, "protected-in-git", ".github/workflows") {
			t.Errorf("the result does not report protected-in-git: %v\n%s", vs, out)
		}
		for _, want := range []string{"[git: protected .github/workflows: refs/heads/main was moved", "refs/heads/release was created", "refs/evener-quarantine/"} {
			if !strings.Contains(out, want) {
				t.Errorf("the result lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, e.root) {
			t.Errorf("a host path in the result:\n%s", out)
		}
		checkGitClean(t, e, main, workflow)
		if _, vsr := w.read(t); findViolation(vsr, "protected-in-git", ".github/workflows") == nil {
			t.Errorf("the violations resource lacks protected-in-git: %v", vsr)
		}
		// A legitimate commit that leaves the workflow alone is kept.
		out, vs = shellViolations(t, m, `git -c user.name=x -c user.email=x@x.test commit -q --allow-empty -m fine && git rev-parse HEAD`)
		if len(vs) != 0 {
			t.Errorf("a legitimate commit was reported: %v\n%s", vs, out)
		}
		main = strings.TrimSpace(hostGit(t, e.work, "rev-parse", "HEAD"))
		hostGit(t, e.work, "update-ref", "refs/heads/side", main)
		hostGit(t, e.work, "tag", "-f", "v1", main)

		// A terminal that does it and ends.
		w.drain()
		tid := m.termStart(t, map[string]any{"command": gitAttack + "echo TERM-DONE"})
		m.termUntil(t, tid, "TERM-DONE")
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, vsr := w.read(t)
			if slices.ContainsFunc(vsr, func(v violationEntry) bool {
				return v.Action == "protected-in-git" && v.Target == ".github/workflows" && v.Tool == "terminal_start"
			}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no protected-in-git violation from the terminal: %v", vsr)
			}
			w.updated(2 * time.Second)
		}
		checkGitClean(t, e, main, workflow)
	})
}
