package server

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
)

// lane is the stdio transport's path for the tools/call requests of the
// MCP servers behind this one (docs/gateway.md, "MCP servers behind evener-mcp",
// speed). Such a call does little work of ours, so what the protocol
// library spends on it (five decodes of the request, a queue and two
// goroutine hand-offs) was most of what the gateway added to a call. The
// transport offers the lane every line the guard passed; the lane takes a
// tools/call of a gateway tool, decodes it once and runs it through the
// one call pipeline (Hub.call: arguments against the schema, session,
// roots, hooks, audit, metrics, violations, panics, as every call) with the
// library's session in its context, and writes the response as the library
// would (its types, its encoding) on the same stdout, after the call's
// notifications. What it keeps of its own is what the library cannot
// share: the calls in flight, so that a notifications/cancelled naming one
// cancels it. Everything else (our own tools, requests the lane does not
// know every field of, a client on the sessionless revision) goes to the
// library. Over HTTP the lane is http_lane.go.
type lane struct {
	t *stdioTransport
	// base is the context the library gives its handlers (it holds the
	// stdio session: roots, client capabilities); set before on.
	base context.Context
	// on is set once initialize on a revision with sessions was answered.
	on atomic.Bool
	wg sync.WaitGroup // the calls in flight
	// jobs hands a call to an idle worker. Workers are kept (at most
	// maxIdleWorkers idle): a new goroutine's stack grew through the JSON
	// decoder on every call, an eighth of the lane's time.
	jobs chan laneJob
	idle atomic.Int32

	mu sync.Mutex // guards flight and stopped, and orders them with jobs' close
	// flight are the calls in flight, by the request id's JSON.
	flight  map[string]*laneCall
	stopped bool
}

// maxIdleWorkers bounds the lane's idle goroutines.
const maxIdleWorkers = 8

// laneJob is one call handed to a worker.
type laneJob struct {
	ctx  context.Context
	key  string
	id   json.RawMessage
	name string
	args json.RawMessage
	meta *mcp.Meta
}

// laneCall is one call in flight.
type laneCall struct {
	cancel context.CancelFunc
	told   bool // the client cancelled it: no response is written
}

func newLane(t *stdioTransport) *lane {
	return &lane{t: t, flight: map[string]*laneCall{}, jobs: make(chan laneJob)}
}

