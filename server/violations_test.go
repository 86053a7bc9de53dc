package server

import (
	"context"
	"sync"
	"testing"
	"time"
)

// feedSession is a Session with only what the violations feed uses: a
// transport that counts updates.
func feedSession() (*Session, func() int) {
	ft := &feedTransport{}
	s := &Session{h: &Hub{t: ft}}
	return s, func() int {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		return ft.n
	}
}

// feedTransport counts the violations resource's updates, in a call or
// outside one alike.
type feedTransport struct {
	transport
	mu sync.Mutex // guards n
	n  int
}

func (f *feedTransport) notifyCall(_ context.Context, method string, params map[string]any) {
	f.notifyClient("", method, params)
}

func (f *feedTransport) notifyClient(_, method string, params map[string]any) {
	if method == "notifications/resources/updated" && params["uri"] == ViolationsURI {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
	}
}

// TestViolationFeed: nothing is told without a subscriber; during a call
// the update waits for the call's flush (one per call, however many
// violations); outside any call a burst is told at most once per
// idleUpdateGap, and its last violation is never left untold.
func TestViolationFeed(t *testing.T) {
	s, sent := feedSession()
	s.violationAdded()
	s.flushViolations(context.Background())
	if sent() != 0 {
		t.Fatalf("told without a subscriber")
	}
	s.feed.watching.Store(true)

	end := s.begin()
	for i := 0; i < 10; i++ {
		s.violationAdded()
	}
	if sent() != 0 {
		t.Fatalf("told during a call, before its flush")
	}
	s.flushViolations(context.Background())
	end()
	if sent() != 1 {
		t.Fatalf("%d updates for one call, want 1", sent())
	}

	// A violation after the call's flush, before its end: told at the end.
	end = s.begin()
	s.flushViolations(context.Background())
	s.violationAdded()
	end()
	if sent() != 2 {
		t.Fatalf("a violation between flush and end was not told: %d", sent())
	}

	// A burst outside any call.
	s.feed.lastIdle.Store(0)
	base := sent()
	for i := 0; i < 100; i++ {
		s.violationAdded()
	}
	if got := sent() - base; got != 1 {
		t.Fatalf("a burst sent %d updates at once, want 1 (then one after the gap)", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sent()-base < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * idleUpdateGap)
	if got := sent() - base; got != 2 {
		t.Fatalf("a burst sent %d updates in all, want 2", got)
	}

	s.feed.watching.Store(false)
	s.violationAdded()
	time.Sleep(2 * idleUpdateGap)
	if got := sent() - base; got != 2 {
		t.Fatalf("told after unsubscribe")
	}
}
