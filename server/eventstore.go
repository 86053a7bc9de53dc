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
const (
	eventsPerStream   = 256
	streamsPerSession = 32
)

// boundedEventStore is mcp-go's EventStore with bounds: the library's
// in-memory store keeps every event of a session until it ends, which for
// a long session of chatty shell calls grows without limit.
type boundedEventStore struct {
	mu       sync.Mutex
	seq      int64
	perSt    int
	perSess  int
	sessions map[string]*eventLog
}

type eventLog struct {
	order   []string // stream ids, oldest first
	streams map[string][]storedEvent
	where   map[string]string // event id -> stream id
}

type storedEvent struct {
	id  string
	msg json.RawMessage
}

var _ mcpserver.EventStore = (*boundedEventStore)(nil)

func newBoundedEventStore(perStream, perSession int) *boundedEventStore {
	return &boundedEventStore{perSt: perStream, perSess: perSession, sessions: map[string]*eventLog{}}
}

func (s *boundedEventStore) StoreEvent(_ context.Context, session, stream string, msg json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[session]
	if l == nil {
		l = &eventLog{streams: map[string][]storedEvent{}, where: map[string]string{}}
		s.sessions[session] = l
	}
	if _, ok := l.streams[stream]; !ok {
		l.order = append(l.order, stream)
		if len(l.order) > s.perSess {
			old := l.order[0]
			l.order = l.order[1:]
			for _, e := range l.streams[old] {
				delete(l.where, e.id)
			}
			delete(l.streams, old)
		}
	}
	s.seq++
	id := strconv.FormatInt(s.seq, 10)
	evs := append(l.streams[stream], storedEvent{id: id, msg: append(json.RawMessage(nil), msg...)})
	if len(evs) > s.perSt {
		for _, e := range evs[:len(evs)-s.perSt] {
			delete(l.where, e.id)
		}
		evs = append([]storedEvent(nil), evs[len(evs)-s.perSt:]...)
	}
	l.streams[stream] = evs
	l.where[id] = stream
	return id, nil
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
	evs := l.streams[stream]
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
	delete(s.sessions, session)
	s.mu.Unlock()
	return nil
}
