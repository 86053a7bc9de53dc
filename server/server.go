// Package server wires the tools to MCP: one sandbox session per MCP
// session, the capability preamble as instructions and as a resource, the
// audit log, and the transports (stdio, Streamable HTTP).
//
// # Sessions
//
// A Session owns the confine.Session (launcher and scratch), the file
// layer, the egress proxies and the audit stream. Closing it kills whatever
// it still runs, closes its proxies and removes its scratch. A Hub maps MCP
// sessions to sandbox sessions: over stdio there is one, over HTTP one per
// Mcp-Session-Id.
//
// A session may only be narrower than the server: a client may ask at
// initialisation (capabilities.experimental["evener-mcp/session"]) for fewer
// tools, a stricter mode or the network off; its MCP roots may narrow the
// worktree. Nothing a client sends can widen the policy.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/egress"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// sessionEndBudget bounds the SessionEnd hooks of a closing session.
const sessionEndBudget = 10 * time.Second

// Version is reported to clients.
var Version = "0.1.0-dev"

// PreambleURI is the resource holding the capability preamble.
const PreambleURI = "evener://sandbox/preamble"

// NarrowingCapability is the key under a client's
// capabilities.experimental where it may ask for a narrower session.
const NarrowingCapability = "evener-mcp/session"

// Options configure a server.
type Options struct {
	Config *config.Config
	Policy *confine.Policy
	Bounds tools.Bounds
	// Log receives the server's diagnostics, meant for the person running
	// the server (stderr), never for the model (logging.go); nil discards.
	Log *slog.Logger
	// ScratchParent, when set, is a directory private to this server in
	// which every session's scratch (and its egress bridge sockets) is
	// created, hidden from every other session in both layers.
	ScratchParent string
	// Started receives the startup line of a stdio session, read from the
	// session's own policy (the delegate floor or a client's narrowing
	// included).
	Started func(string)

	said *sync.Map // warnOnce's memory, shared by the copies of one server's Options
	// notify sends a notification about the call in ctx ahead of its
	// result (the hub's; notify.go).
	notify func(ctx context.Context, method string, params map[string]any)
	// sendTo sends a notification to one MCP session outside any call
	// (HTTP); stdio says the process is the one session.
	sendTo func(mcpID, method string, params map[string]any)
	stdio  bool
}

func (o Options) warn(format string, args ...any) {
	o.logger().Warn(fmt.Sprintf(format, args...))
}

// logger is the server's logger, a discarding one when none is set.
func (o Options) logger() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// warnOnce is warn, said once per server however many sessions meet it
// (a refused hook, say, is the same fact for every HTTP session).
func (o Options) warnOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if o.said != nil {
		if _, dup := o.said.LoadOrStore(msg, true); dup {
			return
		}
	}
	o.warn("%s", msg)
}

// Narrowing is what a client may ask for at initialisation. Every field
// only narrows: a tool the server does not publish, a mode wider than the
// server's or the network on where the server has it off is refused, and
// so is an unknown field (a misspelt request must not silently give a
// wider box than the client believes it has).
type Narrowing struct {
	Tools   []string `json:"tools,omitempty"`
	Sandbox string   `json:"sandbox,omitempty"`
	Network string   `json:"network,omitempty"`
}

// parseNarrowing reads the narrowing request from a client's capabilities;
// ok is false when there is none.
func parseNarrowing(caps mcp.ClientCapabilities) (n Narrowing, ok bool, err error) {
	v, ok := caps.Experimental[NarrowingCapability]
	if !ok {
		return n, false, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return n, true, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return n, true, fmt.Errorf("capabilities.experimental[%q]: %w", NarrowingCapability, err)
	}
	return n, true, nil
}

