//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// protectWorld lays out, in e's worktree, a protected directory two levels
// down (a/b/prot/f), a protected file (Makefile), a path protected through
// a symlink (ln2/c.txt, ln2 -> d), a symlink to the protected dir's
// grandparent (ln -> a), an unprotected file, and a runner state directory
// outside the worktree. It returns the flags that configure them.
func protectWorld(t *testing.T, e *env) (flags []string, state string) {
	t.Helper()
	for _, p := range []string{"a/b/prot/f", "Makefile", "d/c.txt", "free.txt"} {
		writeFile(t, filepath.Join(e.work, p), "orig\n")
	}
	for link, target := range map[string]string{"ln": "a", "ln2": "d"} {
		if err := os.Symlink(target, filepath.Join(e.work, link)); err != nil {
			t.Fatal(err)
		}
	}
	state = filepath.Join(e.root, "agent-state")
	mustMkdir(t, state)
	return []string{"--protect", filepath.Join(e.work, "a/b/prot"), "--protect", "Makefile",
		"--protect", filepath.Join(e.work, "ln2/c.txt"), "--state-rw", state}, state
}

func protectedUnchanged(t *testing.T, e *env) {
	t.Helper()
	for _, p := range []string{"a/b/prot/f", "Makefile", "d/c.txt"} {
		b, err := os.ReadFile(filepath.Join(e.work, p))
		if err != nil || string(b) != "orig\n" {
			t.Errorf("protected %s changed: %q, %v", p, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.work, "a/b/prot/new")); err == nil {
		t.Errorf("a file was created in the protected directory")
	}
}

// shellProtectAttacks are shell attempts on a protected path: literal,
// through a symlink, and by renaming it or an ancestor then writing. Each
// prints BREACH when it succeeded.
var shellProtectAttacks = []struct{ name, cmd string }{
	{"literal write", "echo x > a/b/prot/f"},
	{"new file in protected dir", "echo x > a/b/prot/new"},
	{"symlinked spelling", "echo x > ln/b/prot/f"},
	{"file by literal", "echo x > Makefile"},
	{"file replaced by rename", "echo x > mk.tmp && mv -f mk.tmp Makefile"},
	{"file deleted", "rm -f Makefile && test ! -e Makefile"},
	{"protected through a symlink, at its target", "echo x > d/c.txt"},
	{"protected through a symlink, literally", "echo x > ln2/c.txt"},
	{"rename protected dir", "mv a/b/prot a/b/prot2 && echo x > a/b/prot2/f"},
	{"rename parent", "mv a/b a/b2 && echo x > a/b2/prot/f"},
	{"rename grandparent", "mv a a2 && echo x > a2/b/prot/f"},
	{"rename through the symlink", "mv ln/b lnb2 && echo x > lnb2/prot/f"},
	{"rename the target dir of the symlink", "mv d d2 && echo x > d2/c.txt"},
	{"remove protected dir", "rm -rf a/b/prot && test ! -e a/b/prot"},
	{"hard link then write", "ln Makefile hl && echo x >> hl"},
}

// TestProtectedPaths (issue 17 part 1): through the MCP file tools
// (write_file, edit_file, apply_patch) and `shell`, in every mode, as root
// and as the user, a protected file or directory under the worktree is not
// changed via its literal path, a symlinked spelling, or by renaming it or
// an ancestor first; the rest of the worktree stays writable where the mode
// writes; the runner state directory outside the worktree is writable by
// both layers in every mode, read-only included. The startup line and the
// preamble name both.
func TestProtectedPaths(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range modes {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				flags, state := protectWorld(t, e)
				m := e.mcp(t, append([]string{"--sandbox", mode, "--sandbox-net", "off"}, flags...)...)

				// The file tools.
				for _, p := range []string{"a/b/prot/f", "a/b/prot/new", "ln/b/prot/f", "Makefile", "d/c.txt", "ln2/c.txt", "a/b", "a"} {
					if r := m.call(t, "write_file", map[string]any{"path": p, "content": "x\n"}); !r.IsError {
						t.Errorf("write_file %s succeeded", p)
					} else if mode != "read-only" && !strings.HasPrefix(p, "ln") && !strings.Contains(text(r), "protected") {
						t.Errorf("write_file %s: %s, want rule protected", p, text(r))
					}
				}
				for _, p := range []string{"a/b/prot/f", "ln/b/prot/f", "Makefile", "d/c.txt", "ln2/c.txt"} {
					r := m.call(t, "edit_file", map[string]any{"path": p, "edits": []any{map[string]any{"old_text": "orig", "new_text": "x"}}})
					if !r.IsError {
						t.Errorf("edit_file %s succeeded", p)
					}
				}
				for name, patch := range map[string]string{
					"update":        "*** Update File: a/b/prot/f\n@@\n-orig\n+x\n",
					"update link":   "*** Update File: ln/b/prot/f\n@@\n-orig\n+x\n",
					"delete":        "*** Delete File: Makefile\n",
					"add in dir":    "*** Add File: a/b/prot/new\n+x\n",
					"move over":     "*** Update File: free.txt\n*** Move to: Makefile\n@@\n-orig\n+x\n",
					"move out":      "*** Update File: d/c.txt\n*** Move to: moved.txt\n@@\n-orig\n+orig\n",
					"through link2": "*** Update File: ln2/c.txt\n@@\n-orig\n+x\n",
				} {
					r := m.call(t, "apply_patch", map[string]any{"patch": "*** Begin Patch\n" + patch + "*** End Patch\n"})
					if !r.IsError {
						t.Errorf("apply_patch %s succeeded: %s", name, text(r))
					}
				}
				protectedUnchanged(t, e)

				// The shell.
				var script strings.Builder
				for _, a := range shellProtectAttacks {
					script.WriteString("( " + a.cmd + " ) 2>/dev/null && echo 'BREACH " + a.name + "'\n")
				}
				script.WriteString("echo y > free.txt && echo FREE-OK\n")
				script.WriteString("echo s > " + state + "/from-shell && echo STATE-OK\n")
				out := m.shellOut(t, script.String())
				if strings.Contains(out, "BREACH") {
					t.Errorf("shell changed a protected path:\n%s", out)
				}
				protectedUnchanged(t, e)
				if mode != "read-only" && !strings.Contains(out, "FREE-OK") {
					t.Errorf("control: the worktree is not writable by the shell:\n%s", out)
				}
				if mode != "read-only" {
					if r := m.call(t, "write_file", map[string]any{"path": "free2.txt", "content": "ok\n"}); r.IsError {
						t.Errorf("control: write_file free2.txt: %s", text(r))
					}
				}

				// Runner state: both layers, every mode.
				if !strings.Contains(out, "STATE-OK") {
					t.Errorf("shell cannot write the runner state directory in %s:\n%s", mode, out)
				}
				if b, _ := os.ReadFile(filepath.Join(state, "from-shell")); string(b) != "s\n" {
					t.Errorf("the shell's write to the runner state directory did not reach the host: %q", b)
				}
				if r := m.call(t, "write_file", map[string]any{"path": filepath.Join(state, "from-tool"), "content": "t\n"}); r.IsError {
					t.Errorf("write_file into the runner state directory in %s: %s", mode, text(r))
				}
				if b, _ := os.ReadFile(filepath.Join(state, "from-tool")); string(b) != "t\n" {
					t.Errorf("write_file's write to the runner state directory did not reach the host: %q", b)
				}

				// Where the policy is described.
				line := ""
				for _, l := range strings.Split(m.stderr.String(), "\n") {
					if strings.HasPrefix(l, "sandbox:") {
						line = l
						break
					}
				}
				if !strings.Contains(line, "enforcing "+mode) || !strings.Contains(line, "protected: 3 path(s)") || !strings.Contains(line, "runner state: 1 dir(s)") {
					t.Errorf("startup line: %q", line)
				}
				pre := m.preamble(t)
				if !strings.Contains(pre, "protected (never writable") || !strings.Contains(pre, "a/b/prot") || !strings.Contains(pre, "runner state: 1 directory") {
					t.Errorf("preamble does not describe protected paths and runner state:\n%s", pre)
				}
				if strings.Contains(pre, state) {
					t.Errorf("preamble names a host path:\n%s", pre)
				}
			})
		}
	})
}

