package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

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
//
// The downstream is untrusted code, and what it can make the server hold is
// bounded (docs/gateway.md, "What a server behind evener-mcp can make
// evener-mcp hold"): one writer goroutine with a queue of QueueLen lines,
// each write within WriteTimeout; at most MaxServed of its requests handled
// at once (the rest dropped); at most MaxPending requests of ours waiting
// for it; no line longer than MaxLine. A downstream past a bound is stopped
// (stop): the conn ends, onStop kills its process, and it is restarted like
// one that crashed.
type conn struct {
	w  io.WriteCloser
	dl interface{ SetWriteDeadline(time.Time) error } // w's deadline; nil when it has none
	r  *bufio.Reader
	q  chan []byte // lines for the writer, in order

	served chan struct{} // one token per server request being handled

	mu      sync.Mutex // guards the fields below
	pending map[string]chan *transport.JSONRPCResponse
	onNote  func(mcp.JSONRPCNotification)
	onReq   transport.RequestHandler
	onStop  func(why string) // told once when a bound stops the conn
	why     string           // why it was stopped ("" unless stop)
	ctx     context.Context  // for the handlers of the server's requests
	started bool

	done      chan struct{} // closed when the server's output ended, Close or stop
	closeOnce sync.Once
	stopOnce  sync.Once
}

// The bounds of one downstream connection; variables so tests may shorten
// them.
var (
	// MaxLine bounds one message read from a downstream server.
	MaxLine = 16 << 20
	// QueueLen bounds the lines waiting for the writer.
	QueueLen = 64
	// WriteTimeout bounds one write: a server that reads nothing for
	// this long is stopped.
	WriteTimeout = 10 * time.Second
	// MaxPending bounds our requests waiting for the server's answers.
	MaxPending = 256
	// MaxServed bounds the server's requests being answered at once;
	// more are dropped unanswered.
	MaxServed = 4
)

const (
	// maxToken bounds the id and the method of a server request we
	// answer (an answer echoes the id, an error names the method).
	maxToken = 256
	// maxNote bounds a notification's params: the two read (progress,
	// tools/list_changed) are small, the others are not decoded at all.
	maxNote = 64 << 10
)

// errBusy refuses a request beyond MaxPending.
var errBusy = errors.New("too many requests to it are waiting for an answer")

func newConn(r io.Reader, w io.WriteCloser) *conn {
	c := &conn{w: w, r: bufio.NewReaderSize(r, 64<<10), pending: map[string]chan *transport.JSONRPCResponse{},
		q: make(chan []byte, QueueLen), served: make(chan struct{}, MaxServed),
		ctx: context.Background(), done: make(chan struct{})}
	// A pipe from os.Pipe is in the runtime's poller and takes deadlines;
	// another writer (a test's) is watched by a timer instead.
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok && d.SetWriteDeadline(time.Time{}) == nil {
		c.dl = d
	}
	return c
}

// Start starts reading the server's output and writing its input.
func (c *conn) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	c.started, c.ctx = true, ctx
	go c.read()
	go c.writeLoop()
	return nil
}

// stop ends the conn because the server went past a bound; why says which.
func (c *conn) stop(why string) {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.why = why
		f := c.onStop
		c.mu.Unlock()
		c.close()
		_ = c.w.Close() // a write blocked on it returns
		if f != nil {
			f(why)
		}
	})
}

// stopped says why a bound stopped the conn, "" if none did.
func (c *conn) stopped() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.why
}

// writeLoop writes the queued lines, each within WriteTimeout.
func (c *conn) writeLoop() {
	var watch *time.Timer
	if c.dl == nil {
		watch = time.AfterFunc(time.Hour, func() { c.stop(c.stallReason()) })
		watch.Stop()
		defer watch.Stop()
	}
	for {
		var line []byte
		select {
		case <-c.done:
			return
		case line = <-c.q:
		}
		var err error
		if c.dl != nil {
			if err = c.dl.SetWriteDeadline(time.Now().Add(WriteTimeout)); err == nil {
				_, err = c.w.Write(line)
			}
		} else {
			watch.Reset(WriteTimeout)
			_, err = c.w.Write(line)
			watch.Stop()
		}
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.stop(c.stallReason())
			return
		case err != nil:
			c.close() // its input is closed: it is gone or going
			return
		}
	}
}

