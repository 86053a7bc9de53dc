package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/egress"
	"github.com/evener-dev/evener-mcp/sshagent"
	"github.com/evener-dev/evener-mcp/terminal"
)

// Request is what a client may ask for a session: a stricter mode and the
// network off, never more. Empty fields keep the server's.
type Request struct {
	Mode    confine.Mode
	Network confine.Network
}

// ErrWidening is wrapped by every refusal of a request that would give a
// session more than the delegate floor allows.
var ErrWidening = errors.New("the request would widen the session")

// DegradedShell is the warning of a session whose tools change no file
// but whose shell no backend can make read-only.
const DegradedShell = "no tool here may change files, but no sandbox backend can enforce a read-only shell on this host: the shell is unconfined"

// Resolve is the session's policy: base narrowed by req, then the delegate
// floor (docs/http.md, "Narrower sessions"): a session whose tools change no file
// (mutates false) runs its shell read-only; under restricted it keeps
// restricted's reads and blocks every persistent write; an explicit mode
// other than read-only for such a session is refused. An explicit request
// is enforced in full or refused; only the floor's own narrowing may
// degrade, and degraded then says so (the file tools keep the read-only
// boundary, see FilesPolicy).
func Resolve(base *confine.Policy, mutates bool, req Request) (pol *confine.Policy, degraded string, err error) {
	if !mutates && req.Mode != "" && req.Mode != confine.ModeReadOnly {
		return nil, "", fmt.Errorf("%w: a session whose tools change no file runs read-only: sandbox %q would permit workspace writes", ErrWidening, req.Mode)
	}
	pol = base
	if req.Mode != "" || req.Network != "" {
		if pol, err = pol.Narrow(req.Mode, req.Network, nil); err != nil {
			return nil, "", err
		}
	}
	switch {
	case mutates || pol.Mode() == confine.ModeReadOnly:
		return pol, "", nil
	case pol.Mode() == confine.ModeRestricted:
		blocked, err := pol.BlockWrites()
		if err != nil {
			return nil, "", err
		}
		return blocked, "", nil
	}
	narrowed, err := pol.Narrow(confine.ModeReadOnly, "", nil)
	switch {
	case err == nil:
		return narrowed, "", nil
	case errors.Is(err, confine.ErrUnenforceable):
		return pol, DegradedShell, nil
	}
	return nil, "", err
}

// FilesPolicy is the policy the file tools follow: pol, except that where
// the delegate floor could not confine the shell (degraded), the file
// tools still keep the read-only write boundary, since they are checked in
// this process.
func FilesPolicy(pol *confine.Policy, degraded string) *confine.Policy {
	if degraded != "" {
		return pol.FileToolsReadOnly()
	}
	return pol
}

// Options are what Open needs beyond the policy.
type Options struct {
	EnvPassthrough []string
	// ScratchParent, when set, is a directory private to the server in
	// which the session's scratch and egress bridge sockets are created.
	ScratchParent string
	// FileLayer opens the race-safe file layer (the MCP server's file
	// tools); exec needs none.
	FileLayer bool
	// Spawner bounds the session's processes as a whole
	// (Launcher.StartSpawner): worth it for a long-lived session.
	Spawner bool
	// StateDir holds the audit log; "" keeps none.
	StateDir string
	// AllowDomains are added to the egress baseline; HostsFile pins names
	// for the proxies ("" reads it from EVENER_MCP_HOSTS, a trusted input
	// of the server's own environment).
	AllowDomains []string
	HostsFile    string
	// OnRefusal receives every egress refusal, besides the audit.
	OnRefusal func(Violation)
	// OpenFiles replaces the file layer's constructor (tests play a build
	// without one); nil is confine.NewFileAccessWith.
	OpenFiles func(*confine.Policy, string, confine.FileAccessOptions) (*confine.FileAccess, error)
	// MaxProcessCalls bounds the session's concurrent process-starting
	// calls (0: no bound).
	MaxProcessCalls int
	// Terminals, when set, gives the session terminals under these limits
	// and one loopback shared by its commands (docs/terminals.md, "Terminals").
	Terminals *terminal.Limits
	// SSHAgent, when set, gives the session a brokered SSH agent bound
	// into its sandboxes (docs/ssh-agent.md); nil: the session sees no agent.
	SSHAgent *SSHAgent
	// ID and Scratch, when set, resume a persisted session (docs/http.md,
	// "Sessions that survive a restart"): its id, and its kept scratch in
	// ScratchParent, reopened instead of created.
	ID      string
	Scratch string
}

