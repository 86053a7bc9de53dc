package server

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
)

// The stdio transport serves subscriptions/listen itself (the sessionless
// revision, 2026-07-28; listen.go): the library's would acknowledge on its
// notification channel, which races what the session writes on stdout
// (http_streams.go), so an update could precede its stream's
// acknowledgement; and it grants toolsListChanged only when the library
// sends list changes itself, which it never does here (hub.go). A stream
// opens with its acknowledgement, carries the resource updates and tool
// list changes it asked for, and ends with the client's
// notifications/cancelled (no response, as for any cancelled request) or
// the server's shutdown (a completion result).

// maxListenLine bounds the lines the transport reads for a stream's
// opening or cancellation; a longer one goes to the library.
const maxListenLine = 64 << 10

// listenRequest is a subscriptions/listen as the transport reads it.
type listenRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Meta          map[string]any         `json:"_meta"`
		Notifications mcp.SubscriptionFilter `json:"notifications"`
	} `json:"params"`
}

// listen serves line if it opens or cancels a stream, and says whether it
// did. What it does not serve (a request it cannot read, one that does not
// declare the sessionless revision, an id it cannot key) goes to the
// library, which answers it.
func (t *stdioTransport) listen(line []byte) bool {
	if len(line) > maxListenLine {
		return false // a write's content, say: not scanned twice
	}
	if bytes.Contains(line, []byte(`"subscriptions/listen"`)) {
		if bytes.Equal(topLevel(line, "method"), []byte(`"subscriptions/listen"`)) {
			return t.openListen(line)
		}
		return false
	}
	if !bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
		return false
	}
	s := t.session()
	if s == nil || s.listens.n.Load() == 0 || !bytes.Equal(topLevel(line, "method"), []byte(`"notifications/cancelled"`)) {
		return false
	}
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return false
	}
	key, ok := idKey(n.Params.RequestID)
	return ok && s.listens.remove(key)
}

// session is the process's session, nil while none is open.
func (t *stdioTransport) session() *Session {
	if t.h == nil {
		return nil
	}
	return t.h.lookup(context.Background())
}

// openListen opens the stream line asks for.
func (t *stdioTransport) openListen(line []byte) bool {
	var req listenRequest
	if json.Unmarshal(line, &req) != nil || req.JSONRPC != mcp.JSONRPC_VERSION {
		return false
	}
	v, _ := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	key, ok := idKey(req.ID)
	s := t.session()
	if !mcp.IsModernProtocol(v) || !ok || s == nil {
		return false
	}
	var id any
	if json.Unmarshal(req.ID, &id) != nil {
		return false
	}
	granted := t.grant(req.Params.Notifications)
	sub := &listenSub{
		id:         id,
		violations: slices.Contains(granted.ResourceSubscriptions, ViolationsURI),
		tools:      granted.ToolsListChanged,
	}
	if !s.listens.add(key, sub) {
		t.write(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
			Error: mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, "a subscriptions/listen with this id is open already", nil)})
		return true
	}
	// Nothing is told on the stream before its acknowledgement: it is
	// picked (listenSet.ids) only once ready.
	t.writeAck(id, granted)
	sub.ready.Store(true)
	if granted.IsEmpty() {
		// Nothing to tell: the stream ends at once, as it would at
		// shutdown.
		s.listens.remove(key)
		t.closeListen(id)
		return true
	}
	// A client on this revision sends no notifications/initialized: from
	// now on it may be told its tools changed (gateway.go).
	s.gatewayInitialized()
	return true
}

// grant is the part of want this server serves: updates of its resources
// (the violations change, the preamble never does), and tool list changes
// when MCP servers run behind this one (hub.go advertises listChanged
// then). Neither prompts nor the resource list ever change.
func (t *stdioTransport) grant(want mcp.SubscriptionFilter) mcp.SubscriptionFilter {
	var g mcp.SubscriptionFilter
	g.ToolsListChanged = want.ToolsListChanged && len(t.h.o.Config.MCPServers) > 0
	for _, uri := range want.ResourceSubscriptions {
		if (uri == ViolationsURI || uri == PreambleURI) && !slices.Contains(g.ResourceSubscriptions, uri) {
			g.ResourceSubscriptions = append(g.ResourceSubscriptions, uri)
		}
	}
	return g
}

// writeAck writes the stream's acknowledgement.
func (t *stdioTransport) writeAck(id any, granted mcp.SubscriptionFilter) {
	t.write(mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: mcp.MethodNotificationSubscriptionsAcknowledged,
		Params: mcp.NotificationParams{
			Meta:             map[string]any{mcp.MetaKeySubscriptionID: id},
			AdditionalFields: map[string]any{"notifications": granted},
		},
	}})
}

// closeListen writes the completion result that ends stream id gracefully.
func (t *stdioTransport) closeListen(id any) {
	t.write(mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: map[string]any{
		"resultType": "complete",
		"_meta":      map[string]any{mcp.MetaKeySubscriptionID: id},
	}})
}

// endListens ends every open stream with its completion result: the
// server is shutting down (ctx ended). When stdin ended instead, the
// client has gone and nothing is written.
func (t *stdioTransport) endListens() {
	s := t.session()
	if s == nil {
		return
	}
	for _, id := range s.listens.drain() {
		t.closeListen(id)
	}
}

// write writes one message on stdout.
func (t *stdioTransport) write(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		t.h.o.logger().Error("encode subscriptions/listen message", "error", err.Error())
		return
	}
	_, _ = t.out.Write(append(b, '\n'))
}
