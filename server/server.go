// Package server wires the tools to MCP: one sandbox session per MCP
// session, the capability preamble as instructions and as a resource, the
// audit log, and the transports (stdio, Streamable HTTP).
//
// # Sessions
//
// A Session is the MCP side of one sandbox session (package session owns
// the sandbox: policy, launcher, file layer, egress, audit): its tool
// definitions and handlers, hooks, preamble, log level, idle clock and
// approval state. A Hub maps MCP sessions to sessions: over stdio there is
// one, over HTTP one per Mcp-Session-Id. Every tool call runs through one
// function, Hub.call (call.go).
//
// A session may only be narrower than the server: a client may ask at
// initialisation (capabilities.experimental["evener-mcp/session"]) for fewer
// tools, a stricter mode or the network off; its MCP roots may narrow the
// worktree. Nothing a client sends can widen the policy.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/metrics"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/terminal"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
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

	// Metrics receives the server's counts (metrics.go); nil keeps none.
	Metrics *metrics.Metrics
	// ComputeProcs, when above the runtime's GOMAXPROCS, is its value
	// while a tool that Computes runs (procs.go); 0 leaves it alone.
	ComputeProcs int
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

// Session is the MCP side of one sandbox session.
type Session struct {
	sb *session.Session // the sandbox session this MCP session drives (no MCP in it)
	// Tools are the tools the session publishes.
	Tools []string

	h *Hub
	// key is the session's key in the hub (the MCP session id over
	// HTTP).
	key      string
	preamble string
	// log is the session's logger: the server's stderr, and the client
	// at the level it set (logging.go).
	log *slog.Logger
	// clientLevel is the slog level from which records go to the client;
	// clientLevelOff until it sends logging/setLevel.
	clientLevel atomic.Int64
	// scope decides the session's tools, its gateway's included
	// (toolset.go).
	scope toolScope
	// gw are the MCP servers behind this one (gateway.go); nil without any.
	gw    *sessionGateway
	hooks *sessionHooks
	// notices are warnings found while the session was built, told once
	// it starts (after a stdio server's startup line).
	notices []string
	// memory is the session's memory (memory.go); nil without one.
	memory *memoryStore
	// feed is the client's subscription to the session's violations.
	feed violationFeed
	// listens are the client's subscriptions/listen streams (listen.go).
	listens listenSet

	mu       sync.Mutex // guards handlers and defs (rebuilt when roots narrow the worktree)
	handlers map[string]tools.Tool
	defs     map[string]mcp.Tool

	inflight   atomic.Int64
	lastActive atomic.Int64 // unix nanoseconds
	expiring   atomic.Bool  // picked by the idle sweep
	shutdown   atomic.Bool  // closed by the server stopping (metrics.go)

	asking     sync.Mutex   // held while one approval question is open: one at a time
	quietUntil atomic.Int64 // no approval questions before (unix ns), after a decline

	prepMu sync.Mutex // guards prepDone and prepErr: the client's roots, read before the first call
	// prepDone: the roots were read (or the client declared none); prepErr
	// is then what every call of the session is refused with, if anything.
	prepDone bool
	prepErr  error

	closeOnce sync.Once
	closeErr  error
}

// asked reports whether the narrowing asks for anything.
func (n Narrowing) asked() bool {
	return n.Tools != nil || n.Sandbox != "" || n.Network != ""
}

// request turns a client's narrowing into the session's request.
func (n Narrowing) request() (session.Request, error) {
	var r session.Request
	var err error
	if n.Sandbox != "" {
		if r.Mode, err = confine.ParseMode(n.Sandbox); err != nil {
			return r, err
		}
	}
	if n.Network != "" {
		if r.Network, err = confine.ParseNetwork(n.Network); err != nil {
			return r, err
		}
	}
	return r, nil
}

// sessionSpec is what one session is built from.
type sessionSpec struct {
	n   Narrowing
	key string
	// policy is the base policy; nil is the server's.
	policy *confine.Policy
	// resumeID and resumeScratch resume a persisted session
	// (persist_session.go): its sandbox session id and its kept scratch.
	resumeID, resumeScratch string
	// ready runs once the session is built, before it starts (its
	// preamble measured, its MCP servers and SessionStart hooks run): the
	// stdio transport's startup line, the checks of a resumed session. An
	// error refuses the session.
	ready func(*Session) error
}

