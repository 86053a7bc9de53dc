package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Notifications about a request (progress, and the session's log records
// emitted while it runs) must never follow the request's result (docs/clients.md,
// "Clients tested"). mcp-go queues notifications on a per-session channel
// that another goroutine drains, so on its own it can write a progress
// notification after the result:
//
//   - over stdio the channel's writer races the tool worker that writes
//     the result; the hub therefore writes a call's notifications itself,
//     synchronously, on the same stdout, before the handler returns;
//   - over Streamable HTTP a POST without a standalone GET stream gets a
//     session object of its own whose channel only that POST drains, ahead
//     of its result (ordered, and recorded in the event store); but while
//     a GET stream is open, every POST of the session and the GET share one
//     channel, and a progress notification can leave on the GET stream (or
//     another call's) after its own result. A POST that starts while a GET
//     stream is open has its notifications written into its own response
//     stream by the hub instead (postStream.inject).

// notifyCall sends one notification about the request in ctx.
func (t *httpTransport) notifyCall(ctx context.Context, method string, params map[string]any) {
	// However it travels, the library answers the session's POSTs as SSE
	// streams from now on, and so the lane leaves them to it (http_lane.go).
	t.lane.streamed(t.key(ctx))
	if ps, ok := ctx.Value(postStreamKey{}).(*postStream); ok && (ps.shared || ps.lane) {
		if cs, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithStreamableHTTPConfig); ok {
			// The result must then be written as an SSE event too (the
			// lane's: it does so itself; and later POSTs, as the library
			// would have after a notification it sent).
			cs.UpgradeToSSEWhenReceiveNotification()
		}
		if b, err := json.Marshal(notification(method, params)); err == nil {
			ps.inject(b)
		}
		return
	}
	_ = t.h.srv.SendNotificationToClient(ctx, method, params)
}

type postStreamKey struct{}

// streams counts the open standalone GET streams of each MCP session.
type streams struct {
	mu        sync.Mutex // guards listening
	listening map[string]int
}

func (s *streams) add(id string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listening == nil {
		s.listening = map[string]int{}
	}
	s.listening[id] += n
	if s.listening[id] <= 0 {
		delete(s.listening, id)
	}
}

func (s *streams) open(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listening[id] > 0
}

// orderedStreams wraps the MCP endpoint: it counts standalone GET streams
// per session and gives every POST a postStream in its context.
func (t *httpTransport) orderedStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get(mcpserver.HeaderKeySessionID)
		switch {
		case sid == "":
			next.ServeHTTP(w, r)
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "":
			// Counted before mcp-go registers the stream and uncounted
			// after it ends: "open" is a superset of "shared channel".
			t.streams.add(sid, 1)
			defer t.streams.add(sid, -1)
			next.ServeHTTP(w, r)
		case r.Method == http.MethodPost:
			ps := &postStream{w: w, shared: t.streams.open(sid)}
			next.ServeHTTP(ps, r.WithContext(context.WithValue(r.Context(), postStreamKey{}, ps)))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// postStream is one POST's response writer, shared by mcp-go and the hub.
type postStream struct {
	w      http.ResponseWriter
	shared bool // a GET stream was open when the POST began
	// lane: the lane serves the POST (http_lane.go) and writes its result
	// itself, as an SSE event once a notification made the response a
	// stream.
	lane bool

	mu     sync.Mutex // guards w and header: whole events are written under it
	header bool       // the status line was written
}

func (p *postStream) Header() http.Header { return p.w.Header() }

func (p *postStream) WriteHeader(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.header {
		return // the hub already made this an SSE stream
	}
	p.header = true
	p.w.WriteHeader(code)
}

func (p *postStream) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.header = true
	return p.w.Write(b)
}

func (p *postStream) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (p *postStream) Unwrap() http.ResponseWriter { return p.w }

// inject writes one message as an SSE event of this POST's stream, making
// it an SSE stream first if nothing was written yet. The event has no id:
// it is not in the event store (a resumed stream replays the result).
func (p *postStream) inject(msg []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.header {
		h := p.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		p.w.WriteHeader(http.StatusOK)
		p.header = true
	}
	if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", msg); err != nil {
		return
	}
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}

// notification is one JSON-RPC notification; a "_meta" map in params is
// its _meta (a subscriptions/listen stream's id, listen.go).
func notification(method string, params map[string]any) mcp.JSONRPCNotification {
	p := mcp.NotificationParams{AdditionalFields: params}
	if meta, ok := params["_meta"].(map[string]any); ok {
		p.Meta = meta
		p.AdditionalFields = make(map[string]any, len(params)-1)
		for k, v := range params {
			if k != "_meta" {
				p.AdditionalFields[k] = v
			}
		}
	}
	return mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: p},
	}
}
