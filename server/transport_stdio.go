package server

import (
	"context"
	"errors"
	"io"
	"log/slog"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// RunStdio serves one session over stdin/stdout until stdin closes or ctx
// ends; then the session is closed (processes killed, proxies closed,
// scratch removed).
func RunStdio(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) error {
	h, err := newHub(ctx, o, true, 0)
	if err != nil {
		return err
	}
	defer h.closeAll()
	out := &syncWriter{w: stdout}
	h.stdout = out
	stdio := mcpserver.NewStdioServer(h.srv)
	stdio.SetErrorLogger(slog.NewLogLogger(h.o.logger().With("component", "mcp-transport").Handler(), slog.LevelError))
	// The gateway's calls take the lane (lane.go), in the context the
	// library gives its own handlers.
	h.lane = newLane(h, out)
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		h.lane.base = ctx
		return ctx
	})
	in := newGuardedReader(stdin, out)
	in.lane = h.lane
	err = stdio.Listen(ctx, in, out)
	h.lane.stop()
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
