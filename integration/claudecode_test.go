//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Claude Code itself (integration/claudecode, the npm package at a pinned
// version), run with -p against a scripted Anthropic Messages API on
// loopback. The fake model asks for one evener-mcp tool per turn and
// records the tool_result Claude Code sends back: what is recorded is what
// the model would have seen.

var claudePackages npmDir

// claudeBin installs Claude Code (once per run) and returns its executable.
func claudeBin(t testing.TB) string {
	t.Helper()
	dir := claudePackages.install(t, "claudecode", "@anthropic-ai/claude-code")
	p := filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("claude code is not installed in %s (its postinstall places the native binary): %v", dir, err)
	}
	return p
}

// ccStep is one turn of the fake model: the tool it asks for and what the
// tool_result must show.
type ccStep struct {
	tool  string         // evener-mcp's tool name (Claude Code's is mcp__evener__<tool>)
	input map[string]any // the tool's arguments
	want  []string       // each must appear in the result's text
	// image: the result must carry an image block whose data is this.
	image []byte
	// isError: the result must be an error (a denial, a hook's block).
	isError bool
	// why explains a failure of want to whoever reads the test's output.
	why string
}

// ccResult is what Claude Code sent the model for one tool_use.
type ccResult struct {
	raw     json.RawMessage
	texts   []string // every text block
	images  []string // base64 data of every image block
	isError bool
}

// fakeModel is the scripted Messages API.
type fakeModel struct {
	steps []ccStep
	// mu guards every field below.
	mu      sync.Mutex
	results map[int]ccResult // by step
	offered map[string]bool  // the tools the main loop offered the model
	main    int              // requests of the main loop
	others  int              // requests outside the script (titles, summaries, token counts)
	bad     []string         // requests the script could not answer, or without the test's key
}

