package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/evener-dev/evener-mcp/session"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// ViolationsURI is the resource holding the session's recent violations
// (docs/observability.md, "Violations"): each MCP session reads its own.
const ViolationsURI = "evener://session/violations"

// violationsDoc is the resource's content, oldest first.
type violationsDoc struct {
	Violations []session.Noted `json:"violations"`
}

// violationFeed is a session's subscription to its violations resource.
// An update found during a call is sent with the call's notifications,
// ahead of its result (in the call's own stream over HTTP, which a client
// without a GET stream reads); one found outside any call is sent on the
// session's own channel.
type violationFeed struct {
	watching atomic.Bool  // the client subscribed to ViolationsURI (resources/subscribe)
	unsent   atomic.Bool  // a violation arrived that no update told yet
	lastIdle atomic.Int64 // when the last update outside a call left (unix ns)
	delayed  atomic.Bool  // an update outside a call waits for idleUpdateGap
}

// idleUpdateGap is the least time between two updates sent outside a call:
// a process refused again and again (an MCP server behind this one, say)
// is told a few times a second, not once per refusal. Updates during a
// call are one per call at most.
const idleUpdateGap = 200 * time.Millisecond

// addViolations registers the resource and follows subscriptions to it.
func (h *Hub) addViolations(hooks *mcpserver.Hooks) {
	follow := func(ctx context.Context, uri string, on bool) {
		if uri != ViolationsURI {
			return // the preamble never changes: nothing to tell
		}
		if s := h.lookup(ctx); s != nil {
			s.feed.watching.Store(on)
		}
	}
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		follow(ctx, req.Params.URI, true)
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		follow(ctx, req.Params.URI, false)
	})
}

// addViolationsResource registers the resource on the MCP server.
func (h *Hub) addViolationsResource() {
	h.srv.AddResource(mcp.NewResource(ViolationsURI, "sandbox violations",
		mcp.WithResourceDescription(fmt.Sprintf("This session's most recent sandbox violations (at most %d, oldest first): refused network connections, refused file operations, repositories set aside. Subscribe to be told of new ones.", session.MaxViolations)),
		mcp.WithMIMEType("application/json")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			s := h.lookup(ctx)
			if s == nil {
				return nil, errSessionless
			}
			b, err := json.Marshal(violationsDoc{Violations: s.sb.Violations.List()})
			if err != nil {
				return nil, fmt.Errorf("violations: %w", err)
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: ViolationsURI, MIMEType: "application/json", Text: string(b)}}, nil
		})
}

// violationAdded is the session's observer of its violations: with a
// subscriber, an update is due; a call in flight sends it (flushViolations),
// otherwise it is sent now.
func (s *Session) violationAdded() {
	if !s.violationsWatched() {
		return
	}
	s.feed.unsent.Store(true)
	if s.inflight.Load() == 0 {
		s.violationsIdle()
	}
}

// flushViolations sends a due update with the call in ctx's notifications.
func (s *Session) flushViolations(ctx context.Context) {
	if s.feed.unsent.Swap(false) && s.violationsWatched() {
		s.tellViolations(func(method string, params map[string]any) { s.notifyCall(ctx, method, params) })
	}
}

// violationsWatched says whether the client asked to be told of new
// violations: resources/subscribe, or a subscriptions/listen stream on the
// sessionless revision (listen.go).
func (s *Session) violationsWatched() bool {
	return s.feed.watching.Load() || s.listens.watchingViolations()
}

// tellViolations sends the update with send: untagged to a client that
// subscribed, and once on each stream that asked for it, tagged with the
// stream's id.
func (s *Session) tellViolations(send func(method string, params map[string]any)) {
	method := string(mcp.MethodNotificationResourceUpdated)
	params := map[string]any{"uri": ViolationsURI}
	if s.feed.watching.Load() {
		send(method, params)
	}
	for _, id := range s.listens.ids(func(l *listenSub) bool { return l.violations }) {
		send(method, tagged(id, params))
	}
}

// violationsIdle sends a due update outside any call (after the last call
// in flight ended, or for a violation no call met).
func (s *Session) violationsIdle() {
	if !s.feed.unsent.Load() || !s.violationsWatched() {
		return
	}
	now := time.Now().UnixNano()
	if wait := time.Duration(s.feed.lastIdle.Load() + int64(idleUpdateGap) - now); wait > 0 {
		if s.feed.delayed.CompareAndSwap(false, true) {
			time.AfterFunc(wait, func() {
				s.feed.delayed.Store(false)
				s.violationsIdle()
			})
		}
		return
	}
	if !s.feed.unsent.Swap(false) {
		return
	}
	s.feed.lastIdle.Store(now)
	s.tellViolations(s.notifyClient)
}
