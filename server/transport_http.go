package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configure `evener-mcp serve`.
type HTTPOptions struct {
	// Listen is host:port; loopback unless the person running it says
	// otherwise (and then a Token is required).
	Listen string
	// Token, when set, is the bearer token every /mcp request must carry.
	Token string
	// IdleTimeout ends a session with no call in flight for this long.
	IdleTimeout time.Duration
	// MaxSessions bounds live sessions; initialize beyond it is refused.
	MaxSessions int
	// MaxBody bounds one request body (default MaxMessageBytes).
	MaxBody int64
	// Ready is called once the listener is bound, with its address.
	Ready func(net.Addr)
	// PersistSessions keeps each session's record and scratch across a
	// restart (docs/http.md, "Sessions that survive a restart"; persist.go).
	PersistSessions bool
	// DrainTimeout bounds the drain after ctx ends: new sessions and
	// calls are refused (503) and /healthz answers 503 while the calls in
	// flight finish, for at most this long; then every session is closed.
	// Zero or less: no drain.
	DrainTimeout time.Duration
	// MetricsListen, when set, serves Prometheus metrics at /metrics on
	// this separate host:port (metrics.go); loopback unless
	// MetricsAllowRemote.
	MetricsListen      string
	MetricsAllowRemote bool
	// MetricsReady is called once the metrics listener is bound.
	MetricsReady func(net.Addr)
}

// Defaults of HTTPOptions.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxSessions = 256
	shutdownBudget     = 10 * time.Second
)

// HealthPath is the readiness route on the MCP listener: 200 while the
// server takes sessions, 503 while it drains (deploy/kubernetes probes it).
const HealthPath = "/healthz"

