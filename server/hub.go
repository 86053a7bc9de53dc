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
// that declares roots without opening one has each call refused after this
// long: errRootsUnanswered).
const rootsTimeout = 5 * time.Second

// approvalTimeout bounds how long a tool call waits for a human's answer.
const approvalTimeout = 10 * time.Minute

// quietAfterDecline is how long a session asks no approval after the human
// declined (or cancelled) one.
const quietAfterDecline = 5 * time.Minute

// Hub is the MCP server of one process: tools registered once, every call
// dispatched to the sandbox session of the client it arrived from. It
// knows no transport: what differs between stdio and HTTP is behind t.
type Hub struct {
	o   Options
	t   transport
	srv *mcpserver.MCPServer
	// said is warnOnce's memory: a warning is said once per server.
	said sync.Map
	// gw registers the gateway's published names (gateway.go).
	gw *gatewayHub
	// schemas check every call's arguments against its tool's input
	// schema (schema.go).
	schemas schemas
	// procs raises GOMAXPROCS while a tool computes (procs.go).
	procs *procs
	// persist keeps the sessions' records (serve --persist-sessions,
	// persist.go); nil without the flag.
	persist *persistStore
	// openFiles replaces the file layer's constructor (tests play a build
	// without one); nil is confine's.
	openFiles func(*confine.Policy, string, confine.FileAccessOptions) (*confine.FileAccess, error)

	// maxSess bounds the live sessions (0: no bound); set by the
	// transport before its first session.
	maxSess int
	// mu guards sessions, refused and closed.
	mu sync.Mutex
	// sessions are the live sessions by the transport's key (the MCP
	// session id over HTTP); nil while one is being built.
	sessions map[string]*Session
	// refused are keys whose initialize was refused: the transport
	// registers a session for every initialize, so the server ends them
	// on its next sweep.
	refused []string
	closed  bool
}

// newHub builds the MCP server over transport t.
func newHub(ctx context.Context, o Options, t transport) (*Hub, error) {
	h := &Hub{o: o, t: t, sessions: map[string]*Session{}, procs: newProcs(o.ComputeProcs)}
	h.gw = &gatewayHub{h: h, registered: map[string]bool{}}
	instructions, err := t.begin(ctx, h)
	if err != nil {
		return nil, err
	}
	hooks := &mcpserver.Hooks{}
	hooks.AddOnRequestInitialization(h.onRequest)
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
		if s := h.lookup(ctx); s != nil && res != nil {
			res.Instructions = s.preamble + s.gatewayStatus()
			s.gatewayAnswered()
		}
		if res != nil && res.Capabilities.Tools != nil && len(o.Config.MCPServers) > 0 {
			// listChanged only with MCP servers behind this one, whose
			// tools may change; the notifications are the session's own
			// (gateway.go), never the library's.
			res.Capabilities.Tools.ListChanged = true
		}
		h.t.initialized(ctx, res)
	})
	h.addViolations(hooks)
	h.addListen(hooks)
	hooks.AddOnUnregisterSession(func(ctx context.Context, cs mcpserver.ClientSession) {
		h.t.ended(cs)
	})
	h.srv = mcpserver.NewMCPServer("evener-mcp", Version,
		mcpserver.WithInstructions(instructions),
		// listChanged is never the library's: it would tell every
		// initialized client of each name the gateway registers, one
		// notification per downstream tool, before the client's
		// initialized too. The initialize result advertises it (above)
		// when MCP servers run behind this one, and each session tells
		// its own client of its own changes (gateway.go).
		mcpserver.WithToolCapabilities(false),
		// Subscribe: the violations resource changes (violations.go).
		mcpserver.WithResourceCapabilities(true, false),
		// Neither input-schema validation nor panic recovery here: the
		// call pipeline owns both (call.go), whichever path a call took to
		// reach it. No output-schema validation per call: every result of
		// every tool is validated against its schema by the strict
		// TypeScript client in integration/ (docs/clients.md, "Clients tested"); at
		// run time it cost an encode, a decode and a walk of every result
		// (12% of a read_file).
		// No elicitation here: it is a client's capability, which the
		// server uses (call.go) and does not advertise.
		mcpserver.WithLogging(),
		mcpserver.WithHooks(hooks),
		mcpserver.WithToolFilter(h.filterTools),
	)
	// The client's initialized (a notification: the library runs no
	// request hook for it): from now on the client may be told its tools
	// changed (gateway.go).
	h.srv.AddNotificationHandler(string(mcp.MethodNotificationInitialized), func(ctx context.Context, _ mcp.JSONRPCNotification) {
		if s := h.lookup(ctx); s != nil {
			s.gatewayInitialized()
		}
	})
	published := o.Config.Tools
	if published == nil {
		published = tools.Names()
	}
	// Each tool is registered once, with the one call pipeline (call.go);
	// the definition a client lists is its session's (filterTools).
	for _, t := range tools.All(tools.Deps{Policy: o.Policy, Bounds: o.Bounds}) {
		if slices.Contains(published, t.Name) {
			h.addTool(t.Tool, t.Facts)
		}
	}
	h.gw.ready()
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

