package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// errSessionless refuses a request that belongs to no sandbox session: a
// client speaking only a sessionless protocol revision (2026-07-28 and
// later) over HTTP, or one that skipped initialize. Sharing one sandbox
// between clients would let one read another's scratch and kill its
// processes, so there is no shared fallback.
var errSessionless = errors.New("evener-mcp serves one sandbox per MCP session: initialize a session first, with a protocol revision that keeps sessions (2025-11-25 or earlier, Mcp-Session-Id); sessionless requests are refused so that no two clients share a sandbox")

// rootsTimeout bounds the wait for a client's roots/list answer (over
// HTTP mcp-go sends it on the client's standalone GET stream only; a client
// that declares roots without opening one delays its first call by this
// much, then keeps the server's worktree).
const rootsTimeout = 5 * time.Second

// approvalTimeout bounds how long a tool call waits for a human's answer.
const approvalTimeout = 10 * time.Minute

// quietAfterDecline is how long a session asks no approval after the human
// declined (or cancelled) one.
const quietAfterDecline = 5 * time.Minute

// Hub is the MCP server of one process: tools registered once, every call
// dispatched to the sandbox session of the MCP session it arrived on.
type Hub struct {
	o        Options
	srv      *mcpserver.MCPServer
	stdio    bool
	maxSess  int
	mu       sync.Mutex
	sessions map[string]*Session // by MCP session id (HTTP)
	// refused are MCP session ids whose initialize was refused: the
	// transport registers a session for every initialize, so the server
	// ends them on its next sweep.
	refused []string
	single  *Session // the one session of a stdio server
	closed  bool
	// stdout is a stdio server's output, where a call's notifications are
	// written before its result (notify.go); nil over HTTP.
	stdout *syncWriter
	// streams counts the HTTP sessions' open GET streams (notify.go).
	streams streams
	// lane serves the gateway's calls over stdio (lane.go); nil over HTTP.
	lane *lane
	// procs raises GOMAXPROCS while a tool computes (procs.go).
	procs *procs
	// persist keeps the sessions' records (serve --persist-sessions,
	// persist.go); nil without the flag.
	persist *persistStore
}

// newHub builds the MCP server. With stdio set the hub has exactly one
// session, created now, so that clients that never send initialize (the
// sessionless revisions) are served too: over stdio the process is the
// session.
func newHub(ctx context.Context, o Options, stdio bool, maxSessions int) (*Hub, error) {
	o.said = new(sync.Map)
	h := &Hub{o: o, stdio: stdio, maxSess: maxSessions, sessions: map[string]*Session{}, procs: newProcs(o.ComputeProcs)}
	h.o.notify = h.notify
	h.o.gw = &gatewayHub{h: h, registered: map[string]bool{}}
	h.announceGateway()
	h.o.stdio = stdio
	h.o.sendTo = func(id, method string, params map[string]any) {
		_ = h.srv.SendNotificationToSpecificClient(id, method, params)
	}
	instructions := ""
	if stdio {
		s, err := h.open(ctx, Narrowing{}, "stdio", "")
		if err != nil {
			return nil, err
		}
		h.single = s
		instructions = s.preamble
	}
	hooks := &mcpserver.Hooks{}
	hooks.AddOnRequestInitialization(h.onRequest)
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
		if s := h.lookup(ctx); s != nil && res != nil {
			res.Instructions = s.preamble + s.gatewayStatus()
		}
		// The lane serves clients of the revisions with sessions; one on
		// the sessionless revision has every call served by the library.
		if h.lane != nil && res != nil && res.ProtocolVersion < mcp.ProtocolVersion20260728 && h.lane.base != nil {
			h.lane.on.Store(true)
		}
	})
	h.addViolations(hooks)
	hooks.AddOnUnregisterSession(func(ctx context.Context, cs mcpserver.ClientSession) {
		if !h.stdio {
			h.drop(cs.SessionID())
		}
	})
	h.srv = mcpserver.NewMCPServer("evener-mcp", Version,
		mcpserver.WithInstructions(instructions),
		// listChanged only with MCP servers behind this one, whose tools
		// may change (gateway.go).
		mcpserver.WithToolCapabilities(len(o.Config.MCPServers) > 0),
		// Subscribe: the violations resource changes (violations.go).
		mcpserver.WithResourceCapabilities(true, false),
		mcpserver.WithInputSchemaValidation(),
		// No output-schema validation per call: every result of every tool
		// is validated against its schema by the strict TypeScript client in
		// integration/ (README, "Clients tested"); at run time it cost an
		// encode, a decode and a walk of every result (12% of a read_file).
		mcpserver.WithRecovery(),
		mcpserver.WithElicitation(),
		mcpserver.WithLogging(),
		mcpserver.WithHooks(hooks),
		mcpserver.WithToolFilter(h.filterTools),
	)
	published := o.Config.Tools
	if published == nil {
		published = tools.Names()
	}
	// Each tool is registered once, with the one call pipeline (call.go);
	// the definition a client lists is its session's (filterTools).
	for _, t := range tools.All(tools.Deps{Policy: o.Policy, Bounds: o.Bounds}) {
		if slices.Contains(published, t.Name) {
			h.srv.AddTool(t.Tool, h.call(t.Facts))
		}
	}
	h.o.gw.ready()
	h.addViolationsResource()
	h.srv.AddResource(mcp.NewResource(PreambleURI, "sandbox preamble",
		mcp.WithResourceDescription("What this session's sandbox enforces, as the model is told at start."),
		mcp.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			s := h.lookup(ctx)
			if s == nil {
				return nil, errSessionless
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: PreambleURI, MIMEType: "text/plain", Text: s.preamble + s.gatewayStatus()}}, nil
		})
	return h, nil
}

