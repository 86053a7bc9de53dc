package tools

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/tools/internal/termsafe"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

type shellArgs struct {
	Command   string `json:"command"`
	Workdir   string `json:"workdir,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// ShellResult is shell's structured result.
type ShellResult struct {
	ExitCode   int                 `json:"exit_code"`
	Output     string              `json:"output"`
	TimedOut   bool                `json:"timed_out"`
	Truncated  bool                `json:"truncated"`
	DurationMS int64               `json:"duration_ms"`
	Violations []session.Violation `json:"violations"`
}

const shellSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "Run with bash -c in a fresh sandbox."},
    "workdir": {"type": "string", "description": "Working directory, relative to the worktree (default: the worktree)."},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the whole process tree after this many milliseconds."}
  },
  "required": ["command"],
  "additionalProperties": false
}`

const shellOutputSchema = `{
  "type": "object",
  "properties": {
    "exit_code": {"type": "integer"},
    "output": {"type": "string"},
    "timed_out": {"type": "boolean"},
    "truncated": {"type": "boolean"},
    "duration_ms": {"type": "integer"},
    "violations": {"type": "array", "items": {"type": "object", "properties": {
      "action": {"type": "string"}, "target": {"type": "string"}, "raw": {"type": "string"}},
      "required": ["action", "target", "raw"]}}
  },
  "required": ["exit_code", "output", "timed_out", "truncated", "duration_ms", "violations"]
}`

// Shell runs a command in a fresh sandbox per call, streaming its output as
// progress notifications and returning the head and tail of it.
// shellFacts are shell's facts.
var shellFacts = Facts{Name: "shell", Processes: true}

func Shell(d Deps) Tool {
	openWorld := d.Policy.Network() == confine.NetworkOn
	tool := mcp.NewTool("shell",
		mcp.WithDescription("Run a bash command in a fresh sandbox ("+string(d.Policy.Mode())+" mode, network "+string(d.Policy.Network())+"). Output is streamed as progress notifications; the result keeps its head and tail."),
		schemas(shellSchema, shellOutputSchema),
		annotations("Run a shell command", false, true, false, openWorld),
	)
	return d.tool(shellFacts, tool, handler(d, shellFacts.Name, func(ctx context.Context, req mcp.CallToolRequest, a shellArgs) (*mcp.CallToolResult, error) {
		timeout := d.Bounds.ShellTimeout
		if a.TimeoutMS > 0 {
			timeout = time.Duration(a.TimeoutMS) * time.Millisecond
		}
		if timeout > d.Bounds.ShellMax {
			timeout = d.Bounds.ShellMax
		}
		out := newCapture(d.Bounds.ShellOutput, d.progressSink(ctx, req))
		started := time.Now()
		res, err := d.Launcher.Run(ctx, confine.Command{
			Args:    []string{"bash", "-c", a.Command},
			Dir:     a.Workdir,
			Stdout:  out,
			Stderr:  out,
			Timeout: timeout,
		})
		out.settle()
		if err != nil {
			// The command did not run; what was written is the sandbox
			// builder's own message (bwrap's), which says why.
			if text, _ := out.result(); strings.TrimSpace(text) != "" {
				text = termsafe.Clean(text)
				return nil, fmt.Errorf("shell: %w: %s", err, clip(strings.TrimSpace(text), 500))
			}
			return nil, fmt.Errorf("shell: %w", err)
		}
		text, truncated := out.result()
		// The human watching the client may be at a terminal: no escape
		// sequence of the command's reaches it (docs/tools.md, "The tools").
		text = termsafe.Clean(text)
		kernel := attribute(text, d.Policy.Workdir())
		var net []session.Violation
		if d.NetViolations != nil {
			net = d.NetViolations(started, time.Now())
		}
		// Repositories the git sweep set aside after the command (docs/security.md,
		// "Git"), and protected paths the command changed in git that were
		// set back (docs/protected-paths.md, "Protected paths and runner state"): the model
		// learns why its repository or commit is gone.
		var gitNotes strings.Builder
		setAside := session.GitViolations(res)
		for i, v := range setAside {
			if v.Action == session.ActionGitSetAside || v.Target == "" {
				gitNotes.WriteString("\n[git: " + v.Raw + "]")
			} else {
				gitNotes.WriteString("\n[git: protected " + v.Target + ": " + v.Raw + "]")
			}
			setAside[i].Raw = clip(v.Raw, 300)
		}
		viol := append(append(append([]session.Violation{}, kernel...), net...), setAside...)
		if d.Audit != nil {
			// The session's violations (docs/observability.md, "Violations"); the egress
			// refusals are there already, recorded as the proxies refused
			// them.
			d.Audit.Violated(shellFacts.Name, append(kernel, setAside...))
			d.Audit.Shell(a.Command, res, len(viol))
		}
		sr := ShellResult{ExitCode: res.ExitCode, Output: text, TimedOut: res.TimedOut, Truncated: truncated,
			DurationMS: res.Duration.Milliseconds(), Violations: viol}
		summary := fmt.Sprintf("exit %d", res.ExitCode)
		if res.TimedOut {
			summary = fmt.Sprintf("timed out after %s; killed the process tree", timeout)
		}
		r := mcp.NewToolResultStructured(sr, summary+"\n"+text+gitNotes.String())
		return r, nil
	}))
}

// Progress timing (docs/clients.md, "Clients tested"). Some clients (the official
// TypeScript SDK v1, and hosts built on it) handle a progress notification
// one microtask after a result that arrived in the same read, then call
// the notification's token unknown, and some hosts drop the connection for
// it. So a call sends progress only once it has run for progressAfter (a
// quick command sends none: its result follows at once), never sends a
// final flush (the result holds the output), and its result leaves no
// sooner than progressGap after its last notification.
const (
	progressAfter = 200 * time.Millisecond
	progressGap   = 30 * time.Millisecond
)

// capture keeps the head and the tail of a stream up to limit bytes in all,
// and forwards chunks to a progress sink as they arrive.
type capture struct {
	mu       sync.Mutex // guards everything below
	limit    int
	head     []byte
	tail     []byte // ring of the last limit/2 bytes once head is full
	total    int64
	sink     func(total int64, chunk string)
	pending  []byte
	started  time.Time
	lastSent time.Time
}

func newCapture(limit int, sink func(int64, string)) *capture {
	return &capture{limit: limit, sink: sink, started: time.Now()}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	half := c.limit / 2
	if room := half - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		c.tailWrite(p[n:], c.limit-half)
	} else {
		c.tailWrite(p, c.limit-half)
	}
	if c.sink != nil {
		c.pending = append(c.pending, p...)
		if len(c.pending) > 64<<10 {
			c.pending = c.pending[len(c.pending)-64<<10:]
		}
		// At most ten notifications a second, whatever the output rate: a
		// command printing gigabytes must not flood the client. Between
		// them, only the last 64 KiB are kept to send.
		if time.Since(c.started) >= progressAfter && time.Since(c.lastSent) > 100*time.Millisecond {
			c.sendLocked()
		}
	}
	return len(p), nil
}