// TestProtectedPathsControl: the same attacks succeed without --protect,
// so TestProtectedPaths can fail.
func TestProtectedPathsControl(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		protectWorld(t, e)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		if r := m.call(t, "write_file", map[string]any{"path": "Makefile", "content": "x\n"}); r.IsError {
			t.Errorf("control: write_file Makefile refused without --protect: %s", text(r))
		}
		out := m.shellOut(t, "mv a a2 && echo x > a2/b/prot/f && echo RENAMED")
		if !strings.Contains(out, "RENAMED") {
			t.Errorf("control: renaming the grandparent failed without --protect: %s", out)
		}
	})
}

// TestProtectStartRefusals: a runner state directory that is, lies in or
// holds a denylisted path, a protected path or the server's state directory
// stops the binary at start with a message naming --state-rw (the stdio
// server and probe alike); probe reports both lists.
func TestProtectStartRefusals(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		mustMkdir(t, filepath.Join(e.home, ".ssh", "sub"))
		mustMkdir(t, filepath.Join(e.home, ".config", "gh"))
		mustMkdir(t, filepath.Join(e.work, "keep", "prot", "in"))
		sd := filepath.Join(e.root, "server-state")
		mustMkdir(t, filepath.Join(sd, "in"))
		prot := filepath.Join(e.work, "keep", "prot")
		cases := []struct {
			name string
			args []string
			want string
		}{
			{"denylisted", []string{"--state-rw", filepath.Join(e.home, ".ssh")}, "denylisted"},
			{"inside denylisted", []string{"--state-rw", filepath.Join(e.home, ".ssh", "sub")}, "denylisted"},
			{"holding denylisted", []string{"--state-rw", filepath.Join(e.home, ".config")}, "denylisted"},
			{"protected", []string{"--protect", prot, "--state-rw", prot}, "protected"},
			{"inside protected", []string{"--protect", prot, "--state-rw", filepath.Join(prot, "in")}, "protected"},
			{"holding protected", []string{"--protect", prot, "--state-rw", filepath.Join(e.work, "keep")}, "protected"},
			{"server state dir", []string{"--state-dir", sd, "--state-rw", sd}, "state directory"},
			{"inside server state dir", []string{"--state-dir", sd, "--state-rw", filepath.Join(sd, "in")}, "state directory"},
			{"holding server state dir", []string{"--state-dir", sd, "--state-rw", e.root}, "--state-rw"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				for _, sub := range [][]string{nil, {"probe"}} {
					args := append(append(append([]string{}, sub...), "--sandbox", "workspace-write", "--sandbox-net", "off"), c.args...)
					r := e.runIn(t, e.work, []byte{}, args...)
					if r.code == 0 || !strings.Contains(r.stderr, "--state-rw") || !strings.Contains(r.stderr, c.want) {
						t.Errorf("%v: want a refusal naming --state-rw and %q\n%s", args, c.want, r)
					}
				}
			})
		}
		state := filepath.Join(e.root, "agent-state")
		mustMkdir(t, state)
		r := e.run(t, "probe", "--sandbox", "workspace-write", "--sandbox-net", "off", "--protect", prot, "--state-rw", state)
		if r.code != 0 || !strings.Contains(r.stdout, "protected: "+prot) || !strings.Contains(r.stdout, "runner state: "+state) ||
			!strings.Contains(r.stdout, "protected path, read-only") || !strings.Contains(r.stdout, "runner state directory") {
			t.Errorf("probe does not report protected paths and runner state:\n%s", r)
		}
	})
}