func (c *conn) stallReason() string {
	return fmt.Sprintf("it read none of its input for %s", WriteTimeout)
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

// message is any line the server writes, decoded once. Its members are
// views of the line, not copies (rawRef): an answer to nothing asked, or a
// long notification, costs the scan and no allocation of its size; what is
// kept is copied (a pending call's result, a request's params).
type message struct {
	ID     rawRef `json:"id"`
	Method rawRef `json:"method"`
	Params rawRef `json:"params"`
	Result rawRef `json:"result"`
	Error  rawRef `json:"error"`
}

// rawRef is a JSON value as it stands in the line being decoded, valid
// while the line is.
type rawRef []byte

// UnmarshalJSON keeps b: the decoder's view of its input, not a copy.
func (r *rawRef) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// method is m's method, "" when it has none, it is not a string, or it is
// longer than maxToken.
func (m *message) method() string {
	if len(m.Method) == 0 || len(m.Method) > maxToken+2 {
		return ""
	}
	var s string
	if json.Unmarshal(m.Method, &s) != nil {
		return ""
	}
	return s
}

func (c *conn) read() {
	defer c.close()
	var long []byte
	for {
		line, err := c.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it, bounded, in a buffer kept while
			// long lines follow each other (a flood of them reuses it).
			buf := append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= MaxLine {
				line, err = c.r.ReadSlice('\n')
				buf = append(buf, line...)
			}
			if len(buf) > MaxLine {
				c.stop(fmt.Sprintf("it wrote a message over %d MiB", MaxLine>>20))
				return
			}
			line, long = buf, buf
		} else {
			long = nil
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
	method := m.method()
	switch {
	case len(m.Method) > 0 && method == "":
		return // not a method we could know
	case method != "" && !hasID:
		if len(m.Params) > maxNote {
			return // none we read is this long
		}
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
	case method != "":
		c.serve(m, method)
	default:
		if len(m.ID) > maxToken {
			return // no id of ours is this long
		}
		key := idKey(json.RawMessage(m.ID))
		c.mu.Lock()
		ch := c.pending[key]
		delete(c.pending, key)
		c.mu.Unlock()
		if ch == nil {
			return // an answer to nothing we asked, or asked and gave up on
		}
		var id mcp.RequestId
		_ = json.Unmarshal(m.ID, &id)
		r := &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id}
		if len(m.Result) > 0 {
			r.Result = bytes.Clone(m.Result)
		}
		if len(m.Error) > 0 && string(m.Error) != "null" {
			var e mcp.JSONRPCErrorDetails
			if json.Unmarshal(m.Error, &e) != nil {
				e = mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "the server's error does not decode"}
			}
			r.Error = &e
		}
		ch <- r
	}
}

// serve answers a request of the server's (ping, or one the gateway does
// not serve, refused at once by the library's client), at most MaxServed
// at a time and never waiting: a request beyond that, or whose id or
// method is long, is dropped, and so is an answer the writer has no room
// for. Nothing the server asks grows with how often it asks.
func (c *conn) serve(m message, method string) {
	if len(m.ID) > maxToken || len(m.Params) > maxNote {
		return
	}
	var id mcp.RequestId
	if json.Unmarshal(m.ID, &id) != nil {
		return
	}
	c.mu.Lock()
	h, ctx := c.onReq, c.ctx
	c.mu.Unlock()
	if h == nil {
		c.respond(*transport.NewJSONRPCErrorResponse(id, mcp.METHOD_NOT_FOUND, "No request handler configured", nil))
		return
	}
	select {
	case c.served <- struct{}{}:
	default:
		return
	}
	var params any
	if len(m.Params) > 0 {
		params = json.RawMessage(bytes.Clone(m.Params))
	}
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params}
	go func() {
		defer func() { <-c.served }()
		resp, err := h(ctx, req)
		switch {
		case err != nil:
			c.respond(*transport.NewJSONRPCErrorResponse(id, mcp.INTERNAL_ERROR, err.Error(), nil))
		case resp != nil:
			c.respond(*resp)
		}
	}()
}

// respond queues an answer to the server, or drops it when the queue is
// full.
func (c *conn) respond(r transport.JSONRPCResponse) {
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	_ = c.offer(append(b, '\n'))
}

// offer queues line without waiting: false when it is dropped.
func (c *conn) offer(line []byte) bool {
	select {
	case <-c.done:
		return false
	case c.q <- line:
		return true
	default:
		return false
	}
}

// write queues line, waiting for room at most as long as ctx.
func (c *conn) write(ctx context.Context, line []byte) error {
	select {
	case <-c.done:
		return transport.ErrTransportClosed
	default:
	}
	select {
	case c.q <- line:
		return nil
	case <-c.done:
		return transport.ErrTransportClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// roundTrip writes line, a request whose id is key, and waits for its
// response, ctx, or the end of the server's output.
func (c *conn) roundTrip(ctx context.Context, key string, line []byte) (*transport.JSONRPCResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan *transport.JSONRPCResponse, 1)
	c.mu.Lock()
	if len(c.pending) >= MaxPending {
		c.mu.Unlock()
		return nil, errBusy
	}
	c.pending[key] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, key)
		c.mu.Unlock()
	}
	if err := c.write(ctx, line); err != nil {
		forget()
		if errors.Is(err, transport.ErrTransportClosed) || ctx.Err() != nil {
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
func (c *conn) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("marshal notification: %w", err)
	}
	return c.write(ctx, append(b, '\n'))
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

// Close closes the server's input; waiting calls end, and so does a write
// in progress.
func (c *conn) Close() error {
	c.close()
	return c.w.Close()
}

func (c *conn) close() { c.closeOnce.Do(func() { close(c.done) }) }

// GetSessionId is "": stdio has no session id.
func (c *conn) GetSessionId() string { return "" }

var _ transport.BidirectionalInterface = (*conn)(nil)
