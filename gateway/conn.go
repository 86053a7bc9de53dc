package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// conn is the client end of one downstream server's stdio: JSON-RPC
// messages, one per line, over its pipes. It is the MCP library's client
// transport (the library's client runs the handshake, tools/list and the
// notifications over it) with one more method, call, by which a tools/call
// is sent as bytes and its result comes back as bytes. The library's own
// stdio transport decodes every line it reads twice and every request it
// writes through reflection; a forwarded call paid both on its way
// (docs/gateway.md, "MCP servers behind evener-mcp", speed).
type conn struct {
	w io.WriteCloser
	r *bufio.Reader

	wmu sync.Mutex // guards writes to w: one message per write, whole

	mu      sync.Mutex // guards the fields below
	pending map[string]chan *transport.JSONRPCResponse
	onNote  func(mcp.JSONRPCNotification)
	onReq   transport.RequestHandler
	ctx     context.Context // for the handlers of the server's requests
	started bool

	done      chan struct{} // closed when the server's output ended or Close
	closeOnce sync.Once
}

// maxLine bounds one message read from a downstream server.
const maxLine = 64 << 20

func newConn(r io.Reader, w io.WriteCloser) *conn {
	return &conn{w: w, r: bufio.NewReaderSize(r, 64<<10), pending: map[string]chan *transport.JSONRPCResponse{},
		ctx: context.Background(), done: make(chan struct{})}
}

// Start starts reading the server's output.
func (c *conn) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	c.started, c.ctx = true, ctx
	go c.read()
	return nil
}

// idKey is a JSON-RPC id's key: the same for the id as sent and as echoed.
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return strconv.Quote(s)
		}
		return string(raw)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if i, err := n.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if f, err := n.Float64(); err == nil && f == float64(int64(f)) {
			return strconv.FormatInt(int64(f), 10)
		}
	}
	return string(raw)
}

// message is any line the server writes, decoded once.
type message struct {
	ID     json.RawMessage          `json:"id"`
	Method string                   `json:"method"`
	Params json.RawMessage          `json:"params"`
	Result json.RawMessage          `json:"result"`
	Error  *mcp.JSONRPCErrorDetails `json:"error"`
}

func (c *conn) read() {
	defer c.close()
	for {
		line, err := c.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it, bounded.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= maxLine {
				line, err = c.r.ReadSlice('\n')
				buf = append(buf, line...)
			}
			if len(buf) > maxLine {
				return // a server that writes this is not one to keep reading
			}
			line = buf
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			return
		}
	}
}

func (c *conn) dispatch(line []byte) {
	var m message
	if json.Unmarshal(line, &m) != nil {
		return // not JSON-RPC: the library's transport skips it too
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && !hasID:
		var n mcp.JSONRPCNotification
		if json.Unmarshal(line, &n) != nil {
			return
		}
		c.mu.Lock()
		h := c.onNote
		c.mu.Unlock()
		if h != nil {
			h(n)
		}
	case m.Method != "":
		var id mcp.RequestId
		if json.Unmarshal(m.ID, &id) != nil {
			return
		}
		c.mu.Lock()
		h, ctx := c.onReq, c.ctx
		c.mu.Unlock()
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: m.Method, Params: m.Params}
		if h == nil {
			c.respond(*transport.NewJSONRPCErrorResponse(id, mcp.METHOD_NOT_FOUND, "No request handler configured", nil))
			return
		}
		go func() {
			resp, err := h(ctx, req)
			switch {
			case err != nil:
				c.respond(*transport.NewJSONRPCErrorResponse(id, mcp.INTERNAL_ERROR, err.Error(), nil))
			case resp != nil:
				c.respond(*resp)
			}
		}()
	default:
		key := idKey(m.ID)
		c.mu.Lock()
		ch := c.pending[key]
		delete(c.pending, key)
		c.mu.Unlock()
		if ch == nil {
			return // an answer to nothing we asked, or asked and gave up on
		}
		var id mcp.RequestId
		_ = json.Unmarshal(m.ID, &id)
		ch <- &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: m.Result, Error: m.Error}
	}
}

func (c *conn) respond(r transport.JSONRPCResponse) {
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	_ = c.write(append(b, '\n'))
}

func (c *conn) write(line []byte) error {
	select {
	case <-c.done:
		return transport.ErrTransportClosed
	default:
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(line)
	return err
}

// roundTrip writes line, a request whose id is key, and waits for its
// response, ctx, or the end of the server's output.
func (c *conn) roundTrip(ctx context.Context, key string, line []byte) (*transport.JSONRPCResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan *transport.JSONRPCResponse, 1)
	c.mu.Lock()
	c.pending[key] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, key)
		c.mu.Unlock()
	}
	if err := c.write(line); err != nil {
		forget()
		if errors.Is(err, transport.ErrTransportClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("write request: %w", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-c.done:
		select {
		case r := <-ch: // answered just before the output ended
			return r, nil
		default:
		}
		forget()
		return nil, transport.ErrTransportClosed
	}
}

// SendRequest is the library's way to send a request.
func (c *conn) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("marshal request: %w", err)
	}
	idb, err := json.Marshal(req.ID)
	if err != nil {
		return nil, fmt.Errorf("marshal request id: %w", err)
	}
	return c.roundTrip(ctx, idKey(idb), append(b, '\n'))
}

// call sends tools/call with the request id id (a string without escapes)
// and params already encoded, and returns the response as read.
func (c *conn) call(ctx context.Context, id string, params []byte) (*transport.JSONRPCResponse, error) {
	line := make([]byte, 0, len(params)+64+len(id))
	line = append(line, `{"jsonrpc":"2.0","id":"`...)
	line = append(line, id...)
	line = append(line, `","method":"tools/call","params":`...)
	line = append(line, params...)
	line = append(line, "}\n"...)
	return c.roundTrip(ctx, strconv.Quote(id), line)
}

// SendNotification sends a notification.
func (c *conn) SendNotification(_ context.Context, n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("marshal notification: %w", err)
	}
	return c.write(append(b, '\n'))
}

// SetNotificationHandler sets who hears the server's notifications.
func (c *conn) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNote = h
}

// SetRequestHandler sets who answers the server's requests.
func (c *conn) SetRequestHandler(h transport.RequestHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onReq = h
}

// Close closes the server's input; waiting calls end.
func (c *conn) Close() error {
	c.close()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Close()
}

func (c *conn) close() { c.closeOnce.Do(func() { close(c.done) }) }

// GetSessionId is "": stdio has no session id.
func (c *conn) GetSessionId() string { return "" }

var _ transport.BidirectionalInterface = (*conn)(nil)
