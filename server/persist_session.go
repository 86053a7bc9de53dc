package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/session"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
)

// resumeKey marks the context of the initialize the server replays to the
// transport for a resumed session (persist_http.go); its value is the MCP
// session id.
type resumeKey struct{}

// persistNew writes the record of a session just created (no-op without
// --persist-sessions). A session whose record cannot be written still
// runs; it just will not survive a restart, and the log says so.
func (h *Hub) persistNew(s *Session, n Narrowing, params json.RawMessage) {
	if h.persist == nil {
		return
	}
	var p struct {
		ProtocolVersion string                 `json:"protocolVersion"`
		ClientInfo      mcp.Implementation     `json:"clientInfo"`
		Capabilities    mcp.ClientCapabilities `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	if p.ProtocolVersion == "" {
		p.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	now := time.Now().UTC()
	rec := &sessionRecord{
		Version: recordVersion, MCPID: s.key, SessionID: s.sb.ID,
		Mode: string(s.sb.Policy.Mode()), Network: string(s.sb.Policy.Network()), DegradedShell: s.sb.Degraded != "",
		Tools: slices.Clone(s.Tools), AskedTools: slices.Clone(n.Tools),
		Workdir: s.sb.Policy.Workdir(), Scratch: s.sb.Launcher.Scratch(),
		Created: now, LastUsed: now,
		Protocol: p.ProtocolVersion, ClientInfo: p.ClientInfo, Capabilities: p.Capabilities,
	}
	if err := h.persist.write(rec); err != nil {
		s.log.Warn("this session will not survive a restart", "error", err.Error())
	}
}

// persistRoots records the worktree the session's roots left it with.
func (h *Hub) persistRoots(s *Session) {
	if h.persist == nil || s.key == "" {
		return
	}
	wd := s.sb.Policy.Workdir()
	ok := s.prepErr == nil
	if err := h.persist.update(s.key, func(r *sessionRecord) { r.Workdir, r.RootsApplied = wd, ok }); err != nil {
		s.log.Warn("the session's record was not updated", "error", err.Error())
	}
}

// suspend makes a closing session keep its scratch and record when the
// server persists sessions (shutdown only).
func (h *Hub) suspend(s *Session) {
	if h.persist == nil || s.key == "" {
		return
	}
	s.sb.KeepScratch()
	h.persist.touch(s.key, time.Unix(0, s.lastActive.Load()).UTC(), 0)
	s.sb.Audit.Lifecycle("session-suspend", "kept for a restart (--persist-sessions)")
}

// resumed reports whether ctx is the replayed initialize of id, already
// resumed.
func (h *Hub) resumed(ctx context.Context, id string) bool {
	rid, _ := ctx.Value(resumeKey{}).(string)
	if rid == "" || rid != id {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id] != nil
}

// touchAll brings the records' last-used times up to date (each sweep).
func (h *Hub) touchAll(slack time.Duration) {
	if h.persist == nil {
		return
	}
	h.mu.Lock()
	live := map[string]time.Time{}
	for id, s := range h.sessions {
		if s != nil {
			live[id] = time.Unix(0, s.lastActive.Load()).UTC()
		}
	}
	h.mu.Unlock()
	for id, t := range live {
		h.persist.touch(id, t, slack)
	}
}

// isLive reports whether id is a session of this server (or one being
// built).
func (h *Hub) isLive(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.sessions[id]
	return ok
}

// resumeRefusal is a persisted session this server will not run: its
// record is unreadable, or the policy it would get now is not the one it
// was persisted with.
type resumeRefusal struct {
	Mode   string // the persisted mode ("" when the record is unreadable)
	Reason string
}

func (e *resumeRefusal) Error() string {
	if e.Mode == "" {
		return "this session cannot be resumed: " + e.Reason + "; it is not resumed (start a new session)"
	}
	return fmt.Sprintf("this session was persisted with sandbox %s, and this server cannot resume it so: %s; it is never run weaker (its record is kept until it idles out; start the server where it can enforce %s, or start a new session)", e.Mode, e.Reason, e.Mode)
}

// resume rebuilds the persisted session id from its record: the policy is
// resolved again against this server's base policy and host, with the
// persisted mode and network; the session is refused unless it gets the
// same mode, network, shell floor and worktree, and no tool it did not
// have. Its scratch is reopened (confine.ReopenLauncherUnder checks it).
func (h *Hub) resume(ctx context.Context, id string) (*Session, error) {
	rec, err := h.persist.load(id)
	if err != nil {
		return nil, &resumeRefusal{Reason: err.Error()}
	}
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		return nil, errors.New("the server is shutting down")
	case h.sessions[id] != nil:
		s := h.sessions[id]
		h.mu.Unlock()
		return s, nil
	case h.maxSess > 0 && len(h.sessions) >= h.maxSess:
		h.mu.Unlock()
		return nil, fmt.Errorf("too many sessions (at most %d); end an idle one or raise --max-sessions", h.maxSess)
	}
	h.sessions[id] = nil // reserved while the sandbox session is rebuilt
	h.mu.Unlock()
	s, err := h.rebuild(ctx, id, rec)
	h.mu.Lock()
	if err != nil || h.closed {
		delete(h.sessions, id)
		h.mu.Unlock()
		if err == nil {
			s.sb.KeepScratch()
			s.Close()
			err = errors.New("the server is shutting down")
		}
		return nil, err
	}
	h.sessions[id] = s
	h.mu.Unlock()
	if err := h.persist.write(rec); err != nil { // live again, in this server's store
		s.log.Warn("the session's record was not updated", "error", err.Error())
	}
	return s, nil
}

func (h *Hub) rebuild(ctx context.Context, id string, rec *sessionRecord) (*Session, error) {
	refuse := func(reason string) error { return &resumeRefusal{Mode: rec.Mode, Reason: reason} }
	mode := confine.Mode(rec.Mode)
	n := Narrowing{Tools: rec.AskedTools, Sandbox: rec.Mode, Network: rec.Network}
	if !tools.ChangesFiles(rec.Tools) && mode != confine.ModeReadOnly {
		// The delegate floor decides such a session's mode (and refuses
		// an explicit one): replaying it yields the persisted mode, or
		// the comparison below refuses.
		n.Sandbox = ""
	}
	sp := sessionSpec{n: n, key: id, resumeID: rec.SessionID, resumeScratch: rec.Scratch}
	// The host as it is now, measured again: bubblewrap may have gone (or
	// come) since this server started.
	if mode != confine.ModeOff {
		base, err := h.o.Policy.Rehost(confine.Probe(confine.ProbeFull, os.Environ()))
		if err != nil {
			h.o.logger().Warn("session resume refused", "mode", rec.Mode, "reason", err.Error())
			return nil, refuse(err.Error())
		}
		sp.policy = base
	}
	var refused error
	sp.ready = func(s *Session) error {
		fail := func(reason string) error {
			h.o.logger().Warn("session resume refused", "mode", rec.Mode, "reason", reason)
			s.sb.KeepScratch()
			refused = refuse(reason)
			return refused
		}
		switch {
		case s.sb.Policy.Mode() != mode:
			reason := fmt.Sprintf("it would run in sandbox %s here", s.sb.Policy.Mode())
			if d := h.o.Policy.Degraded(); d != "" {
				reason += " (" + d + ")"
			}
			return fail(reason)
		case string(s.sb.Policy.Network()) != rec.Network:
			return fail(fmt.Sprintf("its network would be %s here, not %s", s.sb.Policy.Network(), rec.Network))
		case s.sb.Degraded != "" && !rec.DegradedShell:
			return fail(session.DegradedShell)
		}
		for _, t := range s.Tools {
			if !slices.Contains(rec.Tools, t) {
				return fail(fmt.Sprintf("this server would give it the tool %s, which it did not have", t))
			}
		}
		if rec.Workdir != s.sb.Policy.Workdir() {
			if err := s.narrowWorkdir(rec.Workdir); err != nil {
				return fail("its worktree cannot be restored: " + err.Error())
			}
			if s.sb.Policy.Workdir() != rec.Workdir {
				return fail("its worktree cannot be restored")
			}
		}
		if rec.RootsApplied {
			s.prepMu.Lock()
			s.prepDone = true // its roots were read before the restart
			s.prepMu.Unlock()
		}
		return nil
	}
	s, err := h.newSession(ctx, sp)
	if err != nil {
		if refused != nil {
			return nil, refused
		}
		h.o.logger().Warn("session resume refused", "mode", rec.Mode, "reason", err.Error())
		return nil, refuse(err.Error())
	}
	s.sb.Audit.Lifecycle("session-resume", "resumed after a server restart (--persist-sessions)")
	return s, nil
}
