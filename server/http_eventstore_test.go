package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// bigEvent is a progress notification carrying n bytes of output.
func bigEvent(n int, tag string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"%s%s"}}`, tag, strings.Repeat("x", n)))
}

// recount checks the store's byte accounting against its contents.
func recount(t *testing.T, s *boundedEventStore) {
	t.Helper()
	var all int64
	for name, l := range s.sessions {
		var sess int64
		for id, st := range l.streams {
			var b int64
			for _, e := range st.events {
				b += e.size()
				if l.where[e.id] != id {
					t.Fatalf("session %s: event %s not indexed under stream %s", name, e.id, id)
				}
			}
			if b != st.bytes {
				t.Fatalf("session %s stream %s: %d bytes counted, %d held", name, id, st.bytes, b)
			}
			sess += b
		}
		if sess != l.bytes {
			t.Fatalf("session %s: %d bytes counted, %d held", name, l.bytes, sess)
		}
		all += sess
	}
	if all != s.used {
		t.Fatalf("store: %d bytes counted, %d held", s.used, all)
	}
}

func replayable(s *boundedEventStore, session, id string) bool {
	_, err := s.ReplayEventsAfter(context.Background(), session, id, func(string, json.RawMessage) error { return nil })
	return err == nil
}

// TestEventStoreBytes: a chatty session's buffered events stay within the
// byte budgets however large its events (the count bound alone let 32
// streams of 256 events of 64 KiB hold 512 MiB per session).
func TestEventStoreBytes(t *testing.T) {
	ctx := context.Background()
	const ev = 64 << 10
	s := newBoundedEventStore(eventsPerStream, streamsPerSession)
	s.stBytes, s.sessByte, s.total = 1<<20, 4<<20, 8<<20

	// One stream: its own budget.
	var last string
	for i := 0; i < 100; i++ {
		last, _ = s.StoreEvent(ctx, "a", "A", bigEvent(ev, fmt.Sprint(i)))
	}
	recount(t, s)
	if b := s.sessions["a"].streams["A"].bytes; b > s.stBytes {
		t.Errorf("stream holds %d bytes, budget %d", b, s.stBytes)
	}
	if !replayable(s, "a", last) {
		t.Error("the newest event was evicted")
	}

	// Many streams of one session: the session's budget, oldest first.
	var firsts, lasts []string
	for st := 0; st < 20; st++ {
		for i := 0; i < 30; i++ {
			id, _ := s.StoreEvent(ctx, "a", fmt.Sprint("S", st), bigEvent(ev, fmt.Sprint(i)))
			if i == 0 {
				firsts = append(firsts, id)
			}
			if i == 29 {
				lasts = append(lasts, id)
			}
		}
	}
	recount(t, s)
	if b := s.sessions["a"].bytes; b > s.sessByte {
		t.Errorf("session holds %d bytes, budget %d", b, s.sessByte)
	}
	if replayable(s, "a", firsts[0]) {
		t.Error("the session's oldest event survived its budget")
	}
	if !replayable(s, "a", lasts[len(lasts)-1]) {
		t.Error("the session's newest event was evicted")
	}

	// Many sessions: the store's budget; the largest session pays first.
	for n := 0; n < 10; n++ {
		for i := 0; i < 40; i++ {
			s.StoreEvent(ctx, fmt.Sprint("sess", n), "A", bigEvent(ev, fmt.Sprint(i)))
		}
	}
	recount(t, s)
	if s.used > s.total {
		t.Errorf("store holds %d bytes, budget %d", s.used, s.total)
	}

	// One event larger than every budget is kept (the result of a call
	// must stay resumable) and pushes the rest of its session out.
	huge := bigEvent(10<<20, "huge")
	id, _ := s.StoreEvent(ctx, "b", "R", huge)
	recount(t, s)
	if !replayable(s, "b", id) {
		t.Error("an event over every budget, just stored, was evicted")
	}
	if s.used > s.total+int64(len(huge))+eventOverhead+64 {
		t.Errorf("store holds %d bytes, budget %d plus one event of %d", s.used, s.total, len(huge))
	}
	// The next event stored anywhere brings the store back under budget.
	s.StoreEvent(ctx, "c", "X", bigEvent(10, "c"))
	recount(t, s)
	if s.used > s.total {
		t.Errorf("store holds %d bytes after the next event, budget %d", s.used, s.total)
	}

	// Purge releases the bytes.
	for name := range s.sessions {
		s.PurgeSession(ctx, name)
	}
	if s.used != 0 || len(s.sessions) != 0 {
		t.Errorf("after purging every session: %d bytes, %d sessions", s.used, len(s.sessions))
	}
}

// TestEventStoreReplayAfterEviction: a client resuming after an evicted
// event is told it is unknown (and starts over) rather than given a gap.
func TestEventStoreReplayAfterEviction(t *testing.T) {
	ctx := context.Background()
	s := newBoundedEventStore(eventsPerStream, streamsPerSession)
	s.stBytes = 350 << 10
	var ids []string
	for i := 0; i < 10; i++ {
		id, _ := s.StoreEvent(ctx, "a", "A", bigEvent(100<<10, fmt.Sprint(i)))
		ids = append(ids, id)
	}
	if _, err := s.ReplayEventsAfter(ctx, "a", ids[0], func(string, json.RawMessage) error { return nil }); !errors.Is(err, mcpserver.ErrUnknownEventID) {
		t.Errorf("replay after an evicted event: %v", err)
	}
	var n int
	if _, err := s.ReplayEventsAfter(ctx, "a", ids[7], func(string, json.RawMessage) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("replay after a kept event: %d events, %v", n, err)
	}
}