// TestProtectedPathsHook: a hook is a spawned process like `shell`: a
// PostToolUse hook that tries the same attacks changes no protected path,
// while it can write the rest of the worktree and the runner state
// directory.
func TestProtectedPathsHook(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range []string{"workspace-write", "restricted"} {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				flags, state := protectWorld(t, e)
				var body strings.Builder
				body.WriteString("cat >/dev/null\ncd " + e.work + "\n")
				for _, a := range shellProtectAttacks {
					body.WriteString("( " + a.cmd + " ) 2>/dev/null && echo 'BREACH " + a.name + "' >> " + state + "/hook.log\n")
				}
				body.WriteString("echo hook > free.txt\necho done >> " + state + "/hook.log\nexit 0")
				hook := hookScript(t, filepath.Join(e.root, "hooks"), "attack", body.String())
				cfg := hookConfig(t, e, "h", hookDef{event: "PostToolUse", matcher: "read_file", command: hook})
				m := e.mcp(t, append([]string{"--sandbox", mode, "--sandbox-net", "off", "--config", cfg}, flags...)...)
				m.call(t, "read_file", map[string]any{"path": "README"})
				log := filepath.Join(state, "hook.log")
				if !waitFor(10*time.Second, func() bool { b, _ := os.ReadFile(log); return strings.Contains(string(b), "done") }) {
					t.Fatalf("the hook did not run to its end")
				}
				b, _ := os.ReadFile(log)
				if strings.Contains(string(b), "BREACH") {
					t.Errorf("a hook changed a protected path:\n%s", b)
				}
				protectedUnchanged(t, e)
				if b, _ := os.ReadFile(filepath.Join(e.work, "free.txt")); string(b) != "hook\n" {
					t.Errorf("control: the hook could not write the worktree: %q", b)
				}
			})
		}
	})
}