// Session is one sandbox session.
type Session struct {
	ID       string
	Policy   *confine.Policy
	Launcher *confine.Launcher
	Files    *confine.FileAccess
	Audit    *Audit
	Egress   *egress.Outlet // nil unless sandboxed with the network on
	Tools    []string
	// DegradedShell is set when the delegate floor could not be enforced
	// for the shell (no backend): the file tools keep the read-only rules.
	DegradedShell string
	// NoFileTools says why the file tools are not offered (no confined
	// file layer in this build), "" when they are.
	NoFileTools string

	o        Options
	preamble string
	// log is the session's logger: the server's stderr, and the client
	// at the level it set (logging.go).
	log *slog.Logger
	// clientLevel is the slog level from which records go to the client;
	// clientLevelOff until it sends logging/setLevel.
	clientLevel atomic.Int64
	// mcpID is the MCP session id the session serves (HTTP).
	mcpID string
	hooks *sessionHooks

	mu       sync.Mutex
	handlers map[string]mcpserver.ToolHandlerFunc
	defs     map[string]mcp.Tool

	inflight   atomic.Int64
	spawning   atomic.Int64 // process-spawning calls in flight (max_concurrent_calls)
	lastActive atomic.Int64 // unix nanoseconds
	expiring   atomic.Bool  // picked by the idle sweep

	asking     sync.Mutex   // one approval question at a time
	quietUntil atomic.Int64 // no approval questions before (unix ns), after a decline

	prepOnce sync.Once
	prepErr  error

	closeOnce sync.Once
	closeErr  error
}

