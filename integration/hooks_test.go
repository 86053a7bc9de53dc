//go:build linux

package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// hookDef is one [[hooks.EVENT]] table of a configuration file.
type hookDef struct {
	event, matcher, command string
	timeoutMs               int
}

// hookScript writes an executable #!/bin/sh hook into dir (created if
// needed) and returns its path. The fixture is handed to the identity when
// the server starts.
func hookScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeFile(t, p, "#!/bin/sh\n"+body+"\n")
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// blockingHook writes a PreToolUse hook that blocks (exit 2, why on
// stderr) a call whose hook input matches the shell case pattern, and lets
// every other call pass.
func blockingHook(t *testing.T, dir, name, pattern, why string) string {
	t.Helper()
	return hookScript(t, dir, name, `in=$(cat)
case "$in" in
  `+pattern+`) echo "`+why+`" >&2; exit 2 ;;
esac
exit 0`)
}

// hookConfig writes a trusted configuration file declaring hs and returns
// the path to pass with --config.
func hookConfig(t *testing.T, e *env, name string, hs ...hookDef) string {
	t.Helper()
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "[[hooks.%s]]\nmatcher = %q\ncommand = %q\n", h.event, h.matcher, h.command)
		if h.timeoutMs > 0 {
			fmt.Fprintf(&b, "timeout_ms = %d\n", h.timeoutMs)
		}
	}
	p := filepath.Join(e.root, "cfg", name+".toml")
	writeFile(t, p, b.String())
	return p
}

// hookDenied reports whether r is a hook's typed denial whose text holds
// want.
func hookDenied(t *testing.T, r *mcp.CallToolResult, want string) bool {
	t.Helper()
	return denied(t, r, "hook") && strings.Contains(text(r), want)
}

// waitStderr waits (bounded) until the server's stderr holds want.
func waitStderr(m *mcpConn, want string) string {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(m.stderr.String(), want) {
		time.Sleep(20 * time.Millisecond)
	}
	return m.stderr.String()
}

// TestHooksToolEvents: a PreToolUse hook blocks shell commands containing
// a word (the command does not run) and lets the others through; a
// PostToolUse hook receives the call's result and adds context. Every run
// is in the audit log.
func TestHooksToolEvents(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mn := range [][2]string{{"workspace-write", "off"}, {"restricted", "on"}} {
			mode, network := mn[0], mn[1]
			t.Run(mode+"-net-"+network, func(t *testing.T) {
				e := newEnv(t, id)
				dir := filepath.Join(e.root, "hooks")
				pre := hookScript(t, dir, "no-forbidden-word", `in=$(cat)
case "$in" in
  *'"hook_event_name":"PreToolUse"'*'"tool_name":"shell"'*forbidden-word*) echo "commands may not say forbidden-word" >&2; exit 2 ;;
  *'"hook_event_name":"PreToolUse"'*'"tool_name":"shell"'*) exit 0 ;;
esac
echo "unexpected input: $in" >&2; exit 2`)
				post := hookScript(t, dir, "see-result", `in=$(cat)
case "$in" in
  *'"hook_event_name":"PostToolUse"'*'"tool_response":'*SECRET-OUT-2*) echo "the result carries a secret" >&2; exit 2 ;;
  *'"hook_event_name":"PostToolUse"'*'"tool_response":'*allowed-42*) echo '{"additionalContext":"the PostToolUse hook saw allowed-42 in the result"}' ;;
  *) echo "the PostToolUse hook did not see the result" >&2; exit 2 ;;
esac`)
				cfg := hookConfig(t, e, "hooks",
					hookDef{event: "PreToolUse", matcher: "shell", command: pre},
					hookDef{event: "PostToolUse", matcher: "shell", command: post})
				m := e.mcp(t, "--sandbox", mode, "--sandbox-net", network, "--config", cfg)

				r := m.call(t, "shell", map[string]any{"command": "echo forbidden-word > planted-by-blocked-call"})
				if !hookDenied(t, r, `PreToolUse hook "no-forbidden-word": commands may not say forbidden-word`) || !strings.Contains(text(r), "did not run") {
					t.Errorf("the blocking hook did not block: %v %s", structured(t, r), text(r))
				}
				if _, err := os.Stat(filepath.Join(e.work, "planted-by-blocked-call")); err == nil {
					t.Error("the blocked command ran")
				}

				r = m.call(t, "shell", map[string]any{"command": "echo allowed-$((6*7))"})
				if r.IsError || !strings.Contains(structured(t, r)["output"].(string), "allowed-42") {
					t.Fatalf("the allowed call did not run: %v %s", structured(t, r), text(r))
				}
				if !strings.Contains(text(r), "the PostToolUse hook saw allowed-42 in the result") {
					t.Errorf("the PostToolUse hook's context is not in the result: %s", text(r))
				}
				// A PostToolUse block withholds the result of a call that ran.
				r = m.call(t, "shell", map[string]any{"command": "echo SECRET-OUT-$((1+1)); echo ran > ran-before-withheld"})
				if !hookDenied(t, r, `PostToolUse hook "see-result": the result carries a secret (the call ran; its result is withheld)`) || strings.Contains(text(r), "SECRET-OUT-2") {
					t.Errorf("the result was not withheld: %v %s", structured(t, r), text(r))
				}
				if _, err := os.Stat(filepath.Join(e.work, "ran-before-withheld")); err != nil {
					t.Errorf("the withheld call did not run: %v", err)
				}
				// The matcher selects shell only: read_file runs no hook.
				if r := m.call(t, "read_file", map[string]any{"path": "README"}); r.IsError {
					t.Errorf("read_file was stopped by a shell hook: %s", text(r))
				}

				b, err := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{`"decision":"hook-blocked","rule":"PreToolUse","path":"no-forbidden-word","exit_code":2`,
					`"decision":"hook-ok","rule":"PostToolUse","path":"see-result","exit_code":0`} {
					if !strings.Contains(string(b), want) {
						t.Errorf("audit log lacks %s:\n%s", want, b)
					}
				}
			})
		}
	})
}

