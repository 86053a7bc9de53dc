//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The official MCP TypeScript SDK v1 client (integration/tsclient), the one
// most agent hosts embed. It lists the tools first, as hosts do, and then
// validates every structured result against the tool's output schema, error
// results included: a result that does not match throws instead of reaching
// the model.

var tsPackages npmDir

// tsClient installs the client's packages (once per run) and returns its
// directory.
func tsClient(t testing.TB) string {
	t.Helper()
	return tsPackages.install(t, "tsclient", "@modelcontextprotocol/sdk")
}

// npmDir is a directory of npm packages the tests install once per run
// (no lock file is kept: package.json pins exact versions).
type npmDir struct {
	once sync.Once
	dir  string
	err  error
}

// npmRoot holds the installed packages, outside the checkout and not under
// /tmp: every sandbox has a private /tmp, so a server installed in a
// checkout under /tmp would be invisible to the sandboxed downstream. Each
// directory is named by a hash of its source files and reused across runs.
const npmRoot = "/var/tmp/evener-it-npm"

// install copies the files of sub (relative to integration/) into a
// directory under npmRoot, runs npm install there unless pkg is installed
// already, and returns that directory.
func (n *npmDir) install(t testing.TB, sub, pkg string) string {
	t.Helper()
	n.once.Do(func() {
		if _, err := exec.LookPath("node"); err != nil {
			n.err = fmt.Errorf("node is not installed (scripts/deps.sh installs it): %w", err)
			return
		}
		if n.dir, n.err = npmCopy(sub); n.err != nil {
			return
		}
		if _, err := os.Stat(filepath.Join(n.dir, "node_modules", pkg, "package.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = n.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			n.err = fmt.Errorf("npm install in %s: %v\n%s", sub, err, out)
		}
	})
	if n.err != nil {
		t.Fatal(n.err)
	}
	return n.dir
}

// npmCopy copies the regular files of sub into npmRoot/<sub>-<hash>.
func npmCopy(sub string) (string, error) {
	ents, err := os.ReadDir(sub)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	files := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(sub, e.Name()))
		if err != nil {
			return "", err
		}
		files[e.Name()] = b
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	dir := filepath.Join(npmRoot, fmt.Sprintf("%s-%x", sub, h.Sum(nil)[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, d := range []string{npmRoot, dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	Progress  bool           `json:"progress,omitempty"`
}

type tsPlan struct {
	Transport   string            `json:"transport"`
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	URL         string            `json:"url,omitempty"`
	SetLevel    string            `json:"setLevel,omitempty"`
	Calls       []tsCall          `json:"calls"`
	Repeat      int               `json:"repeat,omitempty"`
	Concurrency int               `json:"concurrency,omitempty"`
	Violations  bool              `json:"violations,omitempty"`
}

type tsResult struct {
	I            int              `json:"i"`
	Name         string           `json:"name"`
	OK           bool             `json:"ok"`
	IsError      bool             `json:"isError"`
	Text         string           `json:"text"`
	ContentTypes []string         `json:"contentTypes"`
	Structured   map[string]any   `json:"structured"`
	Meta         map[string]any   `json:"meta"`
	Error        string           `json:"error"`
	Listed       []string         `json:"listed"`
	Done         bool             `json:"done"`
	Late         int              `json:"late"`
	Progress     int              `json:"progressEvents"`
	Errors       []string         `json:"errors"`
	Logs         []map[string]any `json:"logs"`
	Updates      int              `json:"updates"`
	Resources    []string         `json:"resources"`
	Violations   []map[string]any `json:"violations"`
}

type tsRun struct {
	listed  []string
	results []tsResult // by call index
	summary tsResult
	stderr  string
}

// stdioPlan starts the server over stdio as the fixture's identity.
func (e *env) stdioPlan(t *testing.T, flags ...string) tsPlan {
	t.Helper()
	e.chown(t)
	env := map[string]string{}
	for _, kv := range e.serverEnv(t) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	p := tsPlan{Transport: "stdio", Command: binPath, Args: flags, Env: env, Cwd: e.work}
	if !e.id.root && os.Geteuid() == 0 {
		p.Command = "setpriv"
		p.Args = append([]string{"--reuid", strconv.Itoa(e.id.uid), "--regid", strconv.Itoa(e.id.gid), "--clear-groups", "--", binPath}, flags...)
	}
	return p
}

// runTS runs the TypeScript client over plan, bounded in time.
func runTS(t *testing.T, plan tsPlan) tsRun {
	t.Helper()
	dir := tsClient(t)
	b, _ := json.Marshal(plan)
	pf := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(pf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "client.mjs"), pf)
	cmd.Dir = dir
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	run := tsRun{stderr: se.String()}
	if err != nil {
		t.Fatalf("TypeScript client: %v\nstdout:\n%s\nstderr:\n%s", err, so.String(), se.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(so.String()), "\n") {
		var r tsResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("client line %q: %v", line, err)
		}
		switch {
		case r.Listed != nil:
			run.listed = r.Listed
		case r.Done:
			run.summary = r
		default:
			run.results = append(run.results, r)
		}
	}
	if !run.summary.Done {
		t.Fatalf("the client did not finish:\n%s\n%s", so.String(), se.String())
	}
	return run
}

// strictCalls are every tool's success and denial, in workspace-write.
func strictCalls(e *env) []tsCall {
	patchOK := "*** Begin Patch\n*** Add File: patched.txt\n+patched\n*** End Patch\n"
	patchOut := "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+x\n*** End Patch\n"
	secret := filepath.Join(e.home, ".ssh", "id_rsa")
	return []tsCall{
		{Name: "read_file", Arguments: map[string]any{"path": "README"}},
		{Name: "read_file", Arguments: map[string]any{"path": "pixel.png"}},
		{Name: "read_file", Arguments: map[string]any{"path": "blob.bin"}},
		{Name: "read_file", Arguments: map[string]any{"path": secret}},
		{Name: "write_file", Arguments: map[string]any{"path": "new.txt", "content": "new\n"}},
		{Name: "write_file", Arguments: map[string]any{"path": "../sibling/x", "content": "x"}},
		{Name: "edit_file", Arguments: map[string]any{"path": "new.txt", "edits": []map[string]any{{"old_text": "new", "new_text": "newer"}}}},
		{Name: "edit_file", Arguments: map[string]any{"path": ".git/config", "edits": []map[string]any{{"old_text": "[core]", "new_text": "[core]\n\thooksPath = /tmp"}}}},
		{Name: "apply_patch", Arguments: map[string]any{"patch": patchOK}},
		{Name: "apply_patch", Arguments: map[string]any{"patch": patchOut}},
		{Name: "glob", Arguments: map[string]any{"pattern": "*.txt"}},
		{Name: "glob", Arguments: map[string]any{"pattern": "*", "path": filepath.Join(e.home, ".ssh")}},
		{Name: "grep", Arguments: map[string]any{"pattern": "worktree"}},
		{Name: "grep", Arguments: map[string]any{"pattern": "SECRET", "path": filepath.Join(e.home, ".ssh")}},
		{Name: "list_dir", Arguments: map[string]any{"path": "."}},
		{Name: "list_dir", Arguments: map[string]any{"path": filepath.Join(e.home, ".ssh")}},
		{Name: "shell", Arguments: map[string]any{"command": "echo out; echo err >&2; exit 3"}, Progress: true},
		{Name: "shell", Arguments: map[string]any{"command": "echo forbidden-word"}},
		{Name: "read_file", Arguments: map[string]any{"path": "missing-file"}},
		// The memory tools (19-25): every structured result validated by the
		// strict client; an escape is a plain error.
		{Name: "memory_write", Arguments: map[string]any{"path": "notes/build.md", "content": "# Build\nmake -j4\n"}},
		{Name: "memory_view", Arguments: map[string]any{}},
		{Name: "memory_view", Arguments: map[string]any{"path": "notes/build.md", "offset": 2, "limit": 1}},
		{Name: "memory_edit", Arguments: map[string]any{"path": "notes/build.md", "old_text": "-j4", "new_text": "-j8"}},
		{Name: "memory_search", Arguments: map[string]any{"pattern": "-j8", "literal": true, "scope": "project"}},
		{Name: "memory_delete", Arguments: map[string]any{"path": "notes/build.md"}},
		{Name: "memory_write", Arguments: map[string]any{"path": "../escape.md", "content": "x"}},
		// 26-32: the terminal tools, each result validated against its schema.
		{Name: "terminal_start", Arguments: map[string]any{"command": "echo term-ready; sleep 30", "cols": 80, "rows": 24}},
		{Name: "terminal_read", Arguments: map[string]any{"id": "t1", "wait_ms": 3000}},
		{Name: "terminal_read", Arguments: map[string]any{"id": "t1", "view": "screen"}},
		{Name: "terminal_send", Arguments: map[string]any{"id": "t1", "text": "x", "keys": []string{"Enter", "C-c"}}},
		{Name: "terminal_list", Arguments: map[string]any{}},
		{Name: "terminal_close", Arguments: map[string]any{"id": "t1"}},
		{Name: "terminal_read", Arguments: map[string]any{"id": "t1"}},
	}
}

// wantDenied says which strictCalls are refusals (by index).
var strictDenied = map[int]string{3: "denylist", 5: "outside-roots", 7: "git-metadata", 9: "git-metadata", 11: "denylist", 13: "denylist", 15: "denylist", 17: "hook"}

// TestTSClientStrict: with the official TypeScript SDK client (tools listed
// first, so every structured result is validated against its schema),
// every tool's success and denial, a hook's block and a plain error reach
// the caller as results, over stdio and over HTTP; each denial carries its
// typed object in _meta["evener-mcp/denial"].
func TestTSClientStrict(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, tr := range []string{"stdio", "http"} {
			t.Run(tr, func(t *testing.T) {
				e := newEnv(t, id)
				writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "SECRET-KEY\n")
				png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
				writeFile(t, filepath.Join(e.work, "pixel.png"), string(png))
				writeFile(t, filepath.Join(e.work, "blob.bin"), "a\x00b\x00\xff")
				if out, err := exec.Command("git", "init", "-q", e.work).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v %s", err, out)
				}
				hook := blockingHook(t, filepath.Join(e.root, "hooks"), "no-forbidden-word", `*forbidden-word*`, "commands may not say forbidden-word")
				cfg := hookConfig(t, e, "strict", hookDef{event: "PreToolUse", matcher: "shell", command: hook})
				flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg}
				var plan tsPlan
				if tr == "stdio" {
					plan = e.stdioPlan(t, flags...)
				} else {
					plan = tsPlan{Transport: "http", URL: e.serve(t, flags...).url}
				}
				plan.Calls = strictCalls(e)
				plan.Violations = true
				run := runTS(t, plan)
				if len(run.listed) != 18 { // eight tools, five memory tools, five terminal tools
					t.Errorf("listed %v", run.listed)
				}
				if len(run.results) != len(plan.Calls) {
					t.Fatalf("%d results for %d calls", len(run.results), len(plan.Calls))
				}
				for _, r := range run.results {
					c := plan.Calls[r.I]
					if !r.OK {
						t.Errorf("call %d %s %v: the client rejected the result: %s", r.I, c.Name, c.Arguments, r.Error)
						continue
					}
					rule, isDenial := strictDenied[r.I]
					den, _ := r.Meta["evener-mcp/denial"].(map[string]any)
					switch {
					case isDenial:
						if !r.IsError || den == nil || den["denied"] != true || den["rule"] != rule || r.Text == "" {
							t.Errorf("call %d %s: want a %s denial with _meta, got isError=%v meta=%v text=%q", r.I, c.Name, rule, r.IsError, r.Meta, r.Text)
						}
						if r.Structured != nil {
							t.Errorf("call %d %s: a denial carries structuredContent %v", r.I, c.Name, r.Structured)
						}
						if strings.Contains(r.Text, "SECRET") {
							t.Errorf("call %d %s: the denial leaks the secret: %s", r.I, c.Name, r.Text)
						}
					case r.I == 18 || r.I == 25 || r.I == 32: // a plain error: no such file; a memory escape; a closed terminal
						if !r.IsError || den != nil {
							t.Errorf("missing file: isError=%v meta=%v", r.IsError, r.Meta)
						}
					case r.I == 16: // a failing command is a result, not an error
						if r.IsError || r.Structured["exit_code"] != float64(3) {
							t.Errorf("shell exit 3: isError=%v %v", r.IsError, r.Structured)
						}
					default:
						if r.IsError {
							t.Errorf("call %d %s %v: unexpected error result: %s", r.I, c.Name, c.Arguments, r.Text)
						}
					}
				}
				if !strings.Contains(run.results[27].Text, "term-ready") || !strings.Contains(run.results[28].Text, "term-ready") {
					t.Errorf("the terminal's output %q, screen %q", run.results[27].Text, run.results[28].Text)
				}
				if got := run.results[1].ContentTypes; len(got) == 0 || got[0] != "image" {
					t.Errorf("the image came back as %v", got)
				}
				if len(run.summary.Errors) > 0 || run.summary.Late > 0 {
					t.Errorf("client errors %v, late progress %d", run.summary.Errors, run.summary.Late)
				}
				// The violations resource, subscribed to before the calls:
				// listed, read, and told of (docs/observability.md, "Violations").
				if !slices.Contains(run.summary.Resources, "evener://session/violations application/json") || run.summary.Updates == 0 {
					t.Errorf("violations resource: listed %v, %d updates", run.summary.Resources, run.summary.Updates)
				}
				got := map[string]bool{}
				for _, v := range run.summary.Violations {
					got[fmt.Sprint(v["action"], " ", v["target"], " ", v["tool"])] = true
				}
				for _, want := range []string{"file-read id_rsa read_file", "file-write config edit_file", "file-read .ssh list_dir"} {
					if !got[want] {
						t.Errorf("violations resource lacks %q: %v", want, run.summary.Violations)
					}
				}
			})
		}
	})
}

