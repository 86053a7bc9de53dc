package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// httpLane is the Streamable HTTP transport's path for the tools/call
// requests of the MCP servers behind this one, as the stdio lane is
// stdio's (stdio_lane.go; docs/gateway.md, "MCP servers behind
// evener-mcp", speed). The protocol library's POST handler decodes such a
// request three times, filters the session's tools through a list, runs
// a notification forwarder goroutine and encodes the response: most of
// what a forwarded call cost over HTTP. The lane takes a POST that is one
// tools/call of a gateway tool the session publishes, for a session the
// library knows, with none of what the lane does not serve (a progress
// token, a task, a multi-round-trip answer, the sessionless revision);
// decodes it once; and runs it through the one call pipeline (Hub.call:
// schema, session, roots, hooks, audit, metrics, violations) with the
// library's session of that id in its context, as the library would. The
// response is encoded with the library's types and encoding (response,
// stdio_lane.go): application/json, or an SSE stream when the call sends a
// notification (a log record, a violations update) before its result, as
// postStream.inject does for a POST beside an open GET stream. The guards
// in front (peer, token, body, browser, drain) apply as to every request.
// Anything else goes to the library, as before.
type httpLane struct {
	t *httpTransport

	mu sync.Mutex // guards sessions and flight
	// sessions are the library's sessions by MCP session id, recorded
	// when an initialize on a revision with sessions was answered (the
	// object the library registers after that answer), removed when the
	// library ends the session.
	sessions map[string]*laneSession
	// flight are the lane's calls in flight, by session id and request
	// id (laneFlightKey): a notifications/cancelled naming one cancels it.
	flight map[string]context.CancelFunc
}

func newHTTPLane(t *httpTransport) *httpLane {
	return &httpLane{t: t, sessions: map[string]*laneSession{}, flight: map[string]context.CancelFunc{}}
}

// laneSession is one library session as the lane knows it.
type laneSession struct {
	cs mcpserver.ClientSession
	// streamed: the session was sent a notification. From then on the
	// library answers each of its POSTs as an SSE stream recorded in its
	// event store (resumable), which the lane cannot do: the lane leaves
	// the session's calls to the library.
	streamed atomic.Bool
}

// streamed records that session id was sent a notification (see
// laneSession.streamed).
func (l *httpLane) streamed(id string) {
	if l == nil || id == "" {
		return
	}
	if ls := l.session(id); ls != nil {
		ls.streamed.Store(true)
	}
}

// opened records the library's session of an answered initialize.
func (l *httpLane) opened(ctx context.Context, res *mcp.InitializeResult) {
	if l == nil || res == nil || res.ProtocolVersion >= mcp.ProtocolVersion20260728 {
		return
	}
	cs := mcpserver.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return
	}
	l.mu.Lock()
	l.sessions[cs.SessionID()] = &laneSession{cs: cs}
	l.mu.Unlock()
}

// closed forgets a session the library ended.
func (l *httpLane) closed(id string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	delete(l.sessions, id)
	l.mu.Unlock()
}

func (l *httpLane) session(id string) *laneSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions[id]
}

func laneFlightKey(sid, id string) string { return sid + "\x00" + id }

// wrap serves on the lane what it can, and hands next everything else.
// It sits behind the guards and the resumer (a session not resumed yet is
// unknown to the lane) and in front of orderedStreams.
func (l *httpLane) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !l.take(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// laneRequest (stdio_lane.go) is the tools/call as this lane reads it too.

// take serves r if the lane can, and says whether it did. The body guard
// has read the body (bounded, checked: duplicate keys, nesting, UTF-8) and
// refused the sessionless revision's requests.
func (l *httpLane) take(w http.ResponseWriter, r *http.Request) bool {
	sid := r.Header.Get(mcpserver.HeaderKeySessionID)
	if sid == "" || !laneHeaders(r.Header) {
		return false
	}
	body, ok := bodyOf(r)
	if !ok {
		return false
	}
	// The method is checked by the decode below; these only skip what
	// cannot be either (a method spelt with escapes goes to the library).
	switch {
	case bytes.Contains(body, []byte(`"tools/call"`)):
	case bytes.Contains(body, []byte(`"notifications/cancelled"`)):
		return l.cancelled(w, sid, body)
	default:
		return false
	}
	req, key, args, ok := decodeLaneCall(body, l.t.h.gw)
	if !ok {
		return false
	}
	if m := req.Params.Meta; m != nil && (m.ProgressToken != nil || m.AdditionalFields[mcp.MetaKeyProtocolVersion] != nil) {
		// Progress is streamed by the library (its events are in the
		// event store, so the stream can be resumed); the protocol
		// revision in _meta is the library's to check.
		return false
	}
	// The session: one the id manager knows (the library answers 404
	// otherwise), whose initialize the library answered, that the hub
	// runs, and that publishes the tool (the library's tool filter
	// answers "not found" otherwise; filterTools).
	if l.t.ids == nil {
		return false
	}
	if _, err := l.t.ids.Validate(sid); err != nil {
		return false
	}
	ls := l.session(sid)
	if ls == nil || ls.streamed.Load() {
		return false
	}
	ctx := l.t.h.srv.WithContext(r.Context(), ls.cs)
	s := l.t.h.lookup(ctx)
	if s == nil {
		return false
	}
	s.mu.Lock()
	_, published := s.defs[req.Params.Name]
	s.mu.Unlock()
	if !published {
		return false
	}
	fk := laneFlightKey(sid, key)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.mu.Lock()
	if l.flight[fk] != nil {
		l.mu.Unlock()
		return false // an id already in flight: the library's to answer
	}
	l.flight[fk] = cancel
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.flight, fk)
		l.mu.Unlock()
	}()
	// The call's notifications are written into this response, ahead of
	// its result (http_streams.go).
	ps := &postStream{w: w, lane: true}
	ctx = context.WithValue(ctx, postStreamKey{}, ps)

	call := mcp.CallToolRequest{}
	call.Method = string(mcp.MethodToolsCall)
	call.Header = r.Header
	call.Params.Name = req.Params.Name
	if args != nil {
		call.Params.Arguments, call.Params.RawArguments = args, args
	}
	call.Params.Meta = req.Params.Meta
	res, err := l.t.h.call(gatewayFacts(req.Params.Name))(ctx, call)
	if r.Context().Err() != nil {
		return true // the client is gone: nothing to write (as the library)
	}
	b, err := httpResponse(req.ID, res, err)
	if err != nil {
		l.t.h.o.logger().Error("encode tool result", "tool", req.Params.Name, "error", err.Error())
		http.Error(w, "encode tool result", http.StatusInternalServerError)
		return true
	}
	ps.result(b)
	return true
}

