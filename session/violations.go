package session

import (
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
)

// MaxViolations bounds a session's recent violations (docs/observability.md,
// "Violations"): the oldest is dropped when a new one arrives.
const MaxViolations = 256

// Violation actions besides the egress proxies' "network-outbound".
const (
	ActionFileRead    = "file-read"
	ActionFileWrite   = "file-write"
	ActionGitSetAside = "git-set-aside"
	// ActionProtectedInGit: a command changed a protected path through
	// git (a ref, HEAD or index entry it moved); the server set it back
	// (docs/protected-paths.md, "Protected paths and runner state").
	ActionProtectedInGit = "protected-in-git"
)

// GitViolations are what a command's result says the server did in git
// after it: repositories the git sweep set aside, protected paths set back.
func GitViolations(res confine.Result) []Violation {
	var out []Violation
	for _, q := range res.Quarantined {
		target, _, _ := strings.Cut(q, ":")
		out = append(out, Violation{Action: ActionGitSetAside, Target: target, Raw: q})
	}
	for _, g := range res.GitProtected {
		out = append(out, Violation{Action: ActionProtectedInGit, Target: g.Path, Raw: g.What})
	}
	return out
}

// Noted is one violation as the session keeps it: when it was recorded
// and, when known, the tool whose call met it.
type Noted struct {
	Violation
	Time string `json:"time"` // RFC 3339, UTC
	Tool string `json:"tool,omitempty"`
}

// Violations are a session's recent violations, a ring of MaxViolations,
// each redacted as it is added (no host path: a path is named by its base
// name). Safe for concurrent use; a nil *Violations records nothing.
type Violations struct {
	mu      sync.Mutex // guards ring, next, full and observe
	ring    [MaxViolations]Noted
	next    int  // where the next one goes
	full    bool // the ring has wrapped
	observe func()
}

// Observe sets f to be called (outside the lock, on the adding goroutine)
// after every Add that added anything.
func (r *Violations) Observe(f func()) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observe = f
}

// Add records vs, met by a call of tool ("" when no call is known).
func (r *Violations) Add(tool string, vs ...Violation) {
	if r == nil || len(vs) == 0 {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	r.mu.Lock()
	for _, v := range vs {
		r.ring[r.next] = Noted{Violation: redact(v), Time: now, Tool: tool}
		r.next = (r.next + 1) % MaxViolations
		if r.next == 0 {
			r.full = true
		}
	}
	f := r.observe
	r.mu.Unlock()
	if f != nil {
		f()
	}
}

// List returns the recorded violations, oldest first.
func (r *Violations) List() []Noted {
	out := []Noted{}
	if r == nil {
		return out
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full {
		out = append(out, r.ring[r.next:]...)
	}
	return append(out, r.ring[:r.next]...)
}

// FileAction is the violation action of a refused file-layer operation
// (confine.Denial.Op): reads, listings and resolutions are file-read,
// everything else file-write.
func FileAction(op string) string {
	switch op {
	case "read", "list", "resolve", "stat":
		return ActionFileRead
	}
	return ActionFileWrite
}

// absPath is an absolute path in free text: a '/' at the start or after
// a space, quote, bracket or '=', not "//" (a URL's authority).
var absPath = regexp.MustCompile("(^|[\\s'\"`(\\[=])(/[^/\\s'\"`)\\]:,][^\\s'\"`)\\]:,]*)")

// redact keeps a violation free of host paths and bounded: an absolute
// target is named by its base name, every absolute path in raw too.
func redact(v Violation) Violation {
	v.Action = Truncate(v.Action, 64)
	if filepath.IsAbs(v.Target) {
		v.Target = filepath.Base(v.Target)
	}
	v.Target = Truncate(v.Target, 300)
	v.Raw = absPath.ReplaceAllStringFunc(v.Raw, func(m string) string {
		i := strings.IndexByte(m, '/')
		return m[:i] + filepath.Base(m[i:])
	})
	v.Raw = Truncate(v.Raw, 300)
	return v
}

// Recorder is what the tools report to (tools.Recorder): the session's
// audit log and its violations. A nil Audit audits nothing.
type Recorder struct {
	Audit      *Audit
	Violations *Violations
}

// Denied records a file-layer refusal: audited, and a file-read or
// file-write violation naming the base name.
func (r Recorder) Denied(tool string, d *confine.Denial) {
	r.Audit.Denied(tool, d)
	r.Violations.Add(tool, Violation{Action: FileAction(d.Op), Target: d.Base, Raw: d.Error()})
}

// Shell records a shell call and how many violations it met.
func (r Recorder) Shell(command string, res confine.Result, violations int) {
	r.Audit.Shell(command, res, violations)
}

// Violated records violations a tool found itself (the kernel refusals
// attributed from a command's output, repositories the git sweep set
// aside). Egress refusals are recorded by the outlet as they happen.
func (r Recorder) Violated(tool string, vs []Violation) {
	r.Violations.Add(tool, vs...)
}

// Memory records a memory write or delete (tools.MemoryRecorder).
func (r Recorder) Memory(tool, scope, path string) {
	r.Audit.Memory(tool, scope, path)
}

// Terminal records a terminal's start, sends and close
// (tools.TerminalRecorder).
func (r Recorder) Terminal(tool, id, detail string, exitCode *int) {
	r.Audit.Terminal(tool, id, detail, exitCode)
}
