package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/evener-dev/evener-mcp/metrics"
)

// serveMetrics serves /metrics (and nothing else) on its own listener
// until stop is called. The collectors hold counts only, with labels from fixed
// sets (package metrics), so the listener has neither a token nor the
// peer-user check of /mcp; off loopback it needs the person running the
// server to say so (--metrics-allow-remote).
func serveMetrics(m *metrics.Metrics, listen string, allowRemote bool, ready func(net.Addr), errLog func(error)) (stop func(), err error) {
	if !IsLoopback(listen) && !allowRemote {
		return nil, fmt.Errorf("metrics listen %s: not a loopback address; the metrics endpoint is unauthenticated, so serving it beyond loopback needs --metrics-allow-remote", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr())
	}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && errLog != nil {
			errLog(fmt.Errorf("metrics: %w", err))
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
	}, nil
}