// TestTSClientProgressOrder: over 200 shell calls streaming output with a
// progress token, four at a time, the TypeScript client never sees a
// progress notification after its call's result (it reports one as an
// unknown token, even one that arrived in the same read as the result), over stdio and over HTTP (where the client keeps a
// standalone GET stream open, so the server's shared notification channel
// is in play).
func TestTSClientProgressOrder(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, tr := range []string{"stdio", "http"} {
			t.Run(tr, func(t *testing.T) {
				e := newEnv(t, id)
				flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off"}
				var plan tsPlan
				if tr == "stdio" {
					plan = e.stdioPlan(t, flags...)
				} else {
					plan = tsPlan{Transport: "http", URL: e.serve(t, flags...).url}
				}
				plan.Calls = []tsCall{{Name: "shell", Arguments: map[string]any{"command": "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.06; done; echo last"}, Progress: true}}
				plan.Repeat, plan.Concurrency = 200, 6
				run := runTS(t, plan)
				bad := 0
				for _, r := range run.results {
					if !r.OK || r.IsError || !strings.Contains(r.Text, "last") {
						bad++
						if bad < 4 {
							t.Errorf("call %d: ok=%v isError=%v %s %s", r.I, r.OK, r.IsError, r.Error, r.Text)
						}
					}
				}
				if len(run.results) != 200 {
					t.Errorf("%d results, want 200", len(run.results))
				}
				if run.summary.Late != 0 {
					t.Errorf("%d progress notifications followed their result", run.summary.Late)
				}
				if run.summary.Progress < 200 {
					t.Errorf("only %d progress notifications over 200 streaming calls", run.summary.Progress)
				}
				if len(run.summary.Errors) > 0 {
					t.Errorf("client errors: %v", run.summary.Errors)
				}
			})
		}
	})
}