// Session is one sandbox session.
type Session struct {
	ID       string
	Policy   *confine.Policy
	Launcher *confine.Launcher
	Files    *confine.FileAccess // nil without a file layer
	Audit    *Audit              // nil without a state directory
	Outlet   *egress.Outlet      // nil unless sandboxed with the network on
	// Terminals are the session's terminals (nil unless Options.Terminals).
	Terminals *terminal.Set
	// Violations are the session's recent violations (docs/observability.md,
	// "Violations"): egress refusals, file-layer denials, what the tools
	// attribute.
	Violations *Violations
	// Degraded is set when the delegate floor could not be enforced for
	// the shell (DegradedShell).
	Degraded string
	// NoFileLayer says why there is no file layer (this build has none),
	// "" when there is one or none was asked for.
	NoFileLayer string

	o        Options
	agent    *sshagent.Server // nil without Options.SSHAgent
	agentLog agentLog         // its recent refusals
	spawning atomic.Int64     // process calls in flight (MaxProcessCalls)
	closed   atomic.Bool
}

// Open resolves the session's policy (Resolve) and builds the session:
// launcher and scratch, file layer, audit, egress outlet.
func Open(base *confine.Policy, mutates bool, req Request, o Options) (*Session, error) {
	pol, degraded, err := Resolve(base, mutates, req)
	if err != nil {
		return nil, err
	}
	s := &Session{ID: newID(), Policy: pol, Degraded: degraded, Violations: &Violations{}, o: o}
	if o.ID != "" {
		s.ID = o.ID
	}
	if o.Scratch != "" {
		s.Launcher, err = confine.ReopenLauncherUnder(pol, o.EnvPassthrough, o.ScratchParent, o.Scratch)
	} else {
		s.Launcher, err = confine.NewLauncherUnder(pol, o.EnvPassthrough, o.ScratchParent)
	}
	if err != nil {
		return nil, err
	}
	if o.Spawner {
		s.Launcher.StartSpawner()
	}
	if o.Terminals != nil {
		s.Terminals = terminal.NewSet(s.Launcher, *o.Terminals)
		// What the server did in git after a terminal's program ended
		// (docs/observability.md, "Violations"): no call waits for it, so only the
		// session's violations tell.
		s.Terminals.OnEnd(func(id string, res confine.Result) {
			s.Violations.Add("terminal_start", GitViolations(res)...)
		})
	}
	if o.FileLayer {
		switch s.Files, err = s.newFiles(pol); {
		case errors.Is(err, confine.ErrNoFileLayer) && pol.Mode() != confine.ModeOff:
			// No race-safe file layer in this build (macOS): the caller
			// offers no file tools rather than unconfined ones.
			s.Files, s.NoFileLayer = nil, err.Error()
		case err != nil:
			s.Close()
			return nil, err
		}
	}
	if o.StateDir != "" {
		if s.Audit, err = OpenAudit(o.StateDir, s.ID, pol.Mode()); err != nil {
			s.Close()
			return nil, err
		}
	}
	socketParent := os.TempDir()
	if o.ScratchParent != "" {
		socketParent = o.ScratchParent
	}
	if pol.Mode() != confine.ModeOff && pol.Network() == confine.NetworkOn {
		hosts := o.HostsFile
		if hosts == "" {
			hosts = os.Getenv(egress.HostsEnv)
		}
		s.Outlet, err = egress.OpenOutlet(o.AllowDomains, hosts, socketParent, func(v Violation) {
			s.Audit.Network(v)
			s.Violations.Add("", v)
			if o.OnRefusal != nil {
				o.OnRefusal(v)
			}
		})
		if err == nil {
			err = s.Launcher.SetEgress(confine.EgressBridge(s.Outlet.Bridge()))
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("--sandbox-net on: %w", err)
		}
	}
	if o.SSHAgent != nil {
		if err := s.openAgent(o.SSHAgent, socketParent); err != nil {
			s.Close()
			return nil, fmt.Errorf("ssh_agent: %w", err)
		}
	}
	return s, nil
}

