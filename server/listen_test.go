package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// listenTransport records what each notification carries.
type listenTransport struct {
	transport
	mu   sync.Mutex // guards sent
	sent []string   // method and stream id ("" for none), one per notification
}

func (f *listenTransport) notifyCall(_ context.Context, method string, params map[string]any) {
	f.notifyClient("", method, params)
}

func (f *listenTransport) notifyClient(_, method string, params map[string]any) {
	b, err := json.Marshal(notification(method, params))
	if err != nil {
		panic(err)
	}
	var n struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(b, &n); err != nil {
		panic(err)
	}
	id := ""
	if v, ok := n.Params.Meta[mcp.MetaKeySubscriptionID]; ok {
		id = fmt.Sprint(v)
	}
	f.mu.Lock()
	f.sent = append(f.sent, method+" "+id)
	f.mu.Unlock()
}

func (f *listenTransport) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.sent
	f.sent = nil
	slices.Sort(out)
	return out
}

// TestListenFeed: a stream is told only once its acknowledgement is out,
// and only what it asked for, tagged with its id; a client whose streams
// did not ask for tool list changes hears none; one without streams is
// told as before.
func TestListenFeed(t *testing.T) {
	ft := &listenTransport{}
	s := &Session{h: &Hub{t: ft}}
	v := &listenSub{id: "v", violations: true}
	tl := &listenSub{id: 7.0, tools: true}
	if !s.listens.add(`"v"`, v) || !s.listens.add(`7`, tl) || s.listens.add(`7`, &listenSub{id: 7.0}) {
		t.Fatal("add: a fresh id refused or an open one taken twice")
	}
	s.violationAdded()
	s.toolsChanged()
	if got := ft.take(); len(got) != 0 {
		t.Fatalf("told before the acknowledgement: %q", got)
	}
	v.ready.Store(true)
	tl.ready.Store(true)
	s.feed.lastIdle.Store(0)
	s.violationAdded() // outside any call: at once
	s.toolsChanged()
	if got, want := ft.take(), []string{"notifications/resources/updated v", "notifications/tools/list_changed 7"}; !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
	// During a call: with the call's flush, once.
	end := s.begin()
	s.violationAdded()
	s.violationAdded()
	s.flushViolations(context.Background())
	end()
	if got, want := ft.take(), []string{"notifications/resources/updated v"}; !slices.Equal(got, want) {
		t.Fatalf("in a call: told %q, want %q", got, want)
	}
	// A legacy subscriber too: told untagged, beside the stream.
	s.feed.watching.Store(true)
	time.Sleep(2 * idleUpdateGap)
	s.violationAdded()
	if got, want := ft.take(), []string{"notifications/resources/updated ", "notifications/resources/updated v"}; !slices.Equal(got, want) {
		t.Fatalf("with both: told %q, want %q", got, want)
	}
	s.feed.watching.Store(false)

	if !s.listens.remove(`"v"`) || s.listens.remove(`"v"`) {
		t.Fatal("remove: an open stream not removed, or a closed one removed")
	}
	time.Sleep(2 * idleUpdateGap)
	s.violationAdded()
	if got := ft.take(); len(got) != 0 {
		t.Fatalf("told after the stream closed: %q", got)
	}
	if ids := s.listens.drain(); len(ids) != 1 || ids[0] != 7.0 || s.listens.n.Load() != 0 {
		t.Fatalf("drain: %v", ids)
	}
	r := &listenSub{id: "r", violations: true}
	r.ready.Store(true)
	s.listens.add(`"r"`, r)
	s.toolsChanged()
	if got := ft.take(); len(got) != 0 {
		t.Fatalf("a client whose stream did not ask for list changes was told: %q", got)
	}
	s.listens.drain()
	s.toolsChanged()
	if got, want := ft.take(), []string{"notifications/tools/list_changed "}; !slices.Equal(got, want) {
		t.Fatalf("a client without streams: told %q, want %q", got, want)
	}
}

// TestNotificationMeta: a "_meta" in params is the notification's _meta,
// written once.
func TestNotificationMeta(t *testing.T) {
	b, err := json.Marshal(notification("notifications/resources/updated", tagged("s", map[string]any{"uri": ViolationsURI})))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s"},"uri":"evener://session/violations"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}
