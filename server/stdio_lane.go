package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// lane serves, over stdio, the tools/call requests of the MCP servers
// behind this one (README, "MCP servers behind evener-mcp", speed). Such a
// call does little work of ours, so what the protocol library spends on it
// (five decodes of the request, a queue and two goroutine hand-offs, the
// result decoded and encoded again) was most of what the gateway added to
// a call. The guard, which reads every line anyway, hands such a request
// here; it is decoded once, checked against the tool's input schema, run
// through the one call pipeline (Hub.call: session, roots, hooks, audit,
// metrics, violations, as every call) with the library's session in its
// context, and its result written on the same stdout, after the call's
// notifications. Everything else (our own tools, requests the lane does
// not know every field of, a client on the sessionless revision) goes to
// the library as before. Over HTTP there is no lane.
type lane struct {
	h   *Hub
	out *syncWriter
	// base is the context the library gives its handlers (it holds the
	// stdio session: roots, client capabilities); set before on.
	base context.Context
	// on is set once initialize on a revision with sessions was answered.
	on     atomic.Bool
	schema schemas
	wg     sync.WaitGroup // the calls in flight
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

func newLane(h *Hub, out *syncWriter) *lane {
	return &lane{h: h, out: out, flight: map[string]*laneCall{}, jobs: make(chan laneJob)}
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
	var req laneRequest
	if json.Unmarshal(line, &req) != nil || req.JSONRPC != mcp.JSONRPC_VERSION || req.Method != string(mcp.MethodToolsCall) ||
		req.Params.Task != nil || req.Params.InputResponses != nil || req.Params.RequestState != nil {
		return false
	}
	key, ok := idKey(req.ID)
	if !ok || !l.h.o.gw.has(req.Params.Name) {
		return false
	}
	args := req.Params.Arguments
	if len(args) > 0 && args[0] != '{' {
		if string(args) != "null" {
			return false // the library answers what is not an object
		}
		args = nil
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
	id, name := j.id, j.name
	res, err := l.run(j.ctx, name, j.args, j.meta)
	l.mu.Lock()
	c := l.flight[j.key]
	delete(l.flight, j.key)
	l.mu.Unlock()
	c.cancel()
	if c.told {
		return // a cancelled request gets no response (MCP specification)
	}
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	if err == nil {
		b.WriteString(`,"result":`)
		if err = encodeResult(&b, res); err != nil {
			b.Reset()
			b.WriteString(`{"jsonrpc":"2.0","id":`)
			b.Write(id)
		}
	}
	if err != nil {
		enc, _ := json.Marshal(mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, err.Error(), nil))
		b.WriteString(`,"error":`)
		b.Write(enc)
	}
	b.WriteString("}\n")
	if _, err := l.out.Write(b.Bytes()); err != nil {
		l.h.o.logger().Error("write tool result", "tool", name, "error", err.Error())
	}
}

// encodeResult writes res as the library would to a client on a revision
// with sessions (_meta, content, structuredContent, isError), but passes
// the downstream's own content items (gateway.Content) as they are.
func encodeResult(b *bytes.Buffer, res *mcp.CallToolResult) error {
	if res == nil {
		return errors.New("the tool returned no result")
	}
	b.WriteString(`{"content":[`)
	for i, c := range res.Content {
		if i > 0 {
			b.WriteByte(',')
		}
		item, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode content %d: %w", i, err)
		}
		b.Write(item)
	}
	b.WriteByte(']')
	if res.Meta != nil {
		m, err := json.Marshal(res.Meta)
		if err != nil {
			return fmt.Errorf("encode _meta: %w", err)
		}
		b.WriteString(`,"_meta":`)
		b.Write(m)
	}
	switch {
	case len(res.RawStructuredContent) > 0:
		b.WriteString(`,"structuredContent":`)
		b.Write(res.RawStructuredContent)
	case res.StructuredContent != nil:
		sc, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return fmt.Errorf("encode structuredContent: %w", err)
		}
		b.WriteString(`,"structuredContent":`)
		b.Write(sc)
	}
	if res.IsError {
		b.WriteString(`,"isError":true`)
	}
	b.WriteByte('}')
	return nil
}

// run is the call: the arguments checked against the tool's input schema
// (as the library checks them on its path), then the one call pipeline.
// A panic is an error, as the library's recovery makes it.
func (l *lane) run(ctx context.Context, name string, args json.RawMessage, meta *mcp.Meta) (res *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", name, r)
		}
	}()
	if t := l.h.srv.GetTool(name); t != nil {
		if err := l.schema.check(name, t.Tool, args); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
	}
	req := mcp.CallToolRequest{}
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = name
	if args != nil {
		req.Params.Arguments, req.Params.RawArguments = args, args
	}
	req.Params.Meta = meta
	return l.h.call(gatewayFacts(name))(ctx, req)
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

// schemas are the compiled input schemas of the gateway's tools, checked
// on the lane as the library checks them on its own path.
type schemas struct {
	mu sync.Mutex // guards m
	m  map[string]compiled
}

// compiled is one tool's schema; s is nil when it has none, or one that
// does not compile (the library then checks nothing either).
type compiled struct {
	src []byte
	s   *jsonschema.Schema
}

func (c *schemas) check(name string, t mcp.Tool, args json.RawMessage) error {
	src := t.RawInputSchema
	if len(src) == 0 {
		return nil
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]compiled{}
	}
	e, ok := c.m[name]
	if !ok || !bytes.Equal(e.src, src) {
		e = compiled{src: src, s: compileSchema(name, src)}
		c.m[name] = e
	}
	c.mu.Unlock()
	if e.s == nil {
		return nil
	}
	var v any = map[string]any{}
	if len(args) > 0 {
		var err error
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(args)); err != nil {
			return fmt.Errorf("invalid arguments: %w", err)
		}
	}
	if err := e.s.Validate(v); err != nil {
		return fmt.Errorf("input schema validation failed: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
	return nil
}

func compileSchema(name string, src []byte) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		return nil
	}
	loc := "mem:///evener-mcp/tools/" + url.PathEscape(name) + "/input-schema.json"
	c := jsonschema.NewCompiler()
	if c.AddResource(loc, doc) != nil {
		return nil
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil
	}
	return s
}