// laneRequest is a tools/call as the lane reads it. The members the
// library knows and the lane does not serve (a task-augmented call, the
// answers of a multi-round-trip call) send the request to the library.
type laneRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		Meta           *mcp.Meta       `json:"_meta"`
		Task           json.RawMessage `json:"task"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	} `json:"params"`
}

// decodeLaneCall decodes msg as a tools/call of a gateway tool the hub serves
// that a lane (stdio's or HTTP's) can answer in full: no task or
// multi-round-trip state, a plain id (its key), arguments an object or
// absent. ok is false for anything the library must answer.
func decodeLaneCall(msg []byte, gw *gatewayHub) (req laneRequest, key string, args json.RawMessage, ok bool) {
	if json.Unmarshal(msg, &req) != nil || req.JSONRPC != mcp.JSONRPC_VERSION || req.Method != string(mcp.MethodToolsCall) ||
		req.Params.Task != nil || req.Params.InputResponses != nil || req.Params.RequestState != nil {
		return req, "", nil, false
	}
	key, ok = idKey(req.ID)
	if !ok || !gw.has(req.Params.Name) {
		return req, "", nil, false
	}
	args = req.Params.Arguments
	if len(args) > 0 && args[0] != '{' {
		if string(args) != "null" {
			return req, "", nil, false // the library answers what is not an object
		}
		args = nil
	}
	return req, key, args, true
}

// take serves line if it is a tools/call of a gateway tool the lane can
// serve, and says whether it did. The guard has checked the line already
// (size, UTF-8, nesting, duplicate keys).
func (l *lane) take(line []byte) bool {
	if l == nil || !l.on.Load() {
		return false
	}
	switch m := topLevel(line, "method"); {
	case bytes.Equal(m, []byte(`"tools/call"`)):
	case bytes.Equal(m, []byte(`"notifications/cancelled"`)):
		return l.cancelled(line)
	default:
		return false
	}
	req, key, args, ok := decodeLaneCall(line, l.t.h.gw)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(l.base)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.flight[key] != nil {
		cancel()
		return false // an id already in flight: the library's to answer
	}
	l.flight[key] = &laneCall{cancel: cancel}
	l.wg.Add(1)
	j := laneJob{ctx: ctx, key: key, id: req.ID, name: req.Params.Name, args: args, meta: req.Params.Meta}
	select {
	case l.jobs <- j:
	default:
		go l.worker(j)
	}
	return true
}

// worker serves j, then waits for more while fewer than maxIdleWorkers
// others wait.
func (l *lane) worker(j laneJob) {
	for {
		l.serve(j)
		if l.idle.Add(1) > maxIdleWorkers {
			l.idle.Add(-1)
			return
		}
		next, ok := <-l.jobs
		l.idle.Add(-1)
		if !ok {
			return
		}
		j = next
	}
}

// idKey is a request id's key in flight: the id's JSON when it is an
// integer or a string without escapes; any other id (a fraction, an
// escaped string) is left to the library.
func idKey(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || len(raw) > 64 {
		return "", false
	}
	if raw[0] == '"' {
		if len(raw) < 2 || raw[len(raw)-1] != '"' || bytes.IndexByte(raw[1:len(raw)-1], '\\') >= 0 {
			return "", false
		}
		return string(raw), true
	}
	for i, c := range raw {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0 && len(raw) > 1) {
			return "", false
		}
	}
	return string(raw), true
}

// serve runs one call and writes its response.
func (l *lane) serve(j laneJob) {
	defer l.wg.Done()
	req := mcp.CallToolRequest{}
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = j.name
	if j.args != nil {
		req.Params.Arguments, req.Params.RawArguments = j.args, j.args
	}
	req.Params.Meta = j.meta
	res, err := l.t.h.call(gatewayFacts(j.name))(j.ctx, req)
	l.mu.Lock()
	c := l.flight[j.key]
	delete(l.flight, j.key)
	l.mu.Unlock()
	c.cancel()
	if c.told {
		return // a cancelled request gets no response (MCP specification)
	}
	b, err := response(j.id, res, err)
	if err != nil {
		l.t.h.o.logger().Error("encode tool result", "tool", j.name, "error", err.Error())
		return
	}
	if _, err := l.t.out.Write(b); err != nil {
		l.t.h.o.logger().Error("write tool result", "tool", j.name, "error", err.Error())
	}
}

// response is the line answering request id with res or err, encoded as
// the library encodes its own (mcp-go's response types, json.Marshal, a
// newline), so that a call reads the same byte for byte whichever path
// served it.
func response(id json.RawMessage, res *mcp.CallToolResult, callErr error) ([]byte, error) {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return nil, err
	}
	var msg mcp.JSONRPCMessage
	if callErr != nil {
		msg = mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(v),
			Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, callErr.Error(), nil)}
	} else {
		msg = mcp.NewJSONRPCResultResponse(mcp.NewRequestId(v), *res)
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// cancelled cancels the lane's call a notifications/cancelled names, and
// says whether it named one.
func (l *lane) cancelled(line []byte) bool {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return false
	}
	key, ok := idKey(n.Params.RequestID)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.flight[key]
	if c == nil {
		return false
	}
	c.told = true
	c.cancel()
	return true
}

// stop cancels the calls in flight (stdin ended) and waits for them, as
// the library does with its own, then ends the idle workers.
func (l *lane) stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.stopped = true
	for _, c := range l.flight {
		c.cancel()
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	close(l.jobs)
	l.mu.Unlock()
}