// lookup is the sandbox session of the request in ctx, nil when none.
func (h *Hub) lookup(ctx context.Context) *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stdio {
		return h.single
	}
	cs := mcpserver.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return nil
	}
	return h.sessions[cs.SessionID()]
}

// onRequest runs before every request: initialize creates (or, over
// stdio, narrows) the sandbox session; anything else needs one.
func (h *Hub) onRequest(ctx context.Context, _ any, message any) error {
	var raw []byte
	switch m := message.(type) {
	case json.RawMessage:
		raw = m
	case []byte:
		raw = m
	default:
		return nil
	}
	// The method alone, read without decoding (or copying) the rest: a
	// tools/call may carry a 10 MiB write. Only the small requests whose
	// params matter here are decoded whole; a method the scan cannot read
	// (an escaped key) falls back to a full decode.
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if m := topLevel(raw, "method"); m == nil || json.Unmarshal(m, &req.Method) != nil {
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil // mcp-go answers the parse error itself
		}
	}
	if req.Method == string(mcp.MethodInitialize) || req.Method == string(mcp.MethodSetLogLevel) {
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil
		}
	}
	switch {
	case req.Method == string(mcp.MethodInitialize):
		return h.initialize(ctx, req.Params)
	case req.Method == string(mcp.MethodSetLogLevel):
		var p struct {
			Level string `json:"level"`
		}
		s := h.lookup(ctx)
		if s == nil {
			return errSessionless
		}
		if json.Unmarshal(req.Params, &p) == nil {
			s.setClientLevel(p.Level)
		}
		return nil
	case req.Method == string(mcp.MethodPing), req.Method == string(mcp.MethodServerDiscover),
		strings.HasPrefix(req.Method, "notifications/"):
		return nil
	}
	s := h.lookup(ctx)
	if s == nil {
		return errSessionless
	}
	if req.Method == string(mcp.MethodToolsList) {
		s.waitGateway() // its servers' tools are in its first list (gateway.go)
	}
	return nil
}