// NewSession builds a session from the server's policy, narrowed by the
// client's request and by the tool scope: a session whose tools include no
// mutation tool runs its shell read-only (spec 000, the implicit delegate
// floor).
func NewSession(o Options, n Narrowing) (*Session, error) {
	id := newID()
	pol := o.Policy
	toolset := o.Config.Tools
	if toolset == nil {
		toolset = tools.Names
	}
	if n.Tools != nil {
		for _, t := range n.Tools {
			if !slices.Contains(toolset, t) {
				return nil, fmt.Errorf("tool %q is not available on this server (it publishes %s)", t, strings.Join(toolset, ", "))
			}
		}
		var scoped []string
		for _, t := range toolset {
			if slices.Contains(n.Tools, t) {
				scoped = append(scoped, t)
			}
		}
		toolset = scoped
	}
	noMutation := !slices.ContainsFunc(toolset, func(t string) bool { return slices.Contains(tools.MutationTools, t) })
	if noMutation && n.Sandbox != "" && n.Sandbox != string(confine.ModeReadOnly) {
		// Spec 000: an explicit sandbox does not bypass the read-only
		// floor of a session without mutation tools; off, workspace-write
		// and restricted permit persistent writes and are refused.
		return nil, fmt.Errorf("a session without %s runs read-only: sandbox %q would permit workspace writes", strings.Join(tools.MutationTools, ", "), n.Sandbox)
	}
	if n.Sandbox != "" || n.Network != "" {
		var mode confine.Mode
		var network confine.Network
		var err error
		if n.Sandbox != "" {
			if mode, err = confine.ParseMode(n.Sandbox); err != nil {
				return nil, err
			}
		}
		if n.Network != "" {
			if network, err = confine.ParseNetwork(n.Network); err != nil {
				return nil, err
			}
		}
		// An explicit request is enforced in full or refused: it does not
		// get the delegate floor's degrade.
		if pol, err = pol.Narrow(mode, network, nil); err != nil {
			return nil, err
		}
	}
	s := &Session{ID: id, Tools: toolset, o: o}
	s.clientLevel.Store(clientLevelOff)
	s.log = newSessionLogger(o.logger(), s)
	s.lastActive.Store(time.Now().UnixNano())
	switch {
	case !noMutation || pol.Mode() == confine.ModeReadOnly:
	case pol.Mode() == confine.ModeRestricted:
		// Keep restricted's narrower reads; block its writes.
		blocked, err := pol.BlockWrites()
		if err != nil {
			return nil, err
		}
		pol = blocked
	default:
		narrowed, err := pol.Narrow(confine.ModeReadOnly, "", nil)
		switch {
		case err == nil:
			pol = narrowed
		case errors.Is(err, confine.ErrUnenforceable):
			s.DegradedShell = "no tool here may change files, but no sandbox backend can enforce a read-only shell on this host: the shell is unconfined"
		default:
			return nil, err
		}
	}
	s.Policy = pol
	var err error
	if s.Launcher, err = confine.NewLauncherUnder(pol, o.Config.EnvPassthrough, o.ScratchParent); err != nil {
		return nil, err
	}
	// A server session lives long enough to amortise a spawner thread in
	// its own pids cgroup (root servers on cgroup v1).
	s.Launcher.StartSpawner()
	switch s.Files, err = s.newFiles(pol); {
	case errors.Is(err, confine.ErrNoFileLayer) && pol.Mode() != confine.ModeOff:
		// No race-safe file layer in this build (macOS): publish the
		// shell alone rather than file tools that could not be confined.
		s.Files = nil
		s.NoFileTools = err.Error()
		s.Tools = slices.DeleteFunc(slices.Clone(s.Tools), func(t string) bool { return t != "shell" })
	case err != nil:
		s.Launcher.Close()
		return nil, err
	}
	if s.Audit, err = OpenAudit(o.Config.StateDir, id, pol.Mode()); err != nil {
		s.Close()
		return nil, err
	}
	s.hooks = newSessionHooks(o, s)
	if pol.Mode() != confine.ModeOff && pol.Network() == confine.NetworkOn {
		socketParent := os.TempDir()
		if o.ScratchParent != "" {
			socketParent = o.ScratchParent
		}
		s.Egress, err = egress.OpenOutlet(o.Config.AllowDomains, os.Getenv(egress.HostsEnv), socketParent, func(v egress.Violation) {
			s.Audit.Network(v)
			s.log.Warn("egress refused", "target", v.Target, "reason", v.Raw)
		})
		if err == nil {
			err = s.Launcher.SetEgress(confine.EgressBridge(s.Egress.Bridge()))
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	s.buildHandlers()
	return s, nil
}

// filesPolicy is the policy the file tools follow: the session's, except
// that where the delegate floor could not confine the shell the file tools
// still keep the read-only write boundary (they are checked in this
// process).
func (s *Session) filesPolicy(pol *confine.Policy) *confine.Policy {
	if s.DegradedShell != "" {
		return pol.FileToolsReadOnly()
	}
	return pol
}

// StartupLine is the session's one-line report: its policy's, or, where
// the delegate floor could not confine the shell, a line that says so
// first.
func (s *Session) StartupLine() string {
	if s.DegradedShell != "" {
		reason := s.Policy.Host().Unusable()
		if reason == "" {
			reason = s.Policy.Degraded()
		}
		return "sandbox: NOT ENFORCING for the shell: this session has no tool that changes files, but no backend can enforce a read-only shell here (" +
			reason + "); the shell runs unconfined, the file tools keep the read-only boundary and mask the denylist"
	}
	return s.Policy.StartupLine()
}

// newFileAccess is confine.NewFileAccessWith; tests replace it to play a
// build without a file layer.
var newFileAccess = confine.NewFileAccessWith

// newFiles opens the file layer for pol over the session's scratch.
func (s *Session) newFiles(pol *confine.Policy) (*confine.FileAccess, error) {
	return newFileAccess(s.filesPolicy(pol), s.Launcher.Scratch(), confine.FileAccessOptions{HideBeside: s.o.ScratchParent})
}

// start measures the preamble and runs the SessionStart hooks.
func (s *Session) start(ctx context.Context, transport string) {
	s.preamble = Preamble(ctx, s.Launcher, s.o.Config.AllowDomains, s.DegradedShell)
	if s.NoFileTools != "" {
		s.preamble += "- only the shell is offered: " + s.NoFileTools + "; read and edit files with shell commands.\n"
		s.o.warnOnce("file tools not offered: %s; sessions publish the shell only", s.NoFileTools)
	}
	if warning, extra := s.hooks.start(ctx); warning != "" || extra != "" {
		if warning != "" {
			s.log.Warn(warning)
			s.preamble += "- WARNING: " + warning + "\n"
		}
		s.preamble += extra
	}
	s.Audit.Lifecycle("session-start", transport+"; tools "+strings.Join(s.Tools, ","))
}

// deps are the tools' dependencies on this session.
func (s *Session) deps(files *confine.FileAccess) tools.Deps {
	return tools.Deps{Policy: s.Policy, Session: s.Launcher, Files: files, Audit: s.Audit, Bounds: s.o.Bounds, Notify: s.o.notify,
		NetViolations: func(from, to time.Time) []tools.Violation {
			var out []tools.Violation
			for _, v := range s.Egress.Between(from, to) {
				out = append(out, tools.Violation(v))
			}
			return out
		}}
}

func (s *Session) buildHandlers() {
	hs := map[string]mcpserver.ToolHandlerFunc{}
	defs := map[string]mcp.Tool{}
	for _, t := range tools.All(s.deps(s.Files)) {
		if slices.Contains(s.Tools, t.Tool.Name) {
			hs[t.Tool.Name] = t.Handler
			defs[t.Tool.Name] = t.Tool
		}
	}
	s.mu.Lock()
	s.handlers, s.defs = hs, defs
	s.mu.Unlock()
}

func (s *Session) handler(name string) mcpserver.ToolHandlerFunc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handlers[name]
}

// logOpened records the session's opening.
func (s *Session) logOpened() {
	s.log.Info("session opened", "mode", string(s.Policy.Mode()), "network", string(s.Policy.Network()), "tools", strings.Join(s.Tools, ","))
}

// logCall records one tool call (debug) and a denial (info), with the
// call's ctx so that a client that asked for them gets them ahead of the
// result.
func (s *Session) logCall(ctx context.Context, tool string, took time.Duration, res *mcp.CallToolResult, err error) {
	switch den, ok := tools.DenialOf(res); {
	case err != nil:
		s.log.ErrorContext(ctx, "tool call failed", "tool", tool, "error", err.Error())
	case ok:
		s.log.InfoContext(ctx, "denied", "tool", tool, "rule", den.Rule, "path", den.Path)
	default:
		s.log.DebugContext(ctx, "tool call", "tool", tool, "ms", took.Milliseconds(), "is_error", res != nil && res.IsError)
	}
}

// begin marks a call in flight (an in-flight session never idles out).
func (s *Session) begin() (end func()) {
	s.inflight.Add(1)
	s.lastActive.Store(time.Now().UnixNano())
	return func() {
		s.lastActive.Store(time.Now().UnixNano())
		s.inflight.Add(-1)
	}
}

// idleSince is how long the session has had no call in flight, zero while
// one is.
func (s *Session) idleSince(now time.Time) time.Duration {
	if s.inflight.Load() > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, s.lastActive.Load()))
}