func (s *Session) newFiles(pol *confine.Policy) (*confine.FileAccess, error) {
	open := s.o.OpenFiles
	if open == nil {
		open = confine.NewFileAccessWith
	}
	return open(FilesPolicy(pol, s.Degraded), s.Launcher.Scratch(), confine.FileAccessOptions{HideBeside: s.o.ScratchParent})
}

// StartupLine is the session's one-line report: its policy's, or, where
// the delegate floor could not confine the shell, a line that says so.
func (s *Session) StartupLine() string {
	if s.Degraded != "" {
		reason := s.Policy.Host().Unusable()
		if reason == "" {
			reason = s.Policy.Degraded()
		}
		return "sandbox: NOT ENFORCING for the shell: this session has no tool that changes files, but no backend can enforce a read-only shell here (" +
			reason + "); the shell runs unconfined, the file tools keep the read-only boundary and mask the denylist"
	}
	return s.Policy.StartupLine()
}

// NarrowWorkdir moves the session's worktree to dir, inside the current
// one (a client's roots). Call it before the session's first tool call:
// it replaces the file layer.
func (s *Session) NarrowWorkdir(dir string) error {
	np, err := s.Policy.NarrowWorkdir(dir)
	if err != nil {
		return err
	}
	if np.Workdir() == s.Policy.Workdir() {
		return nil
	}
	var fa *confine.FileAccess
	if s.Files != nil {
		if fa, err = s.newFiles(np); err != nil {
			return err
		}
	}
	if err := s.Launcher.Narrow(np); err != nil {
		if fa != nil {
			fa.Close()
		}
		return err
	}
	old := s.Files
	s.Policy, s.Files = np, fa
	if old != nil {
		old.Close()
	}
	return nil
}

// ProcessCall admits one process-starting call, or refuses it at once
// (never waits) when the session already runs MaxProcessCalls of them:
// limits.procs binds each sandbox, so a session's processes are bounded
// only if its concurrent process calls are.
func (s *Session) ProcessCall() (release func(), err error) {
	max := int64(s.o.MaxProcessCalls)
	if n := s.spawning.Add(1); max > 0 && n > max {
		s.spawning.Add(-1)
		return nil, fmt.Errorf("refused: this session already runs %d process calls at once, its limit (max_concurrent_calls, which bounds the session's processes); wait for one to finish, then call again", max)
	}
	return func() { s.spawning.Add(-1) }, nil
}

// NetViolations are the egress and SSH agent refusals recorded in
// [from, to] (none without an outlet or an agent).
func (s *Session) NetViolations(from, to time.Time) []Violation {
	return append(s.Outlet.Between(from, to), s.agentLog.between(from, to)...)
}

// KeepScratch makes Close leave the session's scratch in place: the
// session is persisted and may be resumed by the next server.
func (s *Session) KeepScratch() {
	if s.Launcher != nil {
		s.Launcher.KeepScratch()
	}
}

// Close kills the session's processes, closes its outlet and file layer,
// removes its scratch (unless KeepScratch) and closes the audit log. Safe
// to call more than once.
func (s *Session) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	if s.Terminals != nil {
		s.Terminals.CloseAll()
	}
	if s.Outlet != nil {
		errs = append(errs, s.Outlet.Close())
	}
	errs = append(errs, s.agent.Close())
	if s.Files != nil {
		errs = append(errs, s.Files.Close())
	}
	if s.Launcher != nil {
		errs = append(errs, s.Launcher.Close())
	}
	s.Audit.Lifecycle("session-end", "")
	errs = append(errs, s.Audit.Close())
	return errors.Join(errs...)
}

// Violation is one refusal attributed to a call (docs/observability.md, "Violations"):
// egress.Violation under the name the packages above session use (the
// package map keeps them from importing egress). One type, two spellings.
type Violation = egress.Violation

// Memory records a memory write or delete (docs/memory.md, "Memory"): the tool,
// the scope and the file's base name; never its content.
func (a *Audit) Memory(tool, scope, path string) {
	a.Write(Record{Tool: tool, Decision: "memory-" + scope, Path: filepath.Base(path)})
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
