package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// resumer lets a request carrying the Mcp-Session-Id of a persisted
// session that this server does not run yet resume it (persist.go): the
// sandbox session is rebuilt, then the client's persisted initialize is
// replayed to the transport under that id, so that mcp-go knows the
// session as it did before the restart (client capabilities, protocol
// version). A session that cannot be resumed is answered 503 with a
// JSON-RPC error naming its mode and the reason, and is never run.
type resumer struct {
	h     *Hub
	ids   *idManager
	store *persistStore
	next  http.Handler
	ttl   time.Duration // --idle-timeout: an older record is not resumed
	mu    sync.Mutex    // serialises resumes and sweeps: one rebuild, and one replay, per id
}

// sweep removes the records idle past the timeout (not while a resume
// runs).
func (rs *resumer) sweep(now time.Time) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n, errs := rs.store.sweep(rs.ttl, now, rs.h.isLive)
	logSweep(rs.h.o.logger(), n, errs)
	return n
}

// logSweep says what a sweep of persisted sessions removed, and what it
// could not remove and why: never "removed" for what is still there.
func logSweep(l *slog.Logger, n int, errs []error) {
	if n > 0 {
		l.Info("removed the records of sessions idle past --idle-timeout", "count", n)
	}
	for _, err := range errs {
		l.Warn("could not remove a persisted session", "error", err)
	}
}

// forgetStale removes the record and scratch of a session not resumed,
// saying what could not be removed.
func (rs *resumer) forgetStale(sid string) {
	if _, err := rs.store.remove(sid); err != nil {
		rs.h.o.logger().Warn("could not remove a persisted session", "error", err)
	}
}

// idResolver is the transport's session id manager: ids, except for the
// replayed initialize of a resumed session, which is given that session's
// id.
type idResolver struct{ ids *idManager }

func (r idResolver) ResolveSessionIdManager(req *http.Request) mcpserver.SessionIdManager {
	if req != nil {
		if id, ok := req.Context().Value(resumeKey{}).(string); ok && id != "" {
			return fixedID{ids: r.ids, id: id}
		}
	}
	return r.ids
}

// fixedID mints one given id.
type fixedID struct {
	ids *idManager
	id  string
}

func (f fixedID) Generate() string {
	f.ids.mu.Lock()
	f.ids.live[f.id] = true
	f.ids.mu.Unlock()
	return f.id
}
func (f fixedID) Validate(id string) (bool, error)  { return f.ids.Validate(id) }
func (f fixedID) Terminate(id string) (bool, error) { return f.ids.Terminate(id) }

func (m *idManager) known(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

func (rs *resumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(mcpserver.HeaderKeySessionID)
	if sid == "" || rs.ids.known(sid) || !rs.store.has(sid) {
		rs.next.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodDelete {
		// The client ends a session this server has not resumed: its
		// record and scratch go.
		rs.mu.Lock()
		if !rs.ids.known(sid) && !rs.h.isLive(sid) {
			rs.forgetStale(sid)
		}
		rs.mu.Unlock()
		if !rs.ids.known(sid) {
			w.WriteHeader(http.StatusOK)
			return
		}
		rs.next.ServeHTTP(w, r)
		return
	}
	var reqID any
	if r.Method == http.MethodPost && r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &m) == nil && len(m.ID) > 0 {
			reqID = m.ID
		}
	}
	if err := rs.resume(r, sid); err != nil {
		var data map[string]any
		var rr *resumeRefusal
		if errors.As(err, &rr) {
			data = map[string]any{"reason": rr.Reason}
			if rr.Mode != "" {
				data["mode"] = rr.Mode
			}
		}
		writeRPCErrorWith(w, http.StatusServiceUnavailable, reqID, mcp.INTERNAL_ERROR, err.Error(), data)
		return
	}
	rs.next.ServeHTTP(w, r)
}

// resume rebuilds sid's session and replays its initialize, once.
func (rs *resumer) resume(r *http.Request, sid string) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ids.known(sid) {
		return nil
	}
	rec, err := rs.store.load(sid)
	if err != nil {
		return &resumeRefusal{Reason: err.Error()}
	}
	if time.Since(rec.LastUsed) > rs.ttl {
		// Idle past the timeout: it ended, as a live one would have.
		rs.forgetStale(sid)
		return nil
	}
	ctx := context.WithValue(context.WithoutCancel(r.Context()), resumeKey{}, sid)
	if _, err := rs.h.resume(ctx, sid); err != nil {
		return err
	}
	params := map[string]any{
		"protocolVersion": rec.Protocol,
		"clientInfo":      rec.ClientInfo,
		"capabilities":    rec.Capabilities,
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": string(mcp.MethodInitialize), "params": params})
	if err == nil {
		var req *http.Request
		if req, err = http.NewRequestWithContext(ctx, http.MethodPost, r.URL.String(), bytes.NewReader(body)); err == nil {
			req.Host = r.Host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			rs.next.ServeHTTP(&discardWriter{h: http.Header{}}, req)
		}
	}
	if err != nil || !rs.ids.known(sid) {
		rs.h.mu.Lock()
		s := rs.h.sessions[sid]
		delete(rs.h.sessions, sid)
		rs.h.mu.Unlock()
		if s != nil {
			rs.h.suspend(s)
			s.Close()
		}
		return errors.New("the transport did not take the resumed session")
	}
	return nil
}