// narrowWorkdir moves the session's worktree to dir, inside the current
// one. Called before the session's first tool call only.
func (s *Session) narrowWorkdir(dir string) error {
	np, err := s.Policy.NarrowWorkdir(dir)
	if err != nil {
		return err
	}
	if np.Workdir() == s.Policy.Workdir() {
		return nil
	}
	fa, err := s.newFiles(np)
	if err != nil && s.NoFileTools == "" {
		return err
	}
	if err := s.Launcher.Narrow(np); err != nil {
		fa.Close()
		return err
	}
	old := s.Files
	s.Policy, s.Files = np, fa
	if old != nil {
		old.Close()
	}
	s.buildHandlers()
	return nil
}

// Close runs the SessionEnd hooks, kills the session's processes, closes its
// proxies and removes its scratch. It is safe to call more than once.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.hooks != nil {
			ctx, cancel := context.WithTimeout(context.Background(), sessionEndBudget)
			s.hooks.end(ctx)
			cancel()
		}
		if s.Egress != nil {
			errs = append(errs, s.Egress.Close())
		}
		if s.Files != nil {
			errs = append(errs, s.Files.Close())
		}
		if s.Launcher != nil {
			errs = append(errs, s.Launcher.Close())
		}
		s.Audit.Lifecycle("session-end", "")
		// Not to the client: it may be gone (stdin closed, DELETE).
		s.o.logger().Info("session closed", "session", s.ID)
		errs = append(errs, s.Audit.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