// addTool registers one tool on the MCP server with the call pipeline.
func (h *Hub) addTool(t mcp.Tool, f tools.Facts) {
	h.schemas.add(t)
	h.srv.AddTool(t, h.call(f))
}

func (h *Hub) warn(format string, args ...any) { h.o.warn(format, args...) }

// warnOnce is warn, said once per server however many sessions meet it
// (a refused hook, say, is the same fact for every HTTP session).
func (h *Hub) warnOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if _, dup := h.said.LoadOrStore(msg, true); dup {
		return
	}
	h.warn("%s", msg)
}

// lookup is the sandbox session of the request in ctx, nil when none.
func (h *Hub) lookup(ctx context.Context) *Session {
	key := h.t.key(ctx)
	if key == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[key]
}

// onRequest runs before every request: initialize creates (or narrows)
// the sandbox session; anything else needs one.
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
		return h.t.initialize(ctx, req.Params)
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
	case req.Method == string(mcp.MethodServerDiscover):
		// A client on the sessionless revision sends no initialize or
		// initialized (newHub), and discovers instead: it has seen no tool
		// yet (what the session publishes now is its starting point, as at
		// an initialize answer), and may be told of changes of its tools
		// from now on (gateway.go).
		if s := h.lookup(ctx); s != nil {
			s.gatewayAnswered()
			s.gatewayInitialized()
		}
		return nil
	case req.Method == string(mcp.MethodPing),
		strings.HasPrefix(req.Method, "notifications/"):
		return nil
	}
	s := h.lookup(ctx)
	if s == nil {
		return errSessionless
	}
	if req.Method == string(mcp.MethodToolsList) {
		s.waitGateway()  // its servers' tools are in its first list (gateway.go)
		s.pinClient(ctx) // a client that can elicit is asked about pending tools (gateway_pins.go)
	}
	return nil
}

