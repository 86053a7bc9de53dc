package server

import (
	"context"
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
	"github.com/evener-dev/evener-mcp/session"
	"github.com/mark3labs/mcp-go/mcp"
)

// Pins (docs/gateway.md, "Pins"): a downstream tool is published only
// while it matches what the user approved of it in this project (package
// gateway/pins). One that is new, or whose title, description or input
// schema changed since its pin, is withheld and recorded as pending in the
// pin file; the preamble names it; `evener-mcp gateway approve` pins it,
// and a session waiting on a pending tool sees the file change (PinPoll),
// publishes it and tells the client once (tools/list_changed). A client
// that can elicit is asked instead, one tool at a time (askPins), and an
// approval it gives goes through the PreToolUse hooks of the tool's
// published name like a call of it: a hook can veto it.

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
	// waiting maps a published name to what awaits approval of it.
	waiting map[string]pendingTool
	// polling says the poll goroutine runs; done ends it.
	polling bool
	done    chan struct{}
	// client is a context of the client's (its session, detached from
	// the request it came with, ended with the session), set once it has
	// listed its tools when it can elicit; nil otherwise.
	client context.Context
	cancel context.CancelFunc
	// asking says askPins runs; asked holds the versions (askKey) the
	// human was asked about in this session, not to ask again.
	asking bool
	asked  map[string]bool
}

// pendingTool is one tool awaiting approval, as the pin file has it.
type pendingTool struct {
	server, own string
	p           pins.Pending
}

// askKey is the version of a pending tool the human is asked about.
func askKey(name string, p pins.Pending) string {
	return name + "\x00" + p.Title + "\x00" + p.Description + "\x00" + p.Schema
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
	for name := range p.waiting {
		if strings.HasPrefix(name, prefix) {
			delete(p.waiting, name)
		}
	}
	for own, w := range f.Pending {
		why := "new"
		if w.Old != nil {
			why = "changed since approved"
		}
		waiting = append(waiting, prefix+own+" ("+why+")")
		p.waiting[prefix+own] = pendingTool{server: srv.Name(), own: own, p: w}
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
		s.askLocked(p)
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
		s.gw.pins = &sessionPins{pending: map[string][]string{}, stamps: map[string]string{}, done: make(chan struct{}),
			waiting: map[string]pendingTool{}, asked: map[string]bool{}}
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
			if p.cancel != nil {
				p.cancel()
			}
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

// pinClient records the client of ctx (a tools/list of it) as the one to
// ask about pending tools, when it can elicit, and asks about those
// waiting already.
func (s *Session) pinClient(ctx context.Context) {
	if s.gw == nil || s.h.t.caps(ctx).Elicitation == nil {
		return
	}
	p := s.gwPins()
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return
	default:
	}
	if p.client == nil {
		p.client, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	s.askLocked(p)
}

// askLocked starts askPins unless it runs, there is no client to ask, or
// nothing new waits. p.mu is held.
func (s *Session) askLocked(p *sessionPins) {
	if p.asking || p.client == nil {
		return
	}
	for name, w := range p.waiting {
		if !p.asked[askKey(name, w.p)] {
			p.asking = true
			go s.askPins(p)
			return
		}
	}
}

// askPins asks the human about each tool awaiting approval that they were
// not asked about yet in this session, one at a time, until none is left
// or the session ends.
func (s *Session) askPins(p *sessionPins) {
	for {
		p.mu.Lock()
		var names []string
		for name, w := range p.waiting {
			if !p.asked[askKey(name, w.p)] {
				names = append(names, name)
			}
		}
		ctx := p.client
		if len(names) == 0 || ctx.Err() != nil {
			p.asking = false
			p.mu.Unlock()
			return
		}
		slices.Sort(names)
		name, w := names[0], p.waiting[names[0]]
		p.asked[askKey(name, w.p)] = true
		p.mu.Unlock()
		if s.askPin(ctx, name, w) {
			s.gatewayChanged()
		}
	}
}

// askPin asks the human whether to publish one pending tool, showing what
// changed; an approval then passes the tool's PreToolUse hooks, as a call
// of it would, before it is pinned. It says whether the tool was pinned.
func (s *Session) askPin(ctx context.Context, name string, w pendingTool) bool {
	var msg strings.Builder
	// Every text from the downstream is quoted: cleaned already
	// (gateway.CleanText), and quoted so that it cannot pose as ours.
	if w.p.Old == nil {
		fmt.Fprintf(&msg, "The MCP server %s lists a new tool, %s. Publish it to the agent?\n", w.server, name)
		fmt.Fprintf(&msg, "Description: %q\nInput schema: sha256 %s", w.p.Description, w.p.Schema)
	} else {
		fmt.Fprintf(&msg, "The MCP server %s changed its tool %s since you approved it (%s). Publish the new version to the agent?\n",
			w.server, name, w.p.Old.Approved.Format(time.RFC3339))
		if w.p.Old.Title != w.p.Title {
			fmt.Fprintf(&msg, "Title was: %q\nTitle now: %q\n", w.p.Old.Title, w.p.Title)
		}
		if w.p.Old.Description != w.p.Description {
			fmt.Fprintf(&msg, "Description was: %q\nDescription now: %q\n", w.p.Old.Description, w.p.Description)
		}
		if w.p.Old.Schema != w.p.Schema {
			fmt.Fprintf(&msg, "Input schema was: sha256 %s\nInput schema now: sha256 %s\n", w.p.Old.Schema, w.p.Schema)
		}
	}
	actx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	answer, err := s.h.t.elicit(actx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params: mcp.ElicitationParams{
			Message: strings.TrimSuffix(msg.String(), "\n"),
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"approve": map[string]any{"type": "boolean", "title": "Publish " + name, "default": false},
				},
				"required": []string{"approve"},
			},
		},
	})
	approved := false
	if err == nil && answer.Action == mcp.ElicitationResponseActionAccept {
		if c, ok := answer.Content.(map[string]any); ok {
			approved, _ = c["approve"].(bool)
		}
	}
	if !approved {
		decision := "pin-declined"
		if err != nil {
			decision = "pin-unanswered"
		}
		s.sb.Audit.Write(session.Record{Tool: name, Decision: decision})
		return false
	}
	// The hooks see the approval as a call of the tool whose input is
	// what is approved.
	approval := map[string]any{"gateway_approval": map[string]any{
		"server": w.server, "tool": w.own, "title": w.p.Title, "description": w.p.Description,
		"input_schema_sha256": w.p.Schema, "changed": w.p.Old != nil,
	}}
	if _, denied := s.hooks.before(ctx, name, approval); denied != nil {
		s.sb.Audit.Write(session.Record{Tool: name, Decision: "pin-refused", Rule: HookRule})
		s.log.Warn("a hook refused the approval of an MCP server tool", "tool", name)
		return false
	}
	store := pins.Open(s.h.o.Config.StateDir)
	_, _, err = store.Update(s.pinKey(w.server), func(f *pins.File, _ bool) (bool, error) {
		cur, ok := f.Pending[w.own]
		if !ok || cur.Tool != w.p.Tool {
			return false, fmt.Errorf("%s changed again while the user was asked", name)
		}
		return true, pins.Approve(f, w.own, "elicitation", time.Now().UTC())
	})
	if err != nil {
		s.log.Warn("the approval of an MCP server tool was not recorded", "tool", name, "error", err.Error())
		return false
	}
	s.sb.Audit.Write(session.Record{Tool: name, Decision: "pin-approved"})
	return true
}
