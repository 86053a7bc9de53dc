package server

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// listenSet is a session's open subscriptions/listen streams: how a client
// on the sessionless revision (2026-07-28) is told of changes, in place of
// resources/subscribe and the GET stream (docs/observability.md,
// "Violations"). Each stream is named by the JSON-RPC id of the request
// that opened it; every notification it carries says that id in
// _meta["io.modelcontextprotocol/subscriptionId"], and carries only what
// the client asked for there. Over stdio the transport opens and closes
// them (stdio_listen.go); over HTTP that revision is refused
// (transport_http.go), so the set stays empty.
type listenSet struct {
	mu sync.Mutex // guards subs
	// subs are the open streams by their id's key (idKey).
	subs map[string]*listenSub
	// n is len(subs), read without the lock by whoever only needs to
	// know whether any stream is open (every stdin line, every violation).
	n atomic.Int32
}

// listenSub is one open stream: its id as the client sent it, and what it
// was granted.
type listenSub struct {
	id         any
	violations bool // resourceSubscriptions held ViolationsURI
	tools      bool // toolsListChanged
	// ready is set once the stream's acknowledgement is written: nothing
	// is told on it before.
	ready atomic.Bool
}

// add opens a stream; false when its id names an open one already.
func (l *listenSet) add(key string, sub *listenSub) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs == nil {
		l.subs = map[string]*listenSub{}
	}
	if l.subs[key] != nil {
		return false
	}
	l.subs[key] = sub
	l.n.Store(int32(len(l.subs)))
	return true
}

// remove closes the stream named key; false when none is open.
func (l *listenSet) remove(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs[key] == nil {
		return false
	}
	delete(l.subs, key)
	l.n.Store(int32(len(l.subs)))
	return true
}

// drain closes every stream and returns their ids.
func (l *listenSet) drain() []any {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]any, 0, len(l.subs))
	for _, s := range l.subs {
		ids = append(ids, s.id)
	}
	clear(l.subs)
	l.n.Store(0)
	return ids
}

// ids are the ids of the open streams that want what pick says.
func (l *listenSet) ids(pick func(*listenSub) bool) []any {
	if l.n.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []any
	for _, s := range l.subs {
		if s.ready.Load() && pick(s) {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// watchingViolations says whether an open stream asked for the violations
// resource's updates.
func (l *listenSet) watchingViolations() bool {
	return len(l.ids(func(s *listenSub) bool { return s.violations })) > 0
}

// tagged is params with the stream's id in _meta.
func tagged(id any, params map[string]any) map[string]any {
	out := make(map[string]any, len(params)+1)
	for k, v := range params {
		out[k] = v
	}
	out["_meta"] = map[string]any{mcp.MetaKeySubscriptionID: id}
	return out
}

// toolsChanged tells the client its tool list changed. A client with
// streams open is told on each that asked for it, and nowhere else (that
// revision's server sends no notification a client did not ask for); a
// client without one, as before. That is the protocol library's rule for
// its own notifications too: a client on the sessionless revision that
// opened no stream (mcp-go's own client, say) still hears of changes.
func (s *Session) toolsChanged() {
	method := string(mcp.MethodNotificationToolsListChanged)
	if s.listens.n.Load() == 0 {
		s.notifyClient(method, map[string]any{})
		return
	}
	for _, id := range s.listens.ids(func(l *listenSub) bool { return l.tools }) {
		s.notifyClient(method, tagged(id, map[string]any{}))
	}
}

// addListen gives the sessionless revision's server/discover what
// initialize gives the others: the session's preamble with its gateway's
// status, and listChanged with MCP servers behind this one.
func (h *Hub) addListen(hooks *mcpserver.Hooks) {
	hooks.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		if res == nil {
			return
		}
		if s := h.lookup(ctx); s != nil {
			res.Instructions = s.preamble + s.gatewayStatus()
		}
		if res.Capabilities.Tools != nil && len(h.o.Config.MCPServers) > 0 {
			res.Capabilities.Tools.ListChanged = true
		}
	})
}