// laneHeaders says whether a POST's headers are the lane's: a JSON body,
// a client that accepts both a JSON response and an SSE stream (the
// lane's answer is one or the other), and a protocol revision header that
// is absent or one with sessions the library supports (it answers 400 to
// an unknown one).
func laneHeaders(h http.Header) bool {
	if ct := h.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return false
		}
	}
	if !accepts(h, "application/json") || !accepts(h, "text/event-stream") {
		return false
	}
	v := h.Get(mcp.HeaderProtocolVersion)
	return v == "" || (mcp.IsValidProtocolVersion(v) && !mcp.IsModernProtocol(v))
}

// accepts says whether the Accept header names media type mt, its type's
// wildcard or */*, with a quality above zero.
func accepts(h http.Header, mt string) bool {
	wild := mt[:strings.IndexByte(mt, '/')] + "/*"
	for _, line := range h.Values("Accept") {
		for part := range strings.SplitSeq(line, ",") {
			name, params, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case mt, wild, "*/*":
			default:
				continue
			}
			refused := false
			for p := range strings.SplitSeq(params, ";") {
				k, v, _ := strings.Cut(p, "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") && strings.Trim(strings.TrimSpace(v), "0.") == "" {
					refused = true // q=0, 0.0, 0.000: not acceptable
				}
			}
			if !refused {
				return true
			}
		}
	}
	return false
}

// guardedBody is a request body the body guard read and checked
// (limitBody): its bytes, for the lane to read without a copy.
type guardedBody struct {
	*bytes.Reader
	b []byte
}

func (*guardedBody) Close() error { return nil }

// bodyOf is the body the body guard read; ok is false for any other body
// (one a later guard replaced).
func bodyOf(r *http.Request) ([]byte, bool) {
	g, ok := r.Body.(*guardedBody)
	if !ok || g.Len() != len(g.b) {
		return nil, false
	}
	return g.b, true
}

// cancelled cancels the lane's call a notifications/cancelled of session
// sid names, answering 202 as the library does a notification, and says
// whether it named one.
func (l *httpLane) cancelled(w http.ResponseWriter, sid string, body []byte) bool {
	var n struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &n) != nil || n.JSONRPC != mcp.JSONRPC_VERSION || n.ID != nil || n.Method != string(mcp.MethodNotificationCancelled) {
		return false
	}
	key, ok := idKey(n.Params.RequestID)
	if !ok {
		return false
	}
	if _, err := l.t.ids.Validate(sid); err != nil {
		return false
	}
	l.mu.Lock()
	cancel := l.flight[laneFlightKey(sid, key)]
	l.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	w.WriteHeader(http.StatusAccepted)
	return true
}

// result writes the call's response: one JSON body, or the last event of
// the SSE stream its notifications began.
func (p *postStream) result(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.header {
		if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", bytes.TrimSuffix(b, []byte("\n"))); err != nil {
			return
		}
		if f, ok := p.w.(http.Flusher); ok {
			f.Flush()
		}
		return
	}
	p.header = true
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusOK)
	_, _ = p.w.Write(b)
}

// httpResponse is response (stdio_lane.go), the library's encoding of a
// result, with the envelope written around the result's own encoding
// when the id reads the same copied as decoded and encoded again (an
// integer of at most 15 digits, a string of plain ASCII): what
// json.Marshal of the library's response type writes, without decoding
// the id or reflecting over the envelope.
func httpResponse(id json.RawMessage, res *mcp.CallToolResult, callErr error) ([]byte, error) {
	if callErr != nil || res == nil || !plainID(id) {
		return response(id, res, callErr)
	}
	r, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(r)+len(id)+32)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, r...)
	return append(b, '}', '\n'), nil
}

// plainID says whether a request id's JSON is its own encoding once
// decoded (a float64 or a string) and encoded again.
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
		if len(digits) > 0 && digits[0] == '0' {
			return false // -0
		}
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