func (c *capture) tailWrite(p []byte, max int) {
	c.tail = append(c.tail, p...)
	if len(c.tail) > max {
		c.tail = append(c.tail[:0:0], c.tail[len(c.tail)-max:]...)
	}
}

func (c *capture) sendLocked() {
	if len(c.pending) == 0 {
		return
	}
	c.sink(c.total, string(c.pending))
	c.pending = c.pending[:0]
	c.lastSent = time.Now()
}

// settle ends progress: nothing more is sent, and it returns no sooner
// than progressGap after the last notification.
func (c *capture) settle() {
	c.mu.Lock()
	c.sink = nil
	wait := progressGap - time.Since(c.lastSent)
	c.mu.Unlock()
	if wait > 0 && wait <= progressGap {
		time.Sleep(wait)
	}
}

// result returns the kept output, with a marker where bytes were dropped.
func (c *capture) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := int64(len(c.head) + len(c.tail))
	if kept >= c.total {
		return string(c.head) + string(c.tail), false
	}
	return fmt.Sprintf("%s\n[... %d bytes of output omitted ...]\n%s", c.head, c.total-kept, c.tail), true
}

// progressSink sends output chunks as notifications/progress when the
// client asked for progress on this call.
func (d Deps) progressSink(ctx context.Context, req mcp.CallToolRequest) func(int64, string) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	notify := d.Notify
	if notify == nil {
		srv := server.ServerFromContext(ctx)
		if srv == nil {
			return nil
		}
		notify = func(ctx context.Context, method string, params map[string]any) {
			_ = srv.SendNotificationToClient(ctx, method, params)
		}
	}
	token := req.Params.Meta.ProgressToken
	return func(total int64, chunk string) {
		notify(ctx, "notifications/progress", map[string]any{
			"progressToken": token,
			"progress":      total,
			"message":       termsafe.Clean(chunk),
		})
	}
}

var refusals = []struct{ phrase, action string }{
	{"Read-only file system", "file-write"},
	{"Device or resource busy", "file-write"},
	{"Permission denied", "file-access"},
	{"Operation not permitted", "operation"},
}

// attribute finds the refusals a command met in its output, best-effort
// (docs/tools.md, "The tools": kernel denials are attributed from the output): a
// line ending in one of the kernel's refusal messages names its target just
// before it ("cat: /x: Permission denied", "mv: cannot move '.git' to '.g':
// Device or resource busy").
func attribute(output, workdir string) []session.Violation {
	out := []session.Violation{}
	seen := map[string]bool{}
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimSpace(line)
		for _, r := range refusals {
			i := strings.LastIndex(line, r.phrase)
			if i < 0 || seen[line] {
				continue
			}
			seen[line] = true
			left := strings.TrimRight(line[:i], ": ")
			if j := strings.LastIndex(left, ": "); j >= 0 {
				left = left[j+2:]
			}
			target := left
			if q := strings.IndexAny(left, "'\"`"); q >= 0 {
				if e := strings.IndexByte(left[q+1:], left[q]); e >= 0 {
					target = left[q+1 : q+1+e]
				}
			} else if f := strings.Fields(left); len(f) > 0 {
				target = f[len(f)-1]
			}
			if filepath.IsAbs(target) {
				if rel, err := filepath.Rel(workdir, target); err == nil && !strings.HasPrefix(rel, "..") {
					target = rel
				}
			}
			raw := line
			if len(raw) > 300 {
				raw = raw[:300]
			}
			out = append(out, session.Violation{Action: r.action, Target: target, Raw: raw})
			if len(out) >= 50 {
				return out
			}
			break
		}
	}
	return out
}

// clip keeps the first n bytes of s (on a rune boundary), marking a cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
