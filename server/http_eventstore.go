package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Bounds of the event store: a stream keeps its last eventsPerStream
// events, a session its last streamsPerSession streams. A client that
// reconnects within that window misses nothing, the final progress
// notification and the result included; memory stays bounded however long
// a session lives.
//
// Counts alone do not bound memory (a progress event of a chatty shell
// call holds up to 64 KiB of output, more once JSON-escaped), so the store
// has byte budgets too: a stream keeps at most bytesPerStream, a session at
// most bytesPerSession, the whole server at most bytesTotal. Over a budget,
// the oldest events go first (a stream's own for its budget; the session's
// oldest across its streams for the session's; the largest session's
// oldest for the server's). The event just stored is always kept, so that
// the result of a call can be resumed: the bound is the budget plus one
// event.
const (
	eventsPerStream   = 256
	streamsPerSession = 32
	bytesPerStream    = 4 << 20
	bytesPerSession   = 16 << 20
	bytesTotal        = 128 << 20
)

// eventOverhead is what an event costs beyond its message (its id, the
// slice entry, the index entry), roughly.
const eventOverhead = 96

// boundedEventStore is mcp-go's EventStore with bounds: the library's
// in-memory store keeps every event of a session until it ends, which for
// a long session of chatty shell calls grows without limit.
type boundedEventStore struct {
	mu       sync.Mutex // guards every field below
	seq      int64
	perSt    int
	perSess  int
	stBytes  int64 // per stream
	sessByte int64 // per session
	total    int64 // the whole store's budget
	used     int64 // bytes held by the whole store
	sessions map[string]*eventLog
}

type eventLog struct {
	order   []string // stream ids, oldest first
	streams map[string]*streamLog
	where   map[string]string // event id -> stream id
	bytes   int64
}

type streamLog struct {
	events []storedEvent // oldest first
	bytes  int64
}

type storedEvent struct {
	seq int64
	id  string
	msg json.RawMessage
}

func (e storedEvent) size() int64 { return int64(len(e.msg)+len(e.id)) + eventOverhead }

var _ mcpserver.EventStore = (*boundedEventStore)(nil)

func newBoundedEventStore(perStream, perSession int) *boundedEventStore {
	return &boundedEventStore{perSt: perStream, perSess: perSession,
		stBytes: bytesPerStream, sessByte: bytesPerSession, total: bytesTotal,
		sessions: map[string]*eventLog{}}
}

func (s *boundedEventStore) StoreEvent(_ context.Context, session, stream string, msg json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[session]
	if l == nil {
		l = &eventLog{streams: map[string]*streamLog{}, where: map[string]string{}}
		s.sessions[session] = l
	}
	st := l.streams[stream]
	if st == nil {
		st = &streamLog{}
		l.streams[stream] = st
		l.order = append(l.order, stream)
		if len(l.order) > s.perSess {
			old := l.order[0]
			l.order = l.order[1:]
			s.dropStream(l, old)
		}
	}
	s.seq++
	e := storedEvent{seq: s.seq, id: strconv.FormatInt(s.seq, 10), msg: append(json.RawMessage(nil), msg...)}
	st.events = append(st.events, e)
	st.bytes += e.size()
	l.bytes += e.size()
	s.used += e.size()
	l.where[e.id] = stream
	for len(st.events) > 1 && (len(st.events) > s.perSt || st.bytes > s.stBytes) {
		s.dropFirst(l, st)
	}
	for l.bytes > s.sessByte && s.dropOldest(l, e.seq) {
	}
	for s.used > s.total {
		big := l
		for _, o := range s.sessions {
			if o.bytes > big.bytes {
				big = o
			}
		}
		if !s.dropOldest(big, e.seq) && (big == l || !s.dropOldest(l, e.seq)) {
			break
		}
	}
	return e.id, nil
}

// dropFirst drops a stream's oldest event.
func (s *boundedEventStore) dropFirst(l *eventLog, st *streamLog) {
	e := st.events[0]
	st.events[0] = storedEvent{} // the backing array must not keep the message
	st.events = st.events[1:]
	st.bytes -= e.size()
	l.bytes -= e.size()
	s.used -= e.size()
	delete(l.where, e.id)
}

// dropOldest drops the session's oldest event across its streams, never
// the one numbered keep; false when there is nothing else to drop.
func (s *boundedEventStore) dropOldest(l *eventLog, keep int64) bool {
	var oldest *streamLog
	for _, st := range l.streams {
		if len(st.events) > 0 && st.events[0].seq != keep && (oldest == nil || st.events[0].seq < oldest.events[0].seq) {
			oldest = st
		}
	}
	if oldest == nil {
		return false
	}
	s.dropFirst(l, oldest)
	return true
}

func (s *boundedEventStore) dropStream(l *eventLog, stream string) {
	st := l.streams[stream]
	if st == nil {
		return
	}
	for _, e := range st.events {
		delete(l.where, e.id)
	}
	l.bytes -= st.bytes
	s.used -= st.bytes
	delete(l.streams, stream)
}

func (s *boundedEventStore) ReplayEventsAfter(_ context.Context, session, last string, send func(string, json.RawMessage) error) (string, error) {
	s.mu.Lock()
	l := s.sessions[session]
	var stream string
	var after []storedEvent
	if l != nil {
		stream = l.where[last]
	}
	if stream == "" {
		s.mu.Unlock()
		return "", fmt.Errorf("event %q: %w", last, mcpserver.ErrUnknownEventID)
	}
	evs := l.streams[stream].events
	for i, e := range evs {
		if e.id == last {
			after = append(after, evs[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	for _, e := range after {
		if err := send(e.id, e.msg); err != nil {
			return stream, err
		}
	}
	return stream, nil
}

func (s *boundedEventStore) PurgeSession(_ context.Context, session string) error {
	s.mu.Lock()
	if l := s.sessions[session]; l != nil {
		s.used -= l.bytes
	}
	delete(s.sessions, session)
	s.mu.Unlock()
	return nil
}