func (h *Hub) initialize(ctx context.Context, params json.RawMessage) error {
	var p struct {
		Capabilities mcp.ClientCapabilities `json:"capabilities"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
	}
	n, asked, err := parseNarrowing(p.Capabilities)
	if err != nil {
		if cs := mcpserver.ClientSessionFromContext(ctx); !h.stdio && cs != nil && cs.SessionID() != "" {
			h.mu.Lock()
			h.refused = append(h.refused, cs.SessionID())
			h.mu.Unlock()
		}
		return err
	}
	if h.stdio {
		if !asked {
			return nil
		}
		s, err := h.open(ctx, n, "stdio", "")
		if err != nil {
			return err
		}
		h.mu.Lock()
		old := h.single
		h.single = s
		h.mu.Unlock()
		old.Close()
		return nil
	}
	cs := mcpserver.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return errSessionless
	}
	id := cs.SessionID()
	if h.resumed(ctx, id) {
		return nil // the replayed initialize of a resumed session (persist_http.go)
	}
	h.mu.Lock()
	switch {
	case h.closed:
		h.refused = append(h.refused, id)
		h.mu.Unlock()
		return errors.New("the server is shutting down")
	case h.sessions[id] != nil:
		h.mu.Unlock()
		return errors.New("this MCP session is already initialised")
	case h.maxSess > 0 && len(h.sessions) >= h.maxSess:
		h.refused = append(h.refused, id)
		h.mu.Unlock()
		return fmt.Errorf("too many sessions (at most %d); end an idle one or raise --max-sessions", h.maxSess)
	}
	h.sessions[id] = nil // reserved while the sandbox session is built
	h.mu.Unlock()
	s, err := h.open(ctx, n, "http", id)
	h.mu.Lock()
	if err != nil || h.closed {
		delete(h.sessions, id)
		h.refused = append(h.refused, id)
		h.mu.Unlock()
		if err == nil {
			s.Close() // not under the hub's lock: SessionEnd hooks may take a while
			err = errors.New("the server is shutting down")
		}
		return err
	}
	h.sessions[id] = s
	h.mu.Unlock()
	h.persistNew(s, n, params)
	return nil
}

// open creates and starts a sandbox session.
func (h *Hub) open(ctx context.Context, n Narrowing, transport, mcpID string) (*Session, error) {
	s, err := NewSession(h.o, n)
	if err != nil {
		h.o.logger().Warn("session refused", "transport", transport, "reason", err.Error())
		return nil, fmt.Errorf("session refused: %w", err)
	}
	s.mcpID = mcpID
	if transport == "stdio" && h.o.Started != nil {
		// The startup line stays the first line on stderr: before the
		// session's start-up warnings (hooks, memory) and records.
		line := s.StartupLine()
		if n.asked() {
			line += " (narrowed by the client)"
		}
		h.o.Started(line)
	}
	if s.Degraded != "" && transport != "stdio" {
		s.log.Warn(s.Degraded)
	}
	s.start(ctx, transport)
	s.logOpened()
	h.o.Metrics.SessionOpened()
	return s, nil
}

// drop ends the sandbox session of an MCP session (DELETE, idle expiry,
// shutdown).
func (h *Hub) drop(id string) {
	h.mu.Lock()
	s := h.sessions[id]
	delete(h.sessions, id)
	h.mu.Unlock()
	if s != nil {
		s.Close()
		h.persist.forget(id)
	}
}

// Count is the number of live sandbox sessions.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stdio {
		return 1
	}
	n := 0
	for _, s := range h.sessions {
		if s != nil {
			n++
		}
	}
	return n
}

// idle lists the MCP session ids idle for longer than ttl, each once.
func (h *Hub) idle(ttl time.Duration) []string {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, s := range h.sessions {
		if s != nil && s.idleSince(now) > ttl && s.expiring.CompareAndSwap(false, true) {
			out = append(out, id)
		}
	}
	return out
}

// takeRefused returns (and forgets) the ids of refused initializes.
func (h *Hub) takeRefused() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.refused
	h.refused = nil
	return out
}

// closeAll refuses new sessions and closes every live one.
func (h *Hub) closeAll() {
	h.mu.Lock()
	h.closed = true
	all := []*Session{}
	for id, s := range h.sessions {
		if s != nil {
			all = append(all, s)
		}
		delete(h.sessions, id)
	}
	if h.single != nil {
		all = append(all, h.single)
	}
	h.mu.Unlock()
	for _, s := range all {
		s.shutdown.Store(true)
	}
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.suspend(s) // with --persist-sessions, the record and scratch stay
			s.Close()
		}()
	}
	wg.Wait()
}

func (h *Hub) filterTools(ctx context.Context, ts []mcp.Tool) []mcp.Tool {
	s := h.lookup(ctx)
	if s == nil {
		return nil
	}
	// The session's own definitions: their descriptions and annotations
	// name the session's mode and network, which may be narrower than the
	// server's.
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]mcp.Tool, 0, len(ts))
	for _, t := range ts {
		if d, ok := s.defs[t.Name]; ok {
			out = append(out, d)
		}
	}
	return out
}

func clientCaps(ctx context.Context) mcp.ClientCapabilities {
	if cs, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		return cs.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

// applyRoots narrows the session's worktree to the client's roots, once,
// before its first tool call. Roots inside the worktree narrow it to their
// common ancestor; a root at or above the worktree leaves it as it is;
// roots outside it cannot widen anything, and when every root lies outside
// the session refuses to work rather than act outside what the client
// named.
func (h *Hub) applyRoots(ctx context.Context, s *Session) error {
	if clientCaps(ctx).Roots == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, rootsTimeout)
	defer cancel()
	res, err := h.srv.RequestRoots(rctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}})
	if err != nil {
		s.log.Warn("roots/list failed; the worktree stays as the server was started", "error", err.Error())
		return nil
	}
	dir, err := narrowedRoot(s.Policy.Workdir(), res.Roots)
	if err != nil {
		return err
	}
	if dir == "" {
		return nil
	}
	if err := s.narrowWorkdir(dir); err != nil {
		return fmt.Errorf("the client's roots cannot narrow this session: %w", err)
	}
	s.Audit.Lifecycle("session-roots", "worktree narrowed to the client's roots")
	return nil
}

// narrowedRoot is the directory roots narrow wd to, "" for no change.
func narrowedRoot(wd string, roots []mcp.Root) (string, error) {
	if len(roots) == 0 {
		return "", nil
	}
	var inside []string
	for _, r := range roots {
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" || u.Path == "" || !filepath.IsAbs(u.Path) {
			continue
		}
		p := filepath.Clean(u.Path)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		switch {
		case confine.Within(wd, p):
			return "", nil // a root holding the whole worktree: nothing to narrow
		case confine.Within(p, wd):
			inside = append(inside, p)
		}
	}
	if len(inside) == 0 {
		return "", errors.New("every root the client named lies outside this server's worktree; the session cannot work there and will not work elsewhere")
	}
	common := inside[0]
	for _, p := range inside[1:] {
		for !confine.Within(p, common) {
			common = filepath.Dir(common)
		}
	}
	return common, nil
}