// ServeHTTP answers /v1/messages: a request that offers evener-mcp's tools
// is the session's main loop; its step is the number of assistant turns in
// its history, so a retried request gets the same answer.
func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("X-Api-Key") != "test-key" {
		f.mu.Lock()
		f.bad = append(f.bad, r.Method+" "+r.URL.Path+" without the test's API key")
		f.mu.Unlock()
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		f.mu.Lock()
		f.bad = append(f.bad, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		f.mu.Lock()
		f.others++
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":100}`)
		return
	}
	var req struct {
		Model    string                  `json:"model"`
		Stream   bool                    `json:"stream"`
		Tools    []struct{ Name string } `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	main := false
	for _, tl := range req.Tools {
		if tl.Name == "mcp__evener__read_file" {
			main = true
		}
	}
	if !main {
		f.mu.Lock()
		f.others++
		f.mu.Unlock()
		writeMessage(w, req.Stream, req.Model, "end_turn", map[string]any{"type": "text", "text": "evener"})
		return
	}
	f.mu.Lock()
	f.main++
	for _, tl := range req.Tools {
		f.offered[tl.Name] = true
	}
	f.mu.Unlock()
	step := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			step++
		}
	}
	// Every request carries the whole history: a result is recorded from
	// the first request that holds it (a later one may have it compacted).
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		var blocks []json.RawMessage
		_ = json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			var tr struct {
				Type      string          `json:"type"`
				ToolUseID string          `json:"tool_use_id"`
				IsError   bool            `json:"is_error"`
				Content   json.RawMessage `json:"content"`
			}
			if json.Unmarshal(b, &tr) != nil || tr.Type != "tool_result" {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(tr.ToolUseID, "toolu_evener_%d", &i); err != nil {
				continue
			}
			res := ccResult{raw: b, isError: tr.IsError}
			res.texts, res.images = toolResultContent(tr.Content)
			f.mu.Lock()
			if _, seen := f.results[i]; !seen {
				f.results[i] = res
			}
			f.mu.Unlock()
		}
	}
	if step >= len(f.steps) {
		writeMessage(w, req.Stream, req.Model, "end_turn", map[string]any{"type": "text", "text": "All tools called."})
		return
	}
	s := f.steps[step]
	writeMessage(w, req.Stream, req.Model, "tool_use", map[string]any{
		"type": "tool_use", "id": fmt.Sprintf("toolu_evener_%02d", step), "name": "mcp__evener__" + s.tool, "input": s.input,
	})
}

// toolResultContent reads a tool_result's content: a string, or blocks of
// text and image.
func toolResultContent(c json.RawMessage) ([]string, []string) {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return []string{s}, nil
	}
	var blocks []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source struct {
			Data string `json:"data"`
		} `json:"source"`
	}
	_ = json.Unmarshal(c, &blocks)
	var texts, images []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "image":
			images = append(images, b.Source.Data)
		}
	}
	return texts, images
}

// sees reports whether want reached the model in r: in a text block as
// is, or in a string of the JSON a text block holds (Claude Code hands the
// model a result's structuredContent serialized as JSON).
func (r ccResult) sees(want string) bool {
	for _, s := range r.texts {
		if strings.Contains(s, want) {
			return true
		}
		var v any
		if json.Unmarshal([]byte(s), &v) == nil && jsonHas(v, want) {
			return true
		}
	}
	return false
}

// jsonHas reports whether a string in v (at any depth) contains want.
func jsonHas(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, want)
	case []any:
		for _, x := range v {
			if jsonHas(x, want) {
				return true
			}
		}
	case map[string]any:
		for _, x := range v {
			if jsonHas(x, want) {
				return true
			}
		}
	}
	return false
}

// writeMessage answers with one assistant message holding block, streamed
// as server-sent events when the request asked for a stream.
func writeMessage(w http.ResponseWriter, stream bool, model, stop string, block map[string]any) {
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	id := fmt.Sprintf("msg_evener_%d", time.Now().UnixNano())
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ev := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	ev("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	start := map[string]any{}
	var delta map[string]any
	switch block["type"] {
	case "text":
		start = map[string]any{"type": "text", "text": ""}
		delta = map[string]any{"type": "text_delta", "text": block["text"]}
	case "tool_use":
		start = map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}
		in, _ := json.Marshal(block["input"])
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(in)}
	}
	ev("content_block_start", map[string]any{"index": 0, "content_block": start})
	ev("content_block_delta", map[string]any{"index": 0, "delta": delta})
	ev("content_block_stop", map[string]any{"index": 0})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	ev("message_stop", map[string]any{})
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// claudeSteps are every evener-mcp tool, a denial, a hook's block, a
// hook's added context (glob's and the downstream tool's), an image and a
// downstream tool, in workspace-write.
func claudeSteps(e *env, png []byte) []ccStep {
	secret := filepath.Join(e.home, ".ssh", "id_rsa")
	return []ccStep{
		{tool: "read_file", input: map[string]any{"path": "hello.txt"}, want: []string{"hello\nworld\n"},
			why: "read_file: the file's text never reached the model (Claude Code hands the model structuredContent alone when a result has it; today's read_file carries the text only in its text block)"},
		{tool: "read_file", input: map[string]any{"path": "hello.txt", "offset": 2, "limit": 1}, want: []string{"world"},
			why: "read_file offset/limit: the line read never reached the model (structuredContent lacks the text)"},
		{tool: "read_file", input: map[string]any{"path": "pixel.png"}, image: png},
		{tool: "read_file", input: map[string]any{"path": secret}, isError: true, want: []string{"denylist"}},
		{tool: "write_file", input: map[string]any{"path": "new.txt", "content": "new\n"}, want: []string{"new.txt"}},
		{tool: "edit_file", input: map[string]any{"path": "new.txt", "edits": []map[string]any{{"old_text": "new", "new_text": "newer"}}}, want: []string{"+newer"}},
		{tool: "apply_patch", input: map[string]any{"patch": "*** Begin Patch\n*** Add File: patched.txt\n+patched\n*** End Patch\n"}, want: []string{"patched.txt"}},
		{tool: "glob", input: map[string]any{"pattern": "*.txt"}, want: []string{"hello.txt", "patched.txt", "hook-context-77"},
			why: "glob: the context a PostToolUse hook added never reached the model (it was in a text block only)"},
		{tool: "grep", input: map[string]any{"pattern": "wor+ld"}, want: []string{"hello.txt"}},
		{tool: "list_dir", input: map[string]any{"path": "."}, want: []string{"hello.txt", "README"}},
		{tool: "shell", input: map[string]any{"command": "echo shell-out-42; echo shell-err-43 >&2; exit 3"}, want: []string{"shell-out-42", "shell-err-43"}},
		{tool: "shell", input: map[string]any{"command": "echo forbidden-word"}, isError: true, want: []string{"commands may not say forbidden-word"}},
		{tool: "memory_write", input: map[string]any{"path": "notes/build.md", "content": "# Build\nmake -j4\n"}, want: []string{"notes/build.md"}},
		{tool: "memory_view", input: map[string]any{}, want: []string{"notes/build.md"}},
		{tool: "memory_view", input: map[string]any{"path": "notes/build.md"}, want: []string{"make -j4"},
			why: "memory_view (file): the memory file's text never reached the model (structuredContent lacks the text)"},
		{tool: "memory_edit", input: map[string]any{"path": "notes/build.md", "old_text": "-j4", "new_text": "-j8"}, want: []string{"notes/build.md"}},
		{tool: "memory_search", input: map[string]any{"pattern": "-j8", "literal": true, "scope": "project"}, want: []string{"make -j8"}},
		{tool: "memory_delete", input: map[string]any{"path": "notes/build.md"}, want: []string{"notes/build.md"}},
		{tool: "terminal_start", input: map[string]any{"command": "echo term-ready; sleep 30", "cols": 80, "rows": 24}, want: []string{"t1"}},
		{tool: "terminal_read", input: map[string]any{"id": "t1", "wait_ms": 3000}, want: []string{"term-ready"}},
		{tool: "terminal_send", input: map[string]any{"id": "t1", "text": "x", "keys": []string{"Enter"}}},
		{tool: "terminal_list", input: map[string]any{}, want: []string{"t1"}},
		{tool: "terminal_close", input: map[string]any{"id": "t1"}},
		{tool: "files__read_text_file", input: map[string]any{"path": filepath.Join(e.work, "README")}, want: []string{"worktree file", "hook-context-77"},
			why: "files__read_text_file: the downstream's text or the hook's context never reached the model (a closed output schema that does not declare hook_context fails Claude Code's validation)"},
	}
}

// TestClaudeCode: Claude Code (claude -p) calls every evener-mcp tool, a
// denial, a hook's block, an image and a downstream tool, over stdio and
// over HTTP, and each payload reaches the model in the tool_result.
func TestClaudeCode(t *testing.T) {
	bin := claudeBin(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
	forEachIdentity(t, func(t *testing.T, id runAs) {
		// "defaults": the entry a newcomer writes, with every default left
		// as it is (mode unset, network on, no --state-dir).
		for _, tr := range []string{"stdio", "http", "defaults"} {
			t.Run(tr, func(t *testing.T) {
				e := newEnv(t, id)
				writeFile(t, filepath.Join(e.work, "hello.txt"), "hello\nworld\n")
				writeFile(t, filepath.Join(e.work, "pixel.png"), string(png))
				writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "SECRET-KEY\n")
				hook := blockingHook(t, filepath.Join(e.root, "hooks"), "no-forbidden-word", `*forbidden-word*`, "commands may not say forbidden-word")
				ctxHook := hookScript(t, filepath.Join(e.root, "hooks"), "add-context", `echo '{"additionalContext":"hook-context-77"}'`)
				cfg := hookConfig(t, e, "claude", hookDef{event: "PreToolUse", matcher: "shell", command: hook},
					hookDef{event: "PostToolUse", matcher: "glob|files__read_text_file", command: ctxHook})
				down := e.mcpConfig(t, map[string]any{"files": filesServer(t)})
				flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg, "--mcp-config", down}
				if tr == "defaults" {
					flags = []string{"--config", cfg, "--mcp-config", down}
				}
				var entry map[string]any
				if tr != "http" {
					env := map[string]string{}
					for _, kv := range e.serverEnv(t) {
						k, v, _ := strings.Cut(kv, "=")
						env[k] = v
					}
					entry = map[string]any{"type": "stdio", "command": binPath, "args": flags, "env": env}
				} else {
					entry = map[string]any{"type": "http", "url": e.serve(t, flags...).url}
				}
				steps := claudeSteps(e, png)
				fm := &fakeModel{steps: steps, results: map[int]ccResult{}, offered: map[string]bool{}}
				out := runClaude(t, e, bin, fm, entry)
				fm.mu.Lock()
				defer fm.mu.Unlock()
				t.Logf("Messages API: %d requests of the script, %d others", fm.main, fm.others)
				if len(fm.bad) > 0 {
					t.Errorf("requests the fake API did not expect: %v", fm.bad)
				}
				for i, s := range steps {
					if !fm.offered["mcp__evener__"+s.tool] {
						t.Errorf("step %d: Claude Code did not offer the model mcp__evener__%s", i, s.tool)
					}
					r, ok := fm.results[i]
					if !ok {
						t.Errorf("step %d %s %v: no tool_result reached the model\nclaude output:\n%s", i, s.tool, s.input, out)
						continue
					}
					t.Logf("step %d %s: %.400s", i, s.tool, r.raw)
					if r.isError != s.isError {
						t.Errorf("step %d %s %v: is_error %v, want %v: %s", i, s.tool, s.input, r.isError, s.isError, r.raw)
					}
					for _, w := range s.want {
						if !r.sees(w) {
							why := s.why
							if why == "" {
								why = s.tool + ": the payload never reached the model"
							}
							t.Errorf("step %d: %s\nwant %q in the tool_result; Claude Code sent:\n%s", i, why, w, r.raw)
						}
					}
					if s.image != nil {
						want := base64.StdEncoding.EncodeToString(s.image)
						if len(r.images) == 0 || r.images[0] != want {
							t.Errorf("step %d %s: the image did not reach the model as an image block: %s", i, s.tool, r.raw)
						}
					}
					if bytes.Contains(r.raw, []byte("SECRET-KEY")) {
						t.Errorf("step %d %s: the secret reached the model: %s", i, s.tool, r.raw)
					}
				}
			})
		}
	})
}

// runClaude runs claude -p as the fixture's identity, with a home of its
// own, against fm on a loopback port, with evener-mcp registered as entry
// (and its tools allowed), bounded in time. It returns Claude Code's output.
func runClaude(t *testing.T, e *env, bin string, fm *fakeModel, entry map[string]any) string {
	t.Helper()
	cfgData, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"evener": entry}})
	cfg := filepath.Join(e.root, "claude-mcp.json")
	writeFile(t, cfg, string(cfgData))
	return claudePrint(t, e, bin, fm, "--strict-mcp-config", "--mcp-config", cfg)
}

// claudePrint runs claude -p against fm with the given MCP arguments
// (none: the servers registered with `claude mcp add-json`).
func claudePrint(t *testing.T, e *env, bin string, fm *fakeModel, mcpArgs ...string) string {
	t.Helper()
	api := httptest.NewServer(fm) // on 127.0.0.1
	t.Cleanup(api.Close)
	// The tools are allowed by name (--allowedTools mcp__evener), the way
	// that works for both identities: Claude Code refuses
	// --dangerously-skip-permissions as root. Built-in tools are off, so
	// the model is offered evener-mcp's alone.
	args := append([]string{"-p", "Call each tool the script asks for."}, mcpArgs...)
	args = append(args, "--allowedTools", "mcp__evener", "--tools", "",
		"--output-format", "json", "--no-session-persistence", "--max-turns", "100")
	r := claudeRun(t, e, bin, api.URL, 5*time.Minute, args...)
	if r.err != nil {
		t.Errorf("claude -p: %v\n%s", r.err, r.out)
	}
	return r.out
}

// claudeResult is one run of the claude executable.
type claudeResult struct {
	stdout string
	out    string // stdout and stderr, for a failure message
	err    error
}

// claudeRun runs Claude Code with args as the fixture's identity, in the
// worktree, with a home of its own (made once per fixture) and the
// Messages API at api, bounded by limit.
func claudeRun(t *testing.T, e *env, bin, api string, limit time.Duration, args ...string) claudeResult {
	t.Helper()
	home := filepath.Join(e.root, "claude-home")
	if _, err := os.Stat(home); err != nil {
		mustMkdir(t, home)
	}
	e.chown(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = e.work
	cmd.Env = []string{
		"HOME=" + home,
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"LANG=C.UTF-8",
		"TMPDIR=" + filepath.Join(e.root, "tmp"),
		"ANTHROPIC_BASE_URL=" + api,
		"ANTHROPIC_API_KEY=test-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"MCP_TIMEOUT=60000",
	}
	if !e.id.root && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	out := fmt.Sprintf("claude %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), so.String(), se.String())
	if ctx.Err() != nil {
		t.Fatalf("claude did not finish within %v\n%s", limit, out)
	}
	return claudeResult{stdout: so.String(), out: out, err: err}
}

// TestClaudeCodeAddJSON: the README's route for Claude Code, run as it is
// printed there: `claude mcp add-json evener '{...}'` registers the server
// with no interactive approval, `claude mcp list` shows it connected, and a
// plain `claude -p` (no --mcp-config) hands the model read_file's text.
func TestClaudeCodeAddJSON(t *testing.T) {
	bin := claudeBin(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^claude mcp add-json evener '([^']*)'$").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no `claude mcp add-json evener '{...}'` line")
	}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.work, "hello.txt"), "hello\nworld\n")
		var entry map[string]any
		if err := json.Unmarshal(m[1], &entry); err != nil {
			t.Fatalf("README add-json entry: %v: %s", err, m[1])
		}
		// The entry names the installed binary and a project path; point
		// them at the test build and the fixture, and give it the
		// fixture's environment (its home, its TMPDIR): nothing else.
		if entry["command"] != "evener-mcp" {
			t.Fatalf("README add-json entry runs %v, not evener-mcp", entry["command"])
		}
		entry["command"] = binPath
		args, _ := entry["args"].([]any)
		for i, a := range args {
			if a == "/path/to/your/project" {
				args[i] = e.work
			}
		}
		env := map[string]string{}
		for _, kv := range e.serverEnv(t) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		entry["env"] = env
		js, _ := json.Marshal(entry)
		if r := claudeRun(t, e, bin, "http://127.0.0.1:9", 2*time.Minute, "mcp", "add-json", "evener", string(js)); r.err != nil {
			t.Fatalf("claude mcp add-json: %v\n%s", r.err, r.out)
		}
		r := claudeRun(t, e, bin, "http://127.0.0.1:9", 2*time.Minute, "mcp", "list")
		if r.err != nil || !regexp.MustCompile(`(?m)^evener: .*Connected`).MatchString(r.stdout) {
			t.Fatalf("claude mcp list does not show evener connected (%v)\n%s", r.err, r.out)
		}
		t.Logf("claude mcp list: %s", strings.TrimSpace(r.stdout))
		steps := []ccStep{{tool: "read_file", input: map[string]any{"path": "hello.txt"}, want: []string{"hello\nworld\n"}}}
		fm := &fakeModel{steps: steps, results: map[int]ccResult{}, offered: map[string]bool{}}
		out := claudePrint(t, e, bin, fm)
		fm.mu.Lock()
		defer fm.mu.Unlock()
		res, ok := fm.results[0]
		t.Logf("tool_result: %.300s", res.raw)
		if !ok || !res.sees("hello\nworld\n") {
			t.Errorf("read_file's text did not reach the model through the add-json route: %s\n%s", res.raw, out)
		}
		// The README's HTTP route: `claude mcp add --transport http NAME URL`.
		hm := regexp.MustCompile("`claude mcp add --transport http evener\\s+(\\S+)`").FindSubmatch(readme)
		if hm == nil {
			t.Fatal("README.md has no `claude mcp add --transport http evener URL` route")
		}
		url := e.serve(t, "--sandbox", "workspace-write").url
		if string(hm[1]) != "http://127.0.0.1:8787/mcp" {
			t.Fatalf("README's HTTP route names %s, not serve's default address", hm[1])
		}
		if r := claudeRun(t, e, bin, "http://127.0.0.1:9", 2*time.Minute, "mcp", "add", "--transport", "http", "evener-http", url); r.err != nil {
			t.Fatalf("claude mcp add --transport http: %v\n%s", r.err, r.out)
		}
		r = claudeRun(t, e, bin, "http://127.0.0.1:9", 2*time.Minute, "mcp", "list")
		if r.err != nil || !regexp.MustCompile(`(?m)^evener-http: .*Connected`).MatchString(r.stdout) {
			t.Fatalf("claude mcp list does not show evener-http connected (%v)\n%s", r.err, r.out)
		}
	})
}
