package server

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/gateway"
	"github.com/evener-dev/evener-mcp/gateway/pins"
	"github.com/mark3labs/mcp-go/mcp"
)

// Pins (docs/gateway.md, "Pins"): a downstream tool is published only
// while it matches what the user approved of it in this project (package
// gateway/pins). One that is new, or whose title, description or input
// schema changed since its pin, is withheld and recorded as pending in the
// pin file; the preamble names it; `evener-mcp gateway approve` pins it,
// and a session waiting on a pending tool sees the file change (PinPoll),
// publishes it and tells the client once (tools/list_changed).

// PinPoll is how often a session with tools awaiting approval looks at
// their pin files; a variable so tests may shorten it.
var PinPoll = time.Second

// sessionPins is one session's view of its servers' pins.
type sessionPins struct {
	mu sync.Mutex // guards the fields below
	// pending maps a server's name to its tools awaiting approval, as
	// published names with why ("new", "changed since approved").
	pending map[string][]string
	// stamps maps a pin file's key to its stamp (pins.Store.Stamp) as
	// this session last read or wrote it.
	stamps map[string]string
	// polling says the poll goroutine runs; done ends it.
	polling bool
	done    chan struct{}
}

// pinPolicy is the approval policy of the server named name ("off" when
// there is no state directory to keep pins in).
func (s *Session) pinPolicy(name string) string {
	if s.h.o.Config.StateDir == "" {
		return pins.Off
	}
	for _, e := range s.h.o.Config.MCPServers {
		if e.Name == name {
			if e.Approval == "" {
				return config.ApprovalFirstUse
			}
			return e.Approval
		}
	}
	return pins.Off
}

// pinKey is the key of the pin file of a server for this user and project.
func (s *Session) pinKey(server string) string {
	return pins.Key(os.Getuid(), s.h.o.Policy.Workdir(), server)
}

// pinTool is what a pin holds of a published tool: its own title and
// description (without the [SERVER] prefix) and its input schema's hash.
func pinTool(server string, t mcp.Tool) (pins.Tool, error) {
	raw := t.RawInputSchema
	if raw == nil {
		var err error
		if raw, err = json.Marshal(t.InputSchema); err != nil {
			return pins.Tool{}, err
		}
	}
	h, err := pins.SchemaHash(raw)
	if err != nil {
		return pins.Tool{}, err
	}
	return pins.Tool{Title: t.Title, Description: strings.TrimPrefix(t.Description, "["+server+"] "), Schema: h}, nil
}

// pinned is the part of ts (srv's tools as published) that matches its
// pins, after recording the others as pending. A pin file that cannot be
// read or written publishes none of srv's tools (with a warning): an
// approval that cannot be checked is not one. s.mu is held.
func (s *Session) pinned(srv *gateway.Server, ts []mcp.Tool) []mcp.Tool {
	policy := s.pinPolicy(srv.Name())
	if policy == pins.Off || len(ts) == 0 {
		// No tools: not up yet. The file is left as it is, so that a
		// first-use server's first listing is the one pinned.
		return ts
	}
	listed := map[string]pins.Tool{}
	byName := map[string]mcp.Tool{}
	prefix := srv.Name() + gateway.Sep
	for _, t := range ts {
		own := strings.TrimPrefix(t.Name, prefix)
		pt, err := pinTool(srv.Name(), t)
		if err != nil {
			s.h.warnOnce("mcp_servers.%s: tool %q not published: its schema cannot be hashed: %v", srv.Name(), own, err)
			continue
		}
		listed[own], byName[own] = pt, t
	}
	store, key := pins.Open(s.h.o.Config.StateDir), s.pinKey(srv.Name())
	var publish []string
	f, stamp, err := store.Update(key, func(f *pins.File, exists bool) (bool, error) {
		f.Server, f.Project, f.UID = srv.Name(), s.h.o.Policy.Workdir(), os.Getuid()
		var changed bool
		publish, changed = pins.Review(f, listed, policy, exists, time.Now().UTC())
		return changed, nil
	})
	p := s.gwPins()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stamps[key] = stamp
	if err != nil {
		s.h.warnOnce("mcp_servers.%s: no tool published: %v", srv.Name(), err)
		delete(p.pending, srv.Name())
		return nil
	}
	var waiting []string
	for own, w := range f.Pending {
		why := "new"
		if w.Old != nil {
			why = "changed since approved"
		}
		waiting = append(waiting, prefix+own+" ("+why+")")
	}
	slices.Sort(waiting)
	if len(waiting) == 0 {
		delete(p.pending, srv.Name())
	} else {
		if !slices.Equal(p.pending[srv.Name()], waiting) {
			s.log.Warn("MCP server tools await approval", "mcp_server", srv.Name(), "tools", strings.Join(waiting, ", "))
		}
		p.pending[srv.Name()] = waiting
		if !p.polling {
			p.polling = true
			go s.pollPins(p)
		}
	}
	out := make([]mcp.Tool, 0, len(publish))
	for _, own := range publish {
		out = append(out, byName[own])
	}
	return out
}

// gwPins is the session's pin state, made on first use.
func (s *Session) gwPins() *sessionPins {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	if s.gw.pins == nil {
		s.gw.pins = &sessionPins{pending: map[string][]string{}, stamps: map[string]string{}, done: make(chan struct{})}
	}
	return s.gw.pins
}

// pollPins looks at the pin files of the servers with pending tools every
// PinPoll, while there are any and until the session ends; a file changed
// by someone else (an approval) rebuilds the session's tools.
func (s *Session) pollPins(p *sessionPins) {
	store := pins.Open(s.h.o.Config.StateDir)
	t := time.NewTicker(PinPoll)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.polling = false
			p.mu.Unlock()
			return
		}
		moved := false
		for server := range p.pending {
			key := s.pinKey(server)
			if store.Stamp(key) != p.stamps[key] {
				moved = true
			}
		}
		p.mu.Unlock()
		if moved {
			s.gatewayChanged()
		}
	}
}

// stopPins ends the session's pin polling.
func (s *Session) stopPins() {
	if s.gw == nil {
		return
	}
	s.gw.mu.Lock()
	p := s.gw.pins
	s.gw.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		select {
		case <-p.done:
		default:
			close(p.done)
		}
		p.mu.Unlock()
	}
}

// pinStatus is the preamble's line about the tools awaiting approval.
func (s *Session) pinStatus() string {
	if s.gw == nil {
		return ""
	}
	s.gw.mu.Lock()
	p := s.gw.pins
	s.gw.mu.Unlock()
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var all []string
	for _, w := range p.pending {
		all = append(all, w...)
	}
	if len(all) == 0 {
		return ""
	}
	slices.Sort(all)
	return fmt.Sprintf("- MCP server tools not published until the user approves them (`evener-mcp gateway pending` shows what changed, `evener-mcp gateway approve NAME` approves, in this project): %s.\n",
		strings.Join(all, ", "))
}
