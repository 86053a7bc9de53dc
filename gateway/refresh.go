package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// RefreshGap is the least time between the starts of two tools/list
// refreshes of one server; a variable so tests may shorten it.
var RefreshGap = 100 * time.Millisecond

// refresher runs the tools/list that a server's tools/list_changed asks
// for, one at a time and coalesced: however many notifications arrive
// while one runs, at most one more runs after it (docs/gateway.md, "What a
// server behind evener-mcp can make evener-mcp hold"). A flood of
// notifications costs one goroutine and one list at a time, spaced by
// RefreshGap.
type refresher struct {
	mu      sync.Mutex // guards the fields below
	running bool       // a refresh goroutine is running
	again   bool       // a notification arrived since it started its list
}

// refreshTools asks for a refresh of s's tools.
func (s *Server) refreshTools() {
	r := &s.lists
	r.mu.Lock()
	if r.running {
		r.again = true
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	go func() {
		for {
			start := time.Now()
			s.refreshOnce()
			r.mu.Lock()
			if !r.again {
				r.running = false
				r.mu.Unlock()
				return
			}
			r.again = false
			r.mu.Unlock()
			if d := RefreshGap - time.Since(start); d > 0 {
				time.Sleep(d)
			}
		}
	}()
}

// refreshOnce lists s's tools again and tells the session.
func (s *Server) refreshOnce() {
	s.mu.Lock()
	cli := s.cli
	s.mu.Unlock()
	if cli == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), InitTimeout)
	defer cancel()
	tools, err := s.list(ctx, cli)
	if err != nil {
		s.log.Warn("tools/list after tools/list_changed failed", "error", err.Error())
		return
	}
	s.mu.Lock()
	if s.cli != cli {
		s.mu.Unlock()
		return // restarted meanwhile: its new start listed its tools
	}
	s.tools = tools
	s.mu.Unlock()
	if s.changed != nil {
		s.changed()
	}
}

// stopped says why a bound stopped cli's connection (conn.stop), "" if
// none did.
func stopped(cli interface{ GetTransport() transport.Interface }) string {
	if c, ok := cli.GetTransport().(*conn); ok {
		return c.stopped()
	}
	return ""
}