// IsLoopback reports whether a listen address binds loopback only.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServeHTTP serves MCP over Streamable HTTP at /mcp, one sandbox session per
// MCP session, until ctx ends; then every session is closed (processes
// killed, proxies closed, scratch removed) before it returns.
func ServeHTTP(ctx context.Context, o Options, ho HTTPOptions) (err error) {
	if ho.IdleTimeout <= 0 {
		ho.IdleTimeout = DefaultIdleTimeout
	}
	if ho.MaxBody <= 0 {
		ho.MaxBody = MaxMessageBytes
	}
	if !IsLoopback(ho.Listen) && ho.Token == "" {
		return fmt.Errorf("listen %s: not a loopback address, and no bearer token is set; anyone who can reach it could run commands in the sandbox", ho.Listen)
	}
	if !peerCheck && ho.Token == "" {
		return fmt.Errorf("listen %s: this platform cannot tell which user a loopback connection comes from, so any local account could run commands in the sandbox: set a bearer token (--token-file)", ho.Listen)
	}
	// Refused peers are recorded in the audit log under session "serve".
	audit, err := session.OpenAudit(o.Config.StateDir, "serve", o.Policy.Mode())
	if err != nil {
		return err
	}
	defer audit.Close()
	store, cleanup, err := makeScratchParent(&o, ho)
	if err != nil {
		return err
	}
	defer cleanup()
	if ho.MetricsListen != "" {
		o.Metrics = newMetrics()
		stopMetrics, err := serveMetrics(o.Metrics, ho.MetricsListen, ho.MetricsAllowRemote, ho.MetricsReady, func(err error) { o.logger().Error(err.Error()) })
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	t := &httpTransport{maxSessions: ho.MaxSessions}
	h, err := newHub(ctx, o, t)
	if err != nil {
		return err
	}
	h.persist = store
	t.drain = &drainer{metric: o.Metrics}
	handler := t.handler(ho, store)
	ln, err := net.Listen("tcp", ho.Listen)
	if err != nil {
		h.closeAll()
		return fmt.Errorf("listen %s: %w", ho.Listen, err)
	}
	if ho.Ready != nil {
		ho.Ready(ln.Addr())
	}
	hs := &http.Server{Handler: t.peerGuard(ho, audit, handler), ConnContext: connContext, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(h.o.logger().Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	return t.run(ctx, ho, hs, served)
}

// makeScratchParent makes the directory private to this server in which every
// session's scratch and bridge sockets live, hidden from the other
// sessions, into o.ScratchParent; with --persist-sessions, a stable one
// and the store of the sessions' records. cleanup undoes what it made.
func makeScratchParent(o *Options, ho HTTPOptions) (store *persistStore, cleanup func(), err error) {
	parent := o.Policy.ScratchRoot()
	if parent == "" {
		parent = os.TempDir()
	}
	if ho.PersistSessions {
		// A stable parent, found again by the next server on this state
		// directory; its scratch outlives this process.
		if o.ScratchParent, err = scratchParentFor(parent, o.Config.StateDir); err != nil {
			return nil, nil, err
		}
		if store, err = openPersistStore(o.Config.StateDir, o.ScratchParent); err != nil {
			return nil, nil, err
		}
		n, errs := store.sweep(ho.IdleTimeout, time.Now(), func(string) bool { return false })
		logSweep(o.logger(), n, errs)
		return store, store.close, nil
	}
	// A short name: Unix socket paths (the bridge sockets live here) are
	// limited to 107 bytes.
	if o.ScratchParent, err = os.MkdirTemp(parent, "evs-"); err != nil {
		return nil, nil, fmt.Errorf("scratch parent: %w", err)
	}
	made := o.ScratchParent
	cleanup = func() { confine.RemoveTree(made) }
	if o.ScratchParent, err = filepath.EvalSymlinks(o.ScratchParent); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("scratch parent: %w", err)
	}
	return nil, cleanup, nil
}

// httpTransport is the Streamable HTTP transport: one session per MCP
// session id, made at its initialize, ended by DELETE, idle expiry or the
// server stopping.
type httpTransport struct {
	mcpClient
	maxSessions int
	// streams counts the sessions' open GET streams (http_streams.go).
	streams    streams
	drain      *drainer
	streamable *mcpserver.StreamableHTTPServer
	resumer    *resumer // nil without --persist-sessions
	// ids mints and validates the MCP session ids (set by handler).
	ids *idManager
	// lane serves the gateway's calls without the library (http_lane.go).
	lane *httpLane
}

func (t *httpTransport) name() string { return "http" }

// begin names, once, every configured MCP server behind this one and the
// network it has (host: the one spawn that keeps the host's network).
// Sessions are made at their initialize.
func (t *httpTransport) begin(_ context.Context, h *Hub) (string, error) {
	t.h = h
	h.maxSess = t.maxSessions
	if len(h.o.Config.MCPServers) > 0 {
		h.o.logger().Info("MCP servers behind evener-mcp: " + gatewayLine(h.o.Config.MCPServers))
	}
	return "", nil
}

func (t *httpTransport) key(ctx context.Context) string {
	if cs := mcpserver.ClientSessionFromContext(ctx); cs != nil {
		return cs.SessionID()
	}
	return ""
}

// initialize opens the session of a new MCP session id.
func (t *httpTransport) initialize(ctx context.Context, params json.RawMessage) error {
	h := t.h
	id := t.key(ctx)
	n, _, err := parseInitialize(params)
	if err != nil {
		if id != "" {
			h.refuse(id)
		}
		return err
	}
	if id == "" {
		return errSessionless
	}
	if h.resumed(ctx, id) {
		return nil // the replayed initialize of a resumed session (persist_http.go)
	}
	if err := h.reserve(id); err != nil {
		return err
	}
	s, err := h.open(ctx, n, id, func(s *Session) error {
		if s.sb.Degraded != "" {
			s.log.Warn(s.sb.Degraded)
		}
		return nil
	})
	if err := h.admit(id, s, err); err != nil {
		return err
	}
	h.persistNew(s, n, params)
	return nil
}

// initialized records the library's session for the lane.
func (t *httpTransport) initialized(ctx context.Context, res *mcp.InitializeResult) {
	t.lane.opened(ctx, res)
}

// ended: the transport ended an MCP session (DELETE): so does its sandbox.
func (t *httpTransport) ended(cs mcpserver.ClientSession) {
	t.lane.closed(cs.SessionID())
	t.h.drop(cs.SessionID())
}

// notifyClient sends on the session's own channel: its client's GET
// stream when one is open.
func (t *httpTransport) notifyClient(key, method string, params map[string]any) {
	if key != "" {
		t.lane.streamed(key) // the library answers SSE from now on (http_lane.go)
		_ = t.h.srv.SendNotificationToSpecificClient(key, method, params)
	}
}

// handler is the MCP endpoint and the readiness route, behind the body,
// token, browser and drain guards.
func (t *httpTransport) handler(ho HTTPOptions, store *persistStore) http.Handler {
	h := t.h
	ids := newIDManager()
	t.ids = ids
	t.lane = newHTTPLane(t)
	idOpt := mcpserver.WithSessionIdManager(ids)
	if store != nil {
		idOpt = mcpserver.WithSessionIdManagerResolver(idResolver{ids: ids})
	}
	t.streamable = mcpserver.NewStreamableHTTPServer(h.srv,
		mcpserver.WithEndpointPath("/mcp"),
		idOpt,
		mcpserver.WithEventStore(newBoundedEventStore(eventsPerStream, streamsPerSession)),
		// Only the revisions that keep sessions are advertised, so a client
		// that can speak both settles on one with a session; one that
		// speaks only the sessionless revision is refused (errSessionless).
		mcpserver.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
		mcpserver.WithStreamableHTTPLogger(h.o.logger().With("component", "mcp-transport")),
	)
	mux := http.NewServeMux()
	var mcpHandler http.Handler = t.lane.wrap(t.orderedStreams(t.streamable))
	if store != nil {
		t.resumer = &resumer{h: h, ids: ids, store: store, next: mcpHandler, ttl: ho.IdleTimeout}
		mcpHandler = t.resumer
	}
	// The drain guard comes first: a draining server resumes no session.
	mux.Handle("/mcp", noBrowser(authorize(ho.Token, limitBody(ho.MaxBody, t.drain.guard(mcpHandler)))))
	mux.HandleFunc(HealthPath, func(w http.ResponseWriter, r *http.Request) {
		// No sandbox fields (docs/http.md, "Many agents, one server"): 200 while
		// the server takes sessions, 503 while it drains (readiness).
		w.Header().Set("Content-Type", "application/json")
		if t.drain.on.Load() {
			// Readiness: a draining server takes no new session.
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"draining"}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return mux
}

// peerGuard serves only the server's own user and root (loopback is not an
// identity), never through a process the server started; a bearer token,
// when set, is required on top.
func (t *httpTransport) peerGuard(ho HTTPOptions, audit *session.Audit, next http.Handler) http.Handler {
	rlog := &refusalLog{burst: 60}
	peers := &peerPolicy{
		allowed:  []uint32{uint32(os.Geteuid()), 0},
		remoteOK: !IsLoopback(ho.Listen),
		lookup:   peerSocketOf,
		origin:   newPeerOrigin(),
		refused: func(_ *http.Request, rule, why string) {
			if ok, dropped := rlog.admit(time.Now()); ok {
				auditPeerRefused(audit, rule, why, dropped)
			}
			if rule == rulePeerProcess {
				t.h.warnOnce("refused a connection from a process this server started (403; each refusal is in the audit log)")
				return
			}
			t.h.warnOnce("refused a connection from a process that is not this server's user or root (403; each refusal is in the audit log)")
		},
	}
	return peers.guard(next)
}

// run sweeps idle sessions until the listener fails or ctx ends, then
// drains and closes.
func (t *httpTransport) run(ctx context.Context, ho HTTPOptions, hs *http.Server, served <-chan error) error {
	h := t.h
	// End idle sessions through the transport's own DELETE path, so its
	// state and the sandbox go together.
	sweepEvery := min(max(ho.IdleTimeout/4, 100*time.Millisecond), 30*time.Second)
	ticker := time.NewTicker(sweepEvery)
	defer ticker.Stop()
	var refused []string
	for {
		select {
		case <-ticker.C:
			// A refused initialize's session is registered by the
			// transport after its answer is written: end it a tick later.
			for _, id := range refused {
				terminate(t.streamable, id)
			}
			refused = h.takeRefused()
			// Closing runs the session's SessionEnd hooks: off this loop,
			// so a slow one delays neither the others nor a SIGTERM.
			if t.resumer != nil {
				h.touchAll(sweepEvery)
				t.resumer.sweep(time.Now())
			}
			for _, id := range h.idle(ho.IdleTimeout) {
				h.warn("a session idle for %s: closing it", ho.IdleTimeout)
				go func() {
					terminate(t.streamable, id)
					h.drop(id) // in case the transport no longer knew it
				}()
			}
		case err := <-served:
			h.closeAll()
			return err
		case <-ctx.Done():
			t.stop(ho, hs)
			return nil
		}
	}
}

// stop is the drain: no new session or call, the calls in flight finish
// (bounded); then the sessions, then the listener.
func (t *httpTransport) stop(ho HTTPOptions, hs *http.Server) {
	h := t.h
	if ho.DrainTimeout > 0 {
		h.o.logger().Info("draining: new sessions and calls get 503", "timeout", ho.DrainTimeout.String(), "in_flight", t.drain.posts.Load())
		began := time.Now()
		if left := t.drain.drain(ho.DrainTimeout); left > 0 {
			h.o.logger().Warn(fmt.Sprintf("drain: %d request(s) still running after %s; ending them", left, ho.DrainTimeout))
		} else {
			h.o.logger().Info("drained", "took", time.Since(began).Round(time.Millisecond).String())
		}
	}
	// Sessions first, so in-flight calls end; then the listener.
	h.closeAll()
	t.streamable.CloseSessions(context.Background())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
}

// terminate ends one MCP session as a client's DELETE would.
func terminate(streamable *mcpserver.StreamableHTTPServer, id string) {
	req, err := http.NewRequest(http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(mcpserver.HeaderKeySessionID, id)
	streamable.ServeHTTP(&discardWriter{h: http.Header{}}, req)
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// noBrowser refuses every request a web page sends, save those of the
// listener's own origin: a request carrying an Origin header other than
// http://HOST:PORT of the address it came in on (HOST one of that
// address's own spellings: 127.0.0.1 or localhost for 127.0.0.1, [::1] or
// localhost for ::1), or a Sec-Fetch-Site other than same-origin (browsers
// add both, and a page's script can neither set nor remove them). A page
// served from any other port of localhost is run by the same user as this
// server, so neither loopback nor the peer's uid tells it from an MCP
// client; this server serves no page of its own, so nothing of its own
// origin runs a script, and an MCP client that sends its own origin (as
// the conformance suite's does) is served. A rebound DNS name keeps its
// own name in Origin and is refused.
func noBrowser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if (origin != "" && !ownOrigin(origin, local)) || (site != "" && site != "same-origin") {
			http.Error(w, "requests from a web page of another origin (an Origin or Sec-Fetch-Site header naming one) are refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownOrigin says whether origin is the origin of the listener address
// local: scheme http, the same port, and a host naming that address.
func ownOrigin(origin string, local net.Addr) bool {
	ta, ok := local.(*net.TCPAddr)
	if !ok || ta == nil {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if u.Port() != strconv.Itoa(ta.Port) {
		return false
	}
	host := strings.ToLower(u.Hostname())
	ip := ta.IP
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if host == "localhost" {
		return ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)
	}
	hip := net.ParseIP(host)
	return hip != nil && hip.Equal(ip) && (strings.Contains(u.Host, "[") == (ip.To4() == nil))
}

// authorize requires "Authorization: Bearer TOKEN" when token is set.
func authorize(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evener-mcp"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody refuses bodies over max with 413 before the transport reads
// them, and applies the stdio guard's checks (duplicate keys, nesting,
// UTF-8) to what it does read.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get(mcpserver.HeaderKeySessionID) == "" {
			// A standalone stream belongs to an initialised session; the
			// transport would otherwise mint a session for it that no
			// initialize ever set up.
			http.Error(w, "GET needs the Mcp-Session-Id of an initialised session", http.StatusBadRequest)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			writeRPCError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", max))
			return
		}
		body, err := readAtMost(r, max)
		if err != nil {
			writeRPCError(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		if err := checkJSON(body); err != nil {
			writeRPCError(w, http.StatusBadRequest, "invalid request: "+err.Error())
			return
		}
		if v := sessionlessVersion(r.Header, body); v != "" {
			refuseSessionless(w, body, v)
			return
		}
		r.Body = &guardedBody{Reader: bytes.NewReader(body), b: body}
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

func readAtMost(r *http.Request, max int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= max {
		// The length is known: one buffer of it, not ReadAll's doublings
		// from 512 bytes. net/http ends the body at that length.
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		return body, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("request body over %d bytes", max)
	}
	return body, nil
}

// sessionlessVersion is the protocol revision a request declares when that
// revision has no sessions (2026-07-28 and later), "" otherwise.
func sessionlessVersion(h http.Header, body []byte) string {
	if v := h.Get(mcp.HeaderProtocolVersion); mcp.IsModernProtocol(v) {
		return v
	}
	if bytes.IndexByte(body, '\\') < 0 && !bytes.Contains(body, []byte(mcp.MetaKeyProtocolVersion)) {
		// Without an escape the key would be spelt as it is in the body:
		// no such key, nothing to decode (a decode cost every call a full
		// pass over its body).
		return ""
	}
	var m struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) == nil {
		if v, _ := m.Params.Meta[mcp.MetaKeyProtocolVersion].(string); mcp.IsModernProtocol(v) {
			return v
		}
	}
	return ""
}

// refuseSessionless answers a sessionless request with the unsupported-
// version error a client can fall back on (the supported revisions are in
// its data), and a message that says why.
func refuseSessionless(w http.ResponseWriter, body []byte, version string) {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &m)
	var id any
	if len(m.ID) > 0 {
		id = m.ID
	}
	writeRPCErrorWith(w, http.StatusBadRequest, id, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		fmt.Sprintf("protocol revision %s is sessionless: %v", version, errSessionless),
		map[string]any{"supported": mcp.LegacyProtocolVersions(), "requested": version})
}

// writeRPCError answers a request the transport never saw (no id known).
func writeRPCError(w http.ResponseWriter, status int, msg string) {
	writeRPCErrorWith(w, status, nil, mcp.INVALID_REQUEST, msg, nil)
}

func writeRPCErrorWith(w http.ResponseWriter, status int, id any, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

// idManager mints unguessable session ids (they are capabilities: whoever
// holds one drives that sandbox) and forgets them when they end, so an
// ended session answers 404 and the client starts a new one.
type idManager struct {
	mu   sync.Mutex // guards live
	live map[string]bool
}

func newIDManager() *idManager { return &idManager{live: map[string]bool{}} }

func (m *idManager) Generate() string {
	id := rand.Text()
	m.mu.Lock()
	m.live[id] = true
	m.mu.Unlock()
	return id
}

func (m *idManager) Validate(id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live[id] {
		return false, errors.New("unknown or ended session")
	}
	return false, nil
}

func (m *idManager) Terminate(id string) (bool, error) {
	m.mu.Lock()
	delete(m.live, id)
	m.mu.Unlock()
	return false, nil
}