// newSession is the one place a session is put together: the sandbox
// session (package session decides its policy: the delegate floor and the
// client's request), the tools it publishes (toolset.go), its memory, its
// hooks, its MCP servers and its preamble; then it starts.
func (h *Hub) newSession(ctx context.Context, sp sessionSpec) (*Session, error) {
	s, err := h.buildSession(sp)
	if err != nil {
		return nil, err
	}
	if sp.ready != nil {
		if err := sp.ready(s); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.start(ctx)
	s.logOpened()
	return s, nil
}

// buildSession builds a session without starting it.
func (h *Hub) buildSession(sp sessionSpec) (*Session, error) {
	o := h.o
	policy := sp.policy
	if policy == nil {
		policy = o.Policy
	}
	s := &Session{h: h, key: sp.key}
	s.scope = toolScope{Server: o.Config.Tools, Client: sp.n.Tools, NoMemory: !o.Config.Memory || o.Config.StateDir == "",
		Gateway: len(o.Config.MCPServers) > 0}
	// The delegate floor is read from the tools the client's scope
	// leaves, before any is withheld for what this session lacks.
	asked, err := s.scope.publish(nil)
	if err != nil {
		return nil, err
	}
	req, err := sp.n.request()
	if err != nil {
		return nil, err
	}
	if len(o.Config.MCPServers) > 0 {
		s.gw = &sessionGateway{ready: make(chan struct{})}
	}
	s.clientLevel.Store(clientLevelOff)
	max := config.DefaultMaxConcurrentCalls
	if o.Config.MaxConcurrentCalls > 0 {
		max = o.Config.MaxConcurrentCalls
	}
	s.sb, err = session.Open(policy, tools.ChangesFiles(asked), req, session.Options{
		EnvPassthrough:  o.Config.EnvPassthrough,
		ScratchParent:   o.ScratchParent,
		FileLayer:       true,
		OpenFiles:       h.openFiles,
		Spawner:         true, // a server session lives long enough to amortise it
		StateDir:        o.Config.StateDir,
		AllowDomains:    o.Config.AllowDomains,
		SSHAgent:        (*session.SSHAgent)(o.Config.SSHAgent),
		MaxProcessCalls: max,
		Terminals: &terminal.Limits{Max: o.Config.Terminals.Max, Scrollback: o.Config.Terminals.Scrollback,
			Idle: o.Config.Terminals.Idle},
		ID:      sp.resumeID,
		Scratch: sp.resumeScratch,
		OnRefusal: func(v session.Violation) {
			s.log.Warn("egress refused", "target", v.Target, "reason", v.Raw)
			o.Metrics.EgressRefused(v.Raw)
		},
	})
	if err != nil {
		return nil, err
	}
	if o.Metrics != nil {
		s.sb.Launcher.SetStartObserver(o.Metrics.SandboxStarted)
	}
	s.log = newSessionLogger(o.logger(), s)
	s.sb.Violations.Observe(s.violationAdded)
	s.lastActive.Store(time.Now().UnixNano())
	// No race-safe file layer in this build (macOS): only the tools that
	// need none, rather than file tools that could not be confined.
	s.scope.NoFiles = s.sb.NoFileLayer != ""
	if why := s.noTerminals(); why != "" {
		// No session loopback here (macOS, or no nsenter): no terminal
		// tools rather than ones that could only fail.
		s.scope.NoTerminals = true
		s.notices = append(s.notices, "terminal tools not offered: "+why)
	}
	if s.Tools, err = s.scope.publish(nil); err != nil {
		s.sb.Close()
		return nil, err
	}
	if err := s.openMemory(); err != nil {
		s.notices = append(s.notices, fmt.Sprintf("memory tools not offered: %v", err))
		s.scope.NoMemory = true
		s.Tools, _ = s.scope.publish(nil)
	}
	s.hooks = newSessionHooks(s)
	s.buildHandlers()
	return s, nil
}

// start measures the preamble, starts the session's MCP servers and runs
// the SessionStart hooks.
func (s *Session) start(ctx context.Context) {
	for _, n := range s.notices {
		s.h.warnOnce("%s", n)
	}
	s.preamble = Preamble(ctx, s.sb.Launcher, s.h.o.Config.AllowDomains, s.sb.Degraded)
	s.preamble += s.startGateway()
	if s.sb.NoFileLayer != "" {
		s.preamble += "- only the shell is offered: " + s.sb.NoFileLayer + "; read and edit files with shell commands.\n"
		s.h.warnOnce("file tools not offered: %s; sessions publish the shell only", s.sb.NoFileLayer)
	}
	s.preamble += s.memoryPreamble()
	s.preamble += s.sb.AgentPreamble()
	if warning, extra := s.hooks.start(ctx); warning != "" || extra != "" {
		if warning != "" {
			s.log.Warn(warning)
			s.preamble += "- WARNING: " + warning + "\n"
		}
		s.preamble += extra
	}
	s.sb.Audit.Lifecycle("session-start", s.h.t.name()+"; tools "+strings.Join(s.Tools, ","))
}

// deps are the tools' dependencies on this session, over the file layer
// files (the session's, or one with an approved grant).
func (s *Session) deps(files *confine.FileAccess) tools.Deps {
	return tools.Deps{Policy: s.sb.Policy, Launcher: s.sb.Launcher, Files: files, Memory: s.memory, Terminals: s.sb.Terminals,
		Audit: session.Recorder{Audit: s.sb.Audit, Violations: s.sb.Violations}, Bounds: s.h.o.Bounds,
		Notify: s.notifyCall, NetViolations: s.sb.NetViolations}
}

func (s *Session) buildHandlers() {
	hs := map[string]tools.Tool{}
	defs := map[string]mcp.Tool{}
	for _, t := range tools.All(s.deps(s.sb.Files)) {
		if slices.Contains(s.Tools, t.Name) {
			hs[t.Name] = t
			defs[t.Name] = t.Tool
		}
	}
	s.mu.Lock()
	added := s.addGateway(hs, defs)
	s.handlers, s.defs = hs, defs
	s.mu.Unlock()
	s.h.gw.register(added)
}

// tool is the session's tool called name.
func (s *Session) tool(name string) (tools.Tool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.handlers[name]
	return t, ok
}

// logOpened records the session's opening.
func (s *Session) logOpened() {
	s.log.Info("session opened", "mode", string(s.sb.Policy.Mode()), "network", string(s.sb.Policy.Network()), "tools", strings.Join(s.Tools, ","))
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
		if s.inflight.Add(-1) == 0 {
			s.violationsIdle()
		}
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
	if err := s.sb.NarrowWorkdir(dir); err != nil {
		return err
	}
	s.buildHandlers()
	return nil
}

// Close runs the SessionEnd hooks, then closes the sandbox session (its
// processes, proxies and scratch). It is safe to call more than once.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		if s.hooks != nil {
			ctx, cancel := context.WithTimeout(context.Background(), sessionEndBudget)
			s.hooks.end(ctx)
			cancel()
		}
		s.closeGateway()
		s.closeErr = s.sb.Close()
		s.memory.Close()
		// Not to the client: it may be gone (stdin closed, DELETE).
		s.h.o.logger().Info("session closed", "session", s.sb.ID)
		s.h.o.Metrics.SessionClosed(s.closeReason())
	})
	return s.closeErr
}

// noTerminals says why this session cannot have terminals, "" when it can.
func (s *Session) noTerminals() string {
	if s.sb.Terminals == nil {
		return "this session has none"
	}
	if s.sb.Policy.Mode() == confine.ModeOff {
		return ""
	}
	if err := s.sb.Launcher.LoopbackAvailable(); err != nil {
		return err.Error()
	}
	return ""
}

// The session's recorder carries what the optional tool recorders ask.
var (
	_ tools.TerminalRecorder = session.Recorder{}
	_ tools.MemoryRecorder   = session.Recorder{}
)

// notifyCall sends the session's client a notification about the call in
// ctx, ahead of its result.
func (s *Session) notifyCall(ctx context.Context, method string, params map[string]any) {
	s.h.t.notifyCall(ctx, method, params)
}

// notifyClient sends the session's client a notification outside any
// call.
func (s *Session) notifyClient(method string, params map[string]any) {
	s.h.t.notifyClient(s.key, method, params)
}
