package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// shorten sets a bound for one test.
func shorten[T any](t *testing.T, v *T, to T) {
	old := *v
	*v = to
	t.Cleanup(func() { *v = old })
}

// deafPeer is a server that never reads its input (an os.Pipe, as the
// gateway's, so writes take deadlines) and whose output the test writes.
func deafPeer(t *testing.T) (*conn, *os.File, chan string) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(outR, inW)
	stops := make(chan string, 4)
	c.onStop = func(why string) { stops <- why }
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); outW.Close(); inR.Close(); outR.Close() })
	return c, outW, stops
}

// TestConnStall: a server that stops reading and floods requests holds
// at most the writer's queue; a call's write gives up with its context;
// the conn is stopped WriteTimeout after the writer blocked, saying why.
func TestConnStall(t *testing.T) {
	shorten(t, &WriteTimeout, 500*time.Millisecond)
	shorten(t, &QueueLen, 8)
	c, out, stops := deafPeer(t)
	var handled atomic.Int64
	c.SetRequestHandler(func(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		handled.Add(1)
		return nil, errors.New("unsupported request method: " + r.Method)
	})
	// Fill the pipe (64 KiB) and the queue with answers, then flood. The
	// flood lasts until the conn stops (bounded in count and time): how
	// many answers a fixed number of requests yields depends on the
	// scheduler (answers beyond the queue are dropped), and too few never
	// fill the pipe.
	start := time.Now()
	flooding := make(chan struct{})
	defer close(flooding)
	go func() {
		for i := 0; i < 2_000_000 && time.Since(start) < 10*time.Second; i++ {
			select {
			case <-flooding:
				return
			default:
			}
			if _, err := fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%d,"method":"sampling/createMessage"}`+"\n", i); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	time.Sleep(100 * time.Millisecond)
	_, err := c.call(ctx, "1", []byte(`{"name":"x"}`))
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a call to a server that reads nothing: %v", err)
	}
	select {
	case why := <-stops:
		if !strings.Contains(why, "read none of its input") {
			t.Errorf("stopped because %q", why)
		}
		if c.stopped() != why {
			t.Errorf("stopped() = %q, want %q", c.stopped(), why)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("not stopped %s after it stopped reading", time.Since(start))
	}
	if len(c.q) > QueueLen {
		t.Errorf("%d lines queued", len(c.q))
	}
	if _, err := c.call(context.Background(), "2", []byte(`{}`)); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a call after the stop: %v", err)
	}
}

// TestConnLongLine: a line over MaxLine stops the conn.
func TestConnLongLine(t *testing.T) {
	shorten(t, &MaxLine, 1<<20)
	c, out, stops := deafPeer(t)
	go func() {
		io.WriteString(out, `{"jsonrpc":"2.0","method":"x","params":"`+strings.Repeat("a", 2<<20)+`"}`+"\n")
	}()
	select {
	case why := <-stops:
		if !strings.Contains(why, "over 1 MiB") {
			t.Errorf("stopped because %q", why)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not stopped")
	}
	select {
	case <-c.done:
	default:
		t.Error("still open")
	}
}

// TestConnServedBound: at most MaxServed of the server's requests are
// handled at once, the rest dropped; a ping is answered.
func TestConnServedBound(t *testing.T) {
	c, p := newPeer(t)
	release := make(chan struct{})
	var now, most atomic.Int64
	c.SetRequestHandler(func(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		now.Add(-1)
		return transport.NewJSONRPCResultResponse(r.ID, []byte(`{}`)), nil
	})
	for i := 0; i < 200; i++ {
		p.say(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create"}`, i))
	}
	p.say(t, `{"jsonrpc":"2.0","id":"`+strings.Repeat("i", 300)+`","method":"ping"}`) // too long an id: dropped
	time.Sleep(100 * time.Millisecond)
	if m := most.Load(); m > int64(MaxServed) {
		t.Errorf("%d requests handled at once, want at most %d", m, MaxServed)
	}
	close(release)
	answered := 0
	for answered < MaxServed {
		p.next(t)
		answered++
	}
	select {
	case l := <-p.lines:
		t.Errorf("more answers than MaxServed: %s", l)
	case <-time.After(200 * time.Millisecond):
	}
	p.say(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if m := p.next(t); m["id"] != "p" {
		t.Errorf("a ping afterwards: %v", m)
	}
}

// TestConnPendingBound: beyond MaxPending a request is refused at once.
func TestConnPendingBound(t *testing.T) {
	shorten(t, &MaxPending, 2)
	c, p := newPeer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		go c.call(ctx, fmt.Sprint(i), []byte(`{}`))
		p.next(t)
	}
	if _, err := c.call(ctx, "x", []byte(`{}`)); !errors.Is(err, errBusy) {
		t.Errorf("a third call: %v", err)
	}
}

// TestConnNoteBound: a notification with long params is not decoded.
func TestConnNoteBound(t *testing.T) {
	c, p := newPeer(t)
	notes := make(chan mcp.JSONRPCNotification, 2)
	c.SetNotificationHandler(func(n mcp.JSONRPCNotification) { notes <- n })
	p.say(t, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+strings.Repeat("a", maxNote)+`"}}`)
	p.say(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	if n := <-notes; n.Method != "notifications/tools/list_changed" {
		t.Errorf("got %s first", n.Method)
	}
}

// TestConnLongAnswerNoCopy: an answer to nothing asked, however long, is
// scanned, not copied; a pending call's long answer arrives whole.
func TestConnLongAnswerNoCopy(t *testing.T) {
	c := newConn(strings.NewReader(""), nopCloser{io.Discard})
	line := []byte(`{"jsonrpc":"2.0","id":"nothing","result":{"pad":"` + strings.Repeat("a", 4<<20) + `"}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 4; i++ {
		c.dispatch(line)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Errorf("4 answers to nothing of 4 MiB allocated %d KiB", n>>10)
	}
	ch := make(chan *transport.JSONRPCResponse, 1)
	c.pending[`"nothing"`] = ch
	c.dispatch(line)
	if r := <-ch; len(r.Result) != len(line)-len(`{"jsonrpc":"2.0","id":"nothing","result":}`) {
		t.Errorf("the pending call's result: %d bytes", len(r.Result))
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