// TestHooksConfined: a hook runs under the session's sandbox with its
// directory granted read/exec only. It tries to write its own directory,
// read ~/.ssh/id_rsa and a masked file inside its own (granted) directory,
// and connect to a listener on the host's 127.0.0.1, then reports what it
// saw as its block reason. With the sandbox off every attempt succeeds,
// which shows the probe works.
func TestHooksConfined(t *testing.T) {
	var accepted atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, tt := range []struct{ mode, want string }{
			{"off", "probe: WROTE-OWN-DIR READ-SSH READ-MASKED-IN-GRANT NET-REACHED"},
			{"workspace-write", "probe: write-refused ssh-refused masked-in-grant-refused net-refused"},
			{"restricted", "probe: write-refused ssh-refused masked-in-grant-refused net-refused"},
		} {
			t.Run(tt.mode, func(t *testing.T) {
				e := newEnv(t, id)
				seedSecrets(t, e) // ~/.ssh/id_rsa, ~/.config/gh/hosts.yml, ...
				// The hook lives in ~/.config, so the masked ~/.config/gh
				// is inside the directory its grant names.
				dir := filepath.Join(e.home, ".config")
				probe := hookScript(t, dir, "probe-hook", fmt.Sprintf(`d=$(dirname "$0"); r=""
if (echo x > "$d/planted") 2>/dev/null; then r="$r WROTE-OWN-DIR"; else r="$r write-refused"; fi
if grep -q SECRET "$HOME/.ssh/id_rsa" 2>/dev/null; then r="$r READ-SSH"; else r="$r ssh-refused"; fi
if grep -q SECRET "$d/gh/hosts.yml" 2>/dev/null; then r="$r READ-MASKED-IN-GRANT"; else r="$r masked-in-grant-refused"; fi
if timeout 5 /bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null; then r="$r NET-REACHED"; else r="$r net-refused"; fi
echo "probe:$r" >&2; exit 2`, port))
				cfg := hookConfig(t, e, "hooks", hookDef{event: "PreToolUse", matcher: "read_file", command: probe})
				before := accepted.Load()
				m := e.mcp(t, "--sandbox", tt.mode, "--sandbox-net", "off", "--config", cfg)
				r := m.call(t, "read_file", map[string]any{"path": "README"})
				if !hookDenied(t, r, tt.want) {
					t.Errorf("the hook reported %q, want %q", text(r), tt.want)
				}
				_, err := os.Stat(filepath.Join(dir, "planted"))
				if planted := err == nil; planted != (tt.mode == "off") {
					t.Errorf("the hook's directory was written: %v", planted)
				}
				if reached := accepted.Load() != before; reached != (tt.mode == "off") {
					t.Errorf("the host's listener was reached: %v", reached)
				}
				for _, leak := range []string{"SECRET-ssh-id_rsa", "SECRET-config-gh-hostsyml"} {
					if tt.mode != "off" && strings.Contains(text(r), leak) {
						t.Errorf("a secret reached the model: %s", leak)
					}
				}
			})
		}
	})
}

