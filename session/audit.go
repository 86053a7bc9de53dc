package session

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
)

// Audit appends one JSON line per decision to audit.jsonl in the state
// directory, under the redaction contract (docs/tools.md, "The tools"): the mode, the tool, a
// redacted path (its base name) and a truncated command; never file
// contents, never a full path of a secret.
type Audit struct {
	mu      sync.Mutex // guards writes to f: one whole line per Write
	f       *os.File
	session string
	mode    confine.Mode
}

// Record is one line of the audit log; Write fills Time, Session and Mode.
type Record struct {
	Time       string `json:"time"`
	Session    string `json:"session"`
	Tool       string `json:"tool"`
	Mode       string `json:"mode"`
	Decision   string `json:"decision"`
	Rule       string `json:"rule,omitempty"`
	Path       string `json:"path,omitempty"`
	Command    string `json:"command,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Violations int    `json:"violations,omitempty"`
}

// OpenAudit opens (creating, mode 0600) the audit log in stateDir.
func OpenAudit(stateDir, session string, mode confine.Mode) (*Audit, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(stateDir, "audit.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Audit{f: f, session: session, mode: mode}, nil
}

// Write appends r (a nil Audit records nothing).
func (a *Audit) Write(r Record) {
	if a == nil {
		return
	}
	r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	r.Session = a.session
	r.Mode = string(a.mode)
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.f.Write(append(b, '\n'))
}

// Denied records a file-tool refusal.
func (a *Audit) Denied(tool string, d *confine.Denial) {
	a.Write(Record{Tool: tool, Decision: "denied", Rule: d.Rule, Path: d.Base})
}

// Shell records a shell call and how many violations it met.
func (a *Audit) Shell(command string, res confine.Result, violations int) {
	code := res.ExitCode
	a.Write(Record{Tool: "shell", Decision: "ran", Command: Truncate(command, 200), ExitCode: &code, TimedOut: res.TimedOut, Violations: violations})
}

// Network records an egress refusal (the target is host:port as asked).
func (a *Audit) Network(v Violation) {
	a.Write(Record{Tool: "egress", Decision: "denied", Rule: v.Action, Path: Truncate(v.Target, 300), Command: Truncate(v.Raw, 200)})
}

// Escalation records a human's answer to an approval request for a
// file-tool call outside the roots: "approved", "declined" or why none was
// asked. Path is redacted to its base name like every other record.
func (a *Audit) Escalation(tool, path, decision string) {
	r := Record{Tool: tool, Decision: "escalation-" + decision, Rule: confine.RuleOutside}
	if path != "" {
		r.Path = filepath.Base(path)
	}
	a.Write(r)
}

// Lifecycle records a session starting or ending (event "session-start",
// "session-end") with a short detail (the transport, the tool scope).
func (a *Audit) Lifecycle(event, detail string) {
	a.Write(Record{Tool: "session", Decision: event, Command: Truncate(detail, 200)})
}

// Close closes the log.
func (a *Audit) Close() error {
	if a == nil {
		return nil
	}
	return a.f.Close()
}

// Truncate keeps the first n bytes of s, marking a cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Terminal records a terminal's start, what was sent to it and its close
// (docs/terminals.md, "Terminals"): the terminal's id and a detail that never holds
// what was typed (a password typed at a prompt must not reach the log),
// only its size and the named keys.
func (a *Audit) Terminal(tool, id, detail string, exitCode *int) {
	a.Write(Record{Tool: tool, Decision: "terminal-" + id, Command: Truncate(detail, 200), ExitCode: exitCode})
}