// parseInitialize reads a client's narrowing from its initialize params;
// asked is false when it asks for none.
func parseInitialize(params json.RawMessage) (n Narrowing, asked bool, err error) {
	var p struct {
		Capabilities mcp.ClientCapabilities `json:"capabilities"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return n, false, fmt.Errorf("initialize: %w", err)
		}
	}
	return parseNarrowing(p.Capabilities)
}

// open builds and starts a session for narrowing n under key; ready runs
// between the two (newSession).
func (h *Hub) open(ctx context.Context, n Narrowing, key string, ready func(*Session) error) (*Session, error) {
	s, err := h.newSession(ctx, sessionSpec{n: n, key: key, ready: ready})
	if err != nil {
		h.o.logger().Warn("session refused", "transport", h.t.name(), "reason", err.Error())
		return nil, fmt.Errorf("session refused: %w", err)
	}
	h.o.Metrics.SessionOpened()
	return s, nil
}

// errShuttingDown refuses a session while the server stops.
var errShuttingDown = errors.New("the server is shutting down")

// reserve holds key for a session about to be built, or says why none may
// be: the server is stopping, key is taken, or the bound is reached.
func (h *Hub) reserve(key string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		h.refused = append(h.refused, key)
		return errShuttingDown
	case h.sessions[key] != nil:
		return errors.New("this MCP session is already initialised")
	case h.maxSess > 0 && len(h.sessions) >= h.maxSess:
		h.refused = append(h.refused, key)
		return fmt.Errorf("too many sessions (at most %d); end an idle one or raise --max-sessions", h.maxSess)
	}
	h.sessions[key] = nil // reserved while the sandbox session is built
	return nil
}

// admit puts the session built for a reserved key in its place, or, when
// building it failed or the server began stopping meanwhile, frees the key.
func (h *Hub) admit(key string, s *Session, err error) error {
	h.mu.Lock()
	if err != nil || h.closed {
		delete(h.sessions, key)
		h.refused = append(h.refused, key)
		h.mu.Unlock()
		if err == nil {
			s.Close() // not under the hub's lock: SessionEnd hooks may take a while
			err = errShuttingDown
		}
		return err
	}
	h.sessions[key] = s
	h.mu.Unlock()
	return nil
}

// replace puts s in key's place and returns the session it replaced.
func (h *Hub) replace(key string, s *Session) (old *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old = h.sessions[key]
	h.sessions[key] = s
	return old
}

// refuse records a refused initialize's key (see refused).
func (h *Hub) refuse(key string) {
	h.mu.Lock()
	h.refused = append(h.refused, key)
	h.mu.Unlock()
}

// drop ends the session under key (DELETE, idle expiry, shutdown).
func (h *Hub) drop(key string) {
	h.mu.Lock()
	s := h.sessions[key]
	delete(h.sessions, key)
	h.mu.Unlock()
	if s != nil {
		s.Close()
		h.persist.forget(key)
	}
}

// Count is the number of live sandbox sessions.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.sessions {
		if s != nil {
			n++
		}
	}
	return n
}

// idle lists the keys of the sessions idle for longer than ttl, each once.
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

// takeRefused returns (and forgets) the keys of refused initializes.
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
	if len(ts) == 1 {
		// One tool: the library's check of a call (it passes the one
		// tool called), not a list the client is served (every list
		// holds our own tools too, whenever a tool is withheld). A
		// downstream tool under search not found yet passes, so that its
		// call reaches the pipeline and is told to search (toolsearch.go).
		if len(out) == 0 && s.gw != nil && s.gw.search.withheld[ts[0].Name] {
			return ts
		}
		return out
	}
	s.gatewayListedLocked(out)
	return out
}

// errRootsUnanswered refuses a call of a session whose client declared
// roots and did not answer roots/list: running it with the whole worktree
// would act beyond what the client may have named. The next call asks
// again.
var errRootsUnanswered = errors.New("the client declared roots but did not answer roots/list")

// prepare reads the client's roots before the session's first call that
// gets them (applyRoots), and is what every later call of the session is
// refused with, if anything. A client that did not answer is asked again
// at its next call: its calls are refused until it answers.
func (h *Hub) prepare(ctx context.Context, s *Session) error {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	if s.prepDone {
		return s.prepErr
	}
	err := h.applyRoots(ctx, s)
	if errors.Is(err, errRootsUnanswered) {
		return err
	}
	s.prepDone, s.prepErr = true, err
	h.persistRoots(s)
	return err
}

// applyRoots narrows the session's worktree to the client's roots, once,
// before its first tool call. Roots inside the worktree narrow it to their
// common ancestor; a root at or above the worktree leaves it as it is;
// roots outside it cannot widen anything, and when every root lies outside
// the session refuses to work rather than act outside what the client
// named. A client that declared roots and does not answer gets
// errRootsUnanswered (fail closed: the worktree the server was started
// with may be wider than the client's roots).
func (h *Hub) applyRoots(ctx context.Context, s *Session) error {
	if h.t.caps(ctx).Roots == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, rootsTimeout)
	defer cancel()
	roots, err := h.t.roots(rctx)
	if errors.Is(err, mcpserver.ErrServerInitiatedRequestUnsupported) {
		// The 2026-07-28 revision (Claude Code's over stdio) has no
		// server-initiated requests: roots come only through multi
		// round-trip requests, which this server does not make yet
		// (docs/residuals.md). The worktree stays as the server was
		// started, as for a client that declares no roots.
		s.log.Warn("roots cannot be asked on this protocol revision; the worktree stays as the server was started", "error", err.Error())
		return nil
	}
	if err != nil {
		s.log.Warn("roots/list failed; the call is refused and the next one asks again", "error", err.Error())
		why := "no answer within " + rootsTimeout.String()
		if rctx.Err() == nil || ctx.Err() != nil {
			why = err.Error()
		}
		return fmt.Errorf("%w (%s): this call was refused rather than run in the whole worktree; the next call asks again", errRootsUnanswered, why)
	}
	dir, err := narrowedRoot(s.sb.Policy.Workdir(), roots)
	if err != nil {
		return err
	}
	if dir == "" {
		return nil
	}
	if err := s.narrowWorkdir(dir); err != nil {
		return fmt.Errorf("the client's roots cannot narrow this session: %w", err)
	}
	s.sb.Audit.Lifecycle("session-roots", "worktree narrowed to the client's roots")
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
