package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// peer is the server end of a conn: what the conn writes, line by line,
// and a writer for what the server says.
type peer struct {
	lines chan string
	out   *io.PipeWriter
}

func newPeer(t *testing.T) (*conn, *peer) {
	t.Helper()
	inR, inW := io.Pipe()   // conn -> server
	outR, outW := io.Pipe() // server -> conn
	c := newConn(outR, inW)
	p := &peer{lines: make(chan string, 16), out: outW}
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); outW.Close() })
	return c, p
}

func (p *peer) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case l := <-p.lines:
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("conn wrote %q: %v", l, err)
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("conn wrote nothing")
	}
	return nil
}

func (p *peer) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// TestConn: responses reach their callers in any order and by id as sent
// (1 and "1" differ), notifications and the server's requests reach their
// handlers, a request without a handler is refused, a long line is read,
// and a closed or cancelled call ends.
func TestConn(t *testing.T) {
	c, p := newPeer(t)
	notes := make(chan string, 4)
	c.SetNotificationHandler(func(n mcp.JSONRPCNotification) { notes <- n.Method })

	type got struct {
		r   *transport.JSONRPCResponse
		err error
	}
	a, b := make(chan got, 1), make(chan got, 1)
	go func() {
		r, err := c.SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "tools/list"})
		a <- got{r, err}
	}()
	if m := p.next(t); m["method"] != "tools/list" || m["id"] != 1.0 {
		t.Fatalf("request written as %v", m)
	}
	go func() {
		r, err := c.call(context.Background(), "1", []byte(`{"name":"x","arguments":{"a":1}}`))
		b <- got{r, err}
	}()
	if m := p.next(t); m["method"] != "tools/call" || m["id"] != "1" || m["params"].(map[string]any)["name"] != "x" {
		t.Fatalf("call written as %v", m)
	}
	long := strings.Repeat("x", 200<<10)
	p.say(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	p.say(t, `{"jsonrpc":"2.0","id":"1","result":{"content":[{"type":"text","text":"`+long+`"}]}}`)
	p.say(t, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	if r := <-b; r.err != nil || !strings.Contains(string(r.r.Result), long) {
		t.Errorf("the call's response: %v", r.err)
	}
	if r := <-a; r.err != nil || string(r.r.Result) != `{"tools":[]}` {
		t.Errorf("the request's response: %+v %v", r.r, r.err)
	}
	if n := <-notes; n != "notifications/tools/list_changed" {
		t.Errorf("notification %q", n)
	}

	// The server's request: refused without a handler, answered with one.
	p.say(t, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	if m := p.next(t); m["id"] != 7.0 || m["error"] == nil {
		t.Errorf("a request without a handler: %v", m)
	}
	c.SetRequestHandler(func(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		return transport.NewJSONRPCResultResponse(r.ID, json.RawMessage(`{}`)), nil
	})
	p.say(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	if m := p.next(t); m["id"] != "p" || m["result"] == nil {
		t.Errorf("a ping with a handler: %v", m)
	}

	// A cancelled call ends with its context's error.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { p.next(t); cancel() }()
	if _, err := c.call(ctx, "2", []byte(`{"name":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v", err)
	}

	// The server's output ends: a waiting call ends, a new one is refused.
	w := make(chan error, 1)
	go func() {
		_, err := c.call(context.Background(), "3", []byte(`{"name":"x"}`))
		w <- err
	}()
	p.next(t)
	p.out.Close()
	if err := <-w; !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a call when the output ended: %v", err)
	}
	if _, err := c.call(context.Background(), "4", []byte(`{}`)); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a call after the output ended: %v", err)
	}
}

// TestConnIDKey: an id as sent and as echoed share a key; a number and a
// string never do.
func TestConnIDKey(t *testing.T) {
	same := [][2]string{{`1`, ` 1`}, {`"gw-1"`, `"gw\u002d1"`}, {`10`, `1e1`}}
	for _, p := range same {
		if idKey(json.RawMessage(p[0])) != idKey(json.RawMessage(p[1])) {
			t.Errorf("%s and %s differ", p[0], p[1])
		}
	}
	if idKey(json.RawMessage(`1`)) == idKey(json.RawMessage(`"1"`)) {
		t.Errorf("1 and \"1\" share a key")
	}
}
