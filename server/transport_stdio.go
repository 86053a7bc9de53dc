package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// stdioKey is the hub's key of a stdio server's one session.
const stdioKey = "stdio"

// RunStdio serves one session over stdin/stdout until stdin closes or ctx
// ends; then the session is closed (processes killed, proxies closed,
// scratch removed).
func RunStdio(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) error {
	t := newStdioTransport(o, stdin, stdout)
	h, err := newHub(ctx, o, t)
	if err != nil {
		return err
	}
	defer h.closeAll()
	return t.serve(ctx)
}

// stdioTransport is the stdio transport: the process is the one session,
// opened at start (so that clients that never send initialize, on the
// sessionless revisions, are served too) and narrowed by the client's
// initialize. It reads stdin through the guard (stdio_guard.go), serves the
// gateway's calls on its lane (stdio_lane.go) and hands every other line
// to the MCP library; everything it and the library write goes to one
// stdout, whole messages at a time.
type stdioTransport struct {
	mcpClient
	started func(string)
	in      *guardedReader
	out     *syncWriter
	lane    *lane
	// buf is what is ready for the library to read.
	buf []byte
}

func newStdioTransport(o Options, stdin io.Reader, stdout io.Writer) *stdioTransport {
	out := &syncWriter{w: stdout}
	t := &stdioTransport{started: o.Started, in: newGuardedReader(stdin, out), out: out}
	t.lane = newLane(t)
	return t
}

func (t *stdioTransport) name() string { return "stdio" }

// begin opens the process's session; its preamble is the server's
// instructions.
func (t *stdioTransport) begin(ctx context.Context, h *Hub) (string, error) {
	t.h = h
	s, err := t.open(ctx, Narrowing{})
	if err != nil {
		return "", err
	}
	h.replace(stdioKey, s)
	return s.preamble, nil
}

// open opens the process's session; the startup line stays the first
// line on stderr, before the session's start-up warnings and records.
func (t *stdioTransport) open(ctx context.Context, n Narrowing) (*Session, error) {
	return t.h.open(ctx, n, stdioKey, func(s *Session) error {
		if t.started != nil {
			line := s.startupLine()
			if n.asked() {
				line += " (narrowed by the client)"
			}
			t.started(line)
		}
		return nil
	})
}

func (t *stdioTransport) key(context.Context) string { return stdioKey }

// initialize replaces the process's session by a narrower one when the
// client asks for one.
func (t *stdioTransport) initialize(ctx context.Context, params json.RawMessage) error {
	n, asked, err := parseInitialize(params)
	if err != nil || !asked {
		return err
	}
	s, err := t.open(ctx, n)
	if err != nil {
		return err
	}
	if old := t.h.replace(stdioKey, s); old != nil {
		old.Close()
	}
	return nil
}

// initialized opens the lane to clients of the revisions with sessions;
// one on the sessionless revision has every call served by the library.
func (t *stdioTransport) initialized(_ context.Context, res *mcp.InitializeResult) {
	if res != nil && res.ProtocolVersion < mcp.ProtocolVersion20260728 && t.lane.base != nil {
		t.lane.on.Store(true)
	}
}

// ended: the process's session ends with the process (closeAll).
func (t *stdioTransport) ended(mcpserver.ClientSession) {}

// notifyCall writes the notification on stdout now, before the call's
// result: the library's own notification channel is drained by a goroutine
// that races the worker writing the result (http_streams.go).
func (t *stdioTransport) notifyCall(_ context.Context, method string, params map[string]any) {
	if b, err := json.Marshal(notification(method, params)); err == nil {
		_, _ = t.out.Write(append(b, '\n'))
	}
}

// notifyClient: over stdio there is one client and one stream.
func (t *stdioTransport) notifyClient(_, method string, params map[string]any) {
	t.notifyCall(context.Background(), method, params)
}

// serve runs the library's stdio server over the transport until stdin
// ends or ctx does; then the lane's calls are cancelled and waited for.
func (t *stdioTransport) serve(ctx context.Context) error {
	stdio := mcpserver.NewStdioServer(t.h.srv)
	stdio.SetErrorLogger(slog.NewLogLogger(t.h.o.logger().With("component", "mcp-transport").Handler(), slog.LevelError))
	// The lane's calls run in the context the library gives its own
	// handlers (it holds the stdio session: roots, client capabilities).
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		t.lane.base = ctx
		return ctx
	})
	err := stdio.Listen(ctx, t, t.out)
	t.lane.stop()
	if ctx.Err() != nil {
		t.endListens() // the server ends the client's streams (stdio_listen.go)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Read is the library's input: each line the guard passed, except those
// the lane serves.
func (t *stdioTransport) Read(p []byte) (int, error) {
	for len(t.buf) == 0 {
		line, err := t.in.next()
		if len(line) > 0 && !t.listen(line) && !t.lane.take(line) {
			t.buf = append(append(t.buf[:0], line...), '\n')
		}
		if err != nil {
			if len(t.buf) > 0 {
				break
			}
			return 0, err
		}
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	return n, nil
}
