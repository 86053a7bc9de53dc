package hooks

import (
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/internal/sandboxtest"
)

// world is a real sandbox session: a sandboxtest host (a worktree, a HOME
// with a secret) and a hooks directory whose scripts the tests write.
// Nothing is mocked: every hook runs through confine's launcher, under
// bubblewrap unless the mode is off.
type world struct {
	root, home, work, hooks string
	host                    sandboxtest.Host
}

func newWorld(t *testing.T) world {
	t.Helper()
	h := sandboxtest.NewHost(t)
	w := world{root: h.Root, home: h.Home, work: h.Work, hooks: filepath.Join(h.Root, "opt", "hooks"), host: h}
	if err := os.MkdirAll(w.hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w world) write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// script writes an executable #!/bin/sh hook named name into the hooks
// directory and returns its path.
func (w world) script(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(w.hooks, name)
	w.write(t, p, "#!/bin/sh\n"+body+"\n", 0o755)
	return p
}

// session resolves a policy in mode (network off) that grants the hooks'
// commands, and opens a launcher session on it.
func (w world) session(t *testing.T, mode confine.Mode, hs []Hook) *confine.Launcher {
	t.Helper()
	spec := w.host.Spec(mode)
	spec.Env = append(spec.Env, "LANG=C.UTF-8")
	for _, h := range hs {
		spec.HookPaths = append(spec.HookPaths, h.Command)
	}
	return sandboxtest.Launcher(t, sandboxtest.Resolve(t, spec, sandboxtest.Live(t, mode)))
}

func (w world) runner(t *testing.T, mode confine.Mode, hs ...Hook) *Runner {
	t.Helper()
	r, err := New(w.session(t, mode, hs), "sess-1", hs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func call(tool, input string) Call { return Call{Tool: tool, Input: json.RawMessage(input)} }

// TestProtocol: exit codes, JSON verdicts, bounds and sanitising, in every
// sandboxed mode and with the sandbox off.
func TestProtocol(t *testing.T) {
	for _, mode := range []confine.Mode{confine.ModeRestricted, confine.ModeWorkspaceWrite, confine.ModeOff} {
		t.Run(string(mode), func(t *testing.T) {
			w := newWorld(t)
			tests := []struct {
				Name        string
				Body        string
				Timeout     time.Duration
				WantStatus  Status
				WantReason  string // substring of Outcome.Reason
				NotInReason string
				WantContext string
			}{
				{Name: "allow", Body: "cat >/dev/null; exit 0", WantStatus: StatusOK},
				{Name: "allow-plain-stdout", Body: "echo just chatting", WantStatus: StatusOK},
				{Name: "exit2-blocks", Body: `echo "no rm -rf, please" >&2; exit 2`, WantStatus: StatusBlocked,
					WantReason: `PreToolUse hook "exit2-blocks": no rm -rf, please`},
				{Name: "exit2-empty", Body: "exit 2", WantStatus: StatusBlocked, WantReason: "no reason given"},
				{Name: "json-block", Body: `echo '{"decision":"block","reason":"json says no"}'`, WantStatus: StatusBlocked, WantReason: "json says no"},
				{Name: "json-deny", Body: `echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"denied here"}}'`,
					WantStatus: StatusBlocked, WantReason: "denied here"},
				{Name: "json-ask", Body: `echo '{"hookSpecificOutput":{"permissionDecision":"ask"}}'`, WantStatus: StatusBlocked, WantReason: "no reason given"},
				{Name: "json-allow-context", Body: `echo '{"decision":"approve","additionalContext":"remember the style guide"}'`,
					WantStatus: StatusOK, WantContext: "remember the style guide"},
				{Name: "json-hso-context", Body: `echo '{"hookSpecificOutput":{"additionalContext":"from hso"}}'`, WantStatus: StatusOK, WantContext: "from hso"},
				{Name: "fails-closed", Body: "echo SECRET-STDERR-TEXT >&2; exit 1", WantStatus: StatusFailed,
					WantReason: `PreToolUse hook "fails-closed" failed (exit 1)`, NotInReason: "SECRET-STDERR-TEXT"},
				{Name: "bad-json", Body: `echo '{"decision":'`, WantStatus: StatusFailed, WantReason: "unreadable"},
				{Name: "unknown-decision", Body: `echo '{"decision":"maybe"}'`, WantStatus: StatusFailed, WantReason: `unknown decision "maybe"`},
				{Name: "stdout-flood", Body: "head -c 100000 /dev/zero | tr '\\0' x", WantStatus: StatusFailed, WantReason: "more than 65536 bytes of stdout"},
				{Name: "timeout", Body: "sleep 30", Timeout: 300 * time.Millisecond, WantStatus: StatusFailed, WantReason: "timed out after 300ms"},
				{Name: "killed", Body: "kill -9 $$", WantStatus: StatusFailed, WantReason: "exit 137)"},
				{Name: "sanitised", Body: `printf '\033[31mred\033[0m \033]0;title\007tail\r\n\001\n' >&2; exit 2`, WantStatus: StatusBlocked,
					WantReason: `"sanitised": red tail`, NotInReason: "\x1b"},
				{Name: "bounded", Body: "head -c 100000 /dev/zero | tr '\\0' y >&2; exit 2", WantStatus: StatusBlocked, WantReason: "[truncated]"},
				{Name: "sees-the-call", Body: "cat >&2; exit 2", WantStatus: StatusBlocked,
					WantReason: `{"session_id":"sess-1","hook_event_name":"PreToolUse","cwd":".","tool_name":"shell","tool_input":{"command":"make test"}}`},
			}
			for _, tt := range tests {
				t.Run(tt.Name, func(t *testing.T) {
					h := Hook{Event: PreToolUse, Matcher: "shell", Command: w.script(t, tt.Name, tt.Body), Timeout: tt.Timeout}
					r := w.runner(t, mode, h)
					start := time.Now()
					out := r.Run(context.Background(), PreToolUse, call("shell", `{"command":"make test"}`))
					if len(out.Runs) != 1 {
						t.Fatalf("%d runs, want 1", len(out.Runs))
					}
					run := out.Runs[0]
					if run.Status != tt.WantStatus {
						t.Fatalf("status %s (%+v), want %s", run.Status, out, tt.WantStatus)
					}
					if out.Blocked != (tt.WantStatus != StatusOK) {
						t.Errorf("Blocked = %v for status %s: a PreToolUse hook that blocks or fails must block", out.Blocked, run.Status)
					}
					if !strings.Contains(out.Reason, tt.WantReason) {
						t.Errorf("reason %q does not contain %q", out.Reason, tt.WantReason)
					}
					if tt.NotInReason != "" && strings.Contains(out.Reason, tt.NotInReason) {
						t.Errorf("reason %q contains %q", out.Reason, tt.NotInReason)
					}
					if len(out.Reason) > MaxReason+100 {
						t.Errorf("reason is %d bytes, over the bound", len(out.Reason))
					}
					if strings.Contains(out.Reason, w.root) {
						t.Errorf("reason names a host path: %q", out.Reason)
					}
					if out.Context != tt.WantContext {
						t.Errorf("context %q, want %q", out.Context, tt.WantContext)
					}
					if run.Status == StatusFailed && (run.Summary == "" || !strings.Contains(run.Summary, tt.Name)) {
						t.Errorf("a failure's summary does not name the hook: %q", run.Summary)
					}
					if time.Since(start) > 20*time.Second {
						t.Errorf("took %s", time.Since(start))
					}
				})
			}
		})
	}
}

// TestMatchersAndOrder: matchers select whole tool names; hooks run in
// order, context accumulates, and the first block ends the run.
func TestMatchersAndOrder(t *testing.T) {
	w := newWorld(t)
	marker := filepath.Join(w.work, "third-ran")
	hs := []Hook{
		{Event: PreToolUse, Matcher: "", Command: w.script(t, "ctx", `echo '{"additionalContext":"first"}'`)},
		{Event: PreToolUse, Matcher: "write_file|edit_file", Command: w.script(t, "writes", `echo "no writes" >&2; exit 2`)},
		{Event: PreToolUse, Matcher: "shell", Command: w.script(t, "shell", `echo "no shell" >&2; exit 2`)},
		{Event: PreToolUse, Command: w.script(t, "third", "touch "+marker)},
		{Event: PostToolUse, Command: w.script(t, "post", `echo '{"additionalContext":"post"}'`)},
	}
	r := w.runner(t, confine.ModeWorkspaceWrite, hs...)
	if n := len(r.Matching(PreToolUse, "shell_extra")); n != 2 {
		t.Errorf("shell_extra matches %d PreToolUse hooks, want 2 (the catch-alls: matchers are anchored)", n)
	}
	out := r.Run(context.Background(), PreToolUse, call("edit_file", `{}`))
	if !out.Blocked || !strings.Contains(out.Reason, "no writes") || out.Context != "first" || len(out.Runs) != 2 {
		t.Errorf("edit_file: %+v", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a hook after the blocking one ran")
	}
	out = r.Run(context.Background(), PreToolUse, call("read_file", `{"path":"x"}`))
	if out.Blocked || len(out.Runs) != 2 || out.Context != "first" {
		t.Errorf("read_file: %+v", out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the catch-all hook did not run for read_file")
	}
	if out := r.Run(context.Background(), SessionStart, Call{}); len(out.Runs) != 0 {
		t.Errorf("no SessionStart hook is configured, yet %d ran", len(out.Runs))
	}
}

// TestPostToolUse: the hook receives the tool's result; a block withholds
// it.
func TestPostToolUse(t *testing.T) {
	w := newWorld(t)
	h := Hook{Event: PostToolUse, Matcher: "shell", Command: w.script(t, "scan", `in=$(cat)
case "$in" in
  *'"tool_response":'*SECRET-OUTPUT*) echo "the output carries a secret" >&2; exit 2 ;;
  *'"tool_response":'*marker-123*) echo '{"additionalContext":"post saw marker-123"}' ;;
  *) echo "no tool_response: $in" >&2; exit 2 ;;
esac`)}
	r := w.runner(t, confine.ModeRestricted, h)
	c := call("shell", `{"command":"echo marker-123"}`)
	c.Response = json.RawMessage(`{"content":[{"type":"text","text":"marker-123\n"}],"isError":false}`)
	out := r.Run(context.Background(), PostToolUse, c)
	if out.Blocked || out.Context != "post saw marker-123" {
		t.Errorf("post hook: %+v", out)
	}
	c.Response = json.RawMessage(`{"content":[{"type":"text","text":"SECRET-OUTPUT"}]}`)
	if out := r.Run(context.Background(), PostToolUse, c); !out.Blocked || !strings.Contains(out.Reason, "carries a secret") {
		t.Errorf("post hook block: %+v", out)
	}
}

// TestSessionEvents: session hooks never block; a failure is one summary
// naming the hook and its exit code, without its stderr.
func TestSessionEvents(t *testing.T) {
	w := newWorld(t)
	hs := []Hook{
		{Event: SessionStart, Command: w.script(t, "good-start", `echo '{"additionalContext":"the build is make"}'`)},
		{Event: SessionStart, Command: w.script(t, "bad-start", "echo SECRET-STDERR >&2; exit 3")},
		{Event: SessionStart, Command: w.script(t, "blocks-start", `echo '{"decision":"block","reason":"x"}'`)},
	}
	r := w.runner(t, confine.ModeRestricted, hs...)
	out := r.Run(context.Background(), SessionStart, Call{})
	if out.Blocked || len(out.Runs) != 3 || out.Context != "the build is make" {
		t.Errorf("SessionStart: %+v", out)
	}
	f := out.Failures()
	if len(f) != 1 || f[0] != `SessionStart hook "bad-start" failed (exit 3)` {
		t.Errorf("failures %q, want the one summary", f)
	}
}

// TestRefusedHook: a hook whose directory the guard refuses fails that
// hook (a PreToolUse one blocks the call), never the runner; the reason
// names no host path.
func TestRefusedHook(t *testing.T) {
	w := newWorld(t)
	atHome := filepath.Join(w.home, "check")
	w.write(t, atHome, "#!/bin/sh\nexit 0\n", 0o755)
	hs := []Hook{
		{Event: PreToolUse, Command: atHome},
		{Event: SessionStart, Command: atHome},
	}
	r := w.runner(t, confine.ModeWorkspaceWrite, hs...)
	out := r.Run(context.Background(), PreToolUse, call("shell", `{}`))
	if !out.Blocked || !strings.Contains(out.Reason, "shared tree") || strings.Contains(out.Reason, w.root) {
		t.Errorf("refused PreToolUse hook: %+v", out)
	}
	out = r.Run(context.Background(), SessionStart, Call{})
	if out.Blocked || len(out.Failures()) != 1 || !strings.Contains(out.Failures()[0], "could not run") {
		t.Errorf("refused SessionStart hook: %+v", out)
	}
	// With the sandbox off nothing is granted or refused.
	r = w.runner(t, confine.ModeOff, hs...)
	if out := r.Run(context.Background(), PreToolUse, call("shell", `{}`)); out.Blocked {
		t.Errorf("off: %+v", out)
	}
}

// TestHookConfined: the hook runs under the session's sandbox: its own
// directory is read/exec but not writable, and a masked path stays masked.
// The probe runs with the sandbox off too, where both succeed, so the test
// can tell a refusal from a broken probe.
func TestHookConfined(t *testing.T) {
	body := `r=""
if (echo x > "$(dirname "$0")/planted") 2>/dev/null; then r="$r wrote-own-dir"; else r="$r write-refused"; fi
if cat "$HOME/.ssh/id_rsa" 2>/dev/null | grep -q SECRET-KEY; then r="$r read-secret"; else r="$r read-refused"; fi
echo "$r" >&2; exit 2`
	for _, tt := range []struct {
		mode confine.Mode
		want string
	}{
		{confine.ModeOff, "wrote-own-dir read-secret"},
		{confine.ModeWorkspaceWrite, "write-refused read-refused"},
		{confine.ModeRestricted, "write-refused read-refused"},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			w := newWorld(t)
			h := Hook{Event: PreToolUse, Command: w.script(t, "probe", body)}
			out := w.runner(t, tt.mode, h).Run(context.Background(), PreToolUse, call("shell", `{}`))
			if !strings.HasSuffix(out.Reason, `"probe": `+tt.want) {
				t.Errorf("reason %q, want it to end with %q", out.Reason, tt.want)
			}
			_, err := os.Stat(filepath.Join(w.hooks, "planted"))
			if planted := err == nil; planted != (tt.mode == confine.ModeOff) {
				t.Errorf("planted file exists: %v", planted)
			}
		})
	}
}

func TestNewRefusesBadHooks(t *testing.T) {
	w := newWorld(t)
	s := w.session(t, confine.ModeOff, nil)
	for _, h := range []Hook{
		{Event: "PreTool", Command: "/x"},
		{Event: PreToolUse, Command: "x"},
		{Event: PreToolUse, Command: "/x", Matcher: "(shell"},
		{Event: PreToolUse, Command: "/x", Timeout: -1},
	} {
		if _, err := New(s, "s", []Hook{h}); err == nil {
			t.Errorf("New accepted %+v", h)
		}
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ In, Want string }{
		{"  plain  ", "plain"},
		{"bad \xff byte", `bad \xff byte`},
		{"\x1b[1;31mbold red\x1b[0m", "bold red"},
		{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"a\r\nb\x00c\x7fd", "a\nbcd"},
		{"left\u202eright", "leftright"},
		{"see /w/proj/src/a.go and /w/proj, not /w/project", "see src/a.go and ., not /w/project"},
		{"tab\tkept", "tab\tkept"},
	}
	for _, tt := range tests {
		if got := Sanitize(tt.In, "/w/proj", 100); got != tt.Want {
			t.Errorf("Sanitize(%q) = %q, want %q", tt.In, got, tt.Want)
		}
	}
	long := strings.Repeat("é", 100)
	got := Sanitize(long, "", 51)
	if len(got) > 51 || !strings.HasSuffix(got, "[truncated]") || strings.ContainsRune(got, 0xfffd) {
		t.Errorf("clip: %q (%d bytes)", got, len(got))
	}
}

// TestImports enforces the invariants: hooks starts processes only through
// confine's launcher, touches no file itself, and depends on nothing of
// ours but confine.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			switch {
			case path == "os/exec" || path == "os" || path == "syscall" || strings.HasPrefix(path, "golang.org/x/sys"):
				t.Errorf("%s imports %s", p, path)
			case strings.HasPrefix(path, "github.com/") && path != "github.com/evener-dev/evener-mcp/confine":
				t.Errorf("%s imports %s (hooks depends on confine and the standard library only)", p, path)
			}
		}
	}
}
