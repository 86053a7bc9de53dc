package server

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// transport is what the hub needs of the connection its clients speak over
// (transport_stdio.go, transport_http.go); the hub itself knows no
// transport (docs/architecture.md, "One hub, two transports"). A call's
// cancellation reaches the hub as the cancellation of the call's context,
// which the transport gives it.
type transport interface {
	// name is the transport's name in the audit log and the server's log.
	name() string
	// begin is called once, before the MCP server is built: the transport
	// may open its sessions (stdio: the process is the session), and
	// returns the server's instructions.
	begin(ctx context.Context, h *Hub) (instructions string, err error)
	// key is the hub's key of the session the request in ctx belongs to,
	// "" when it belongs to none.
	key(ctx context.Context) string
	// initialize serves a client's initialize: it opens, narrows or
	// refuses that client's session.
	initialize(ctx context.Context, params json.RawMessage) error
	// initialized is called once an initialize was answered with res.
	initialized(ctx context.Context, res *mcp.InitializeResult)
	// ended is called when the MCP library ends the client session cs.
	ended(cs mcpserver.ClientSession)

	// notifyCall sends a notification about the call in ctx, ahead of
	// its result (http_streams.go says why that takes the transport).
	notifyCall(ctx context.Context, method string, params map[string]any)
	// notifyClient sends a notification to the client of session key
	// outside any call.
	notifyClient(key, method string, params map[string]any)

	// caps are the capabilities of the client the request in ctx comes
	// from; roots and elicit send that client a request and wait for its
	// answer.
	caps(ctx context.Context) mcp.ClientCapabilities
	roots(ctx context.Context) ([]mcp.Root, error)
	elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
}

// mcpClient is the client side both transports share: mcp-go keeps each
// client session's capabilities in the request's context and carries the
// server's requests to it, over stdio as over HTTP.
type mcpClient struct{ h *Hub }

func (c mcpClient) caps(ctx context.Context) mcp.ClientCapabilities {
	if cs, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		return cs.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

func (c mcpClient) roots(ctx context.Context) ([]mcp.Root, error) {
	res, err := c.h.srv.RequestRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}})
	if err != nil {
		return nil, err
	}
	return res.Roots, nil
}

func (c mcpClient) elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return c.h.srv.RequestElicitation(ctx, req)
}