// TestHooksSharedTreeGuard: a hook at HOME's top level or directly in /tmp
// would be granted a shared tree; the guard refuses it, so the hook fails
// (and, being a PreToolUse hook, blocks the call), while the session goes
// on. The operator is told which path and why; the model is told neither
// path. The hooks would allow every call, so a broken guard fails the test.
func TestHooksSharedTreeGuard(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		inTmp, err := os.CreateTemp("/tmp", "evener-it-hook-")
		if err != nil {
			t.Fatal(err)
		}
		inTmp.Close()
		t.Cleanup(func() { os.Remove(inTmp.Name()) })
		for _, command := range []string{filepath.Join(e.home, "allow-all"), inTmp.Name()} {
			t.Run(filepath.Base(filepath.Dir(command)), func(t *testing.T) {
				hookScript(t, filepath.Dir(command), filepath.Base(command), "exit 0")
				if !id.root && os.Geteuid() == 0 {
					if err := os.Chown(command, id.uid, id.gid); err != nil {
						t.Fatal(err)
					}
				}
				cfg := hookConfig(t, e, "guard", hookDef{event: "PreToolUse", matcher: "", command: command})
				m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
				r := m.call(t, "shell", map[string]any{"command": "echo should-not-run > ran"})
				if !hookDenied(t, r, "shared tree") || strings.Contains(text(r), e.root) || strings.Contains(text(r), "/tmp") {
					t.Errorf("a hook in a shared tree was not refused (or the refusal names a host path): %s", text(r))
				}
				if _, err := os.Stat(filepath.Join(e.work, "ran")); err == nil {
					t.Error("the call ran although its PreToolUse hook could not")
				}
				if se := waitStderr(m, "is not run under the sandbox"); !strings.Contains(se, command+" is not run under the sandbox") {
					t.Errorf("the operator was not told:\n%s", se)
				}
			})
		}
	})
}

// TestHooksProjectFileIgnored: hooks declared in the project file (inside
// the model's own write surface) are ignored with a warning that says why;
// the same hook from a trusted --config file blocks.
func TestHooksProjectFileIgnored(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		block := hookScript(t, filepath.Join(e.root, "hooks"), "block-all", `echo "the project's hook ran" >&2; exit 2`)
		writeFile(t, filepath.Join(e.work, ".evener", "mcp.toml"), fmt.Sprintf("[[hooks.PreToolUse]]\ncommand = %q\n", block))
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		r := m.call(t, "shell", map[string]any{"command": "echo project-hook-ignored"})
		if r.IsError || !strings.Contains(structured(t, r)["output"].(string), "project-hook-ignored") {
			t.Errorf("a project-file hook ran: %s", text(r))
		}
		want := ".evener/mcp.toml: ignoring hooks: this file sits in the model's own write surface"
		if se := waitStderr(m, want); !strings.Contains(se, want) {
			t.Errorf("no warning saying why:\n%s", se)
		}

		cfg := hookConfig(t, e, "trusted", hookDef{event: "PreToolUse", command: block})
		m = e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
		if r := m.call(t, "shell", map[string]any{"command": "true"}); !hookDenied(t, r, "the project's hook ran") {
			t.Errorf("the same hook from --config did not block: %s", text(r))
		}
	})
}

// TestHooksSessionStart: a failing SessionStart hook produces exactly one
// warning line, naming the hook and its exit code, on stderr and in the
// instructions; its stderr reaches neither. Another SessionStart hook's
// context joins the instructions.
func TestHooksSessionStart(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		dir := filepath.Join(e.root, "hooks")
		good := hookScript(t, dir, "project-facts", `echo '{"additionalContext":"build with: make check"}'`)
		bad := hookScript(t, dir, "broken-start", "echo SECRET-HOOK-STDERR-TEXT >&2; echo SECRET-HOOK-STDOUT; exit 3")
		cfg := hookConfig(t, e, "start",
			hookDef{event: "SessionStart", command: good},
			hookDef{event: "SessionStart", command: bad})
		m := e.mcp(t, "--sandbox", "restricted", "--sandbox-net", "off", "--config", cfg)
		want := `SessionStart hook "broken-start" failed (exit 3)`
		se := waitStderr(m, want)
		var lines []string
		for _, l := range strings.Split(se, "\n") {
			if strings.Contains(l, "SessionStart") || strings.Contains(l, "broken-start") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "warning") {
			t.Errorf("want exactly one warning line with %q on stderr, got %q", want, lines)
		}
		ins := m.init.Instructions
		var warn []string
		for _, l := range strings.Split(ins, "\n") {
			if strings.Contains(l, "broken-start") {
				warn = append(warn, l)
			}
		}
		if len(warn) != 1 || warn[0] != "- WARNING: "+want {
			t.Errorf("want exactly one WARNING line in the instructions, got %q:\n%s", warn, ins)
		}
		if !strings.Contains(ins, "build with: make check") {
			t.Errorf("the good hook's context is not in the instructions:\n%s", ins)
		}
		for _, leak := range []string{"SECRET-HOOK-STDERR-TEXT", "SECRET-HOOK-STDOUT"} {
			if strings.Contains(se, leak) || strings.Contains(ins, leak) {
				t.Errorf("the failing hook's output (%s) leaked", leak)
			}
		}
		// The session goes on.
		if r := m.call(t, "shell", map[string]any{"command": "echo still-serving"}); r.IsError {
			t.Errorf("the session did not survive its failed SessionStart hook: %s", text(r))
		}
	})
}
