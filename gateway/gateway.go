// Package gateway runs the user's other stdio MCP servers behind evener-mcp
// (docs/gateway.md, "MCP servers behind evener-mcp"): one instance of each configured
// server per session, spawned through the session's launcher under the
// session's policy, spoken to with the MCP library's client over a
// connection of our own on the process's pipes (conn.go: each line decoded
// once, a tool call written and its result returned as bytes), restarted
// with backoff a bounded number of times, killed with the session.
package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Entry is one configured server.
type Entry struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	// Network is host, proxy or off ("" is the session's own).
	Network string
	// Tools, when set, publishes only the tools matching one of these
	// patterns; DenyTools publishes none that match one of its own, and
	// wins (Selected).
	Tools, DenyTools []string
}

// Sep joins a server's name and its tool's: NAME__TOOL.
const Sep = "__"

// Timing of an instance's life; variables so tests may shorten them.
var (
	// InitTimeout bounds a start: the sandbox, initialize and tools/list.
	InitTimeout = 15 * time.Second
	// MaxRestarts bounds the restarts of one server in one session.
	MaxRestarts = 5
	// Backoff is the wait before the first restart; it doubles.
	Backoff = 500 * time.Millisecond
)

// ErrUnavailable wraps every call refused because the server is not up.
var ErrUnavailable = errors.New("MCP server unavailable")

// Server is one running instance of an entry in one session.
type Server struct {
	e   Entry
	l   *confine.Launcher
	log *slog.Logger
	// changed is told when the server's tools change (started, restarted,
	// tools/list_changed, gone).
	changed func()
	// progress forwards a downstream notifications/progress of a call.
	progress func(ctx context.Context, params map[string]any)

	seq atomic.Int64 // the last tools/call id sent (Call)

	lists refresher // tools/list after tools/list_changed (refresh.go)

	mu       sync.Mutex // guards the fields below
	cli      *client.Client
	kill     context.CancelFunc
	exited   chan struct{}
	tools    []mcp.Tool
	failure  string // why it is not up ("" when up or starting)
	ready    chan struct{}
	up       chan struct{} // closed once up, or given up
	upOnce   sync.Once
	restarts int
	closed   bool
	calls    map[string]context.Context // progress token -> the call's ctx
	refused  map[string]bool            // tool names warned about (refuse)
}

// Start starts the entry's server under l; it comes up in the background
// (Ready says when its first start ended, either way). changed is called
// whenever its published tools change; progress forwards a call's progress.
func Start(e Entry, l *confine.Launcher, log *slog.Logger, changed func(), progress func(ctx context.Context, params map[string]any)) *Server {
	s := &Server{e: e, l: l, log: log.With("mcp_server", e.Name), changed: changed, progress: progress,
		ready: make(chan struct{}), calls: map[string]context.Context{}}
	s.up = make(chan struct{})
	go s.start()
	go func() {
		// The first tools/list waits for the server to be up, for a
		// restart after a failed first start (the backoff is short), at
		// most InitTimeout, and no longer once it was given up.
		select {
		case <-s.up:
		case <-time.After(InitTimeout):
		}
		close(s.ready)
	}()
	return s
}

// Name is the entry's name.
func (s *Server) Name() string { return s.e.Name }

// Ready is closed once the server is up, given up, or InitTimeout after
// Start, whichever comes first.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Failure says why the server is not up, "" when it is.
func (s *Server) Failure() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Tools are its tools as published: NAME__TOOL, the description prefixed
// with the server's name, schemas and annotations as the server gave them.
func (s *Server) Tools() []mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]mcp.Tool, 0, len(s.tools))
	for _, t := range s.tools {
		t.Name = s.e.Name + Sep + t.Name
		t.Description = "[" + s.e.Name + "] " + t.Description
		out = append(out, t)
	}
	return out
}

func (s *Server) fail(why string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return // killed with its session: nothing to say
	}
	first := s.failure == ""
	s.failure = why // its tools stay listed: their calls say why they fail
	s.mu.Unlock()
	if first {
		// One warning per outage; the restarts' failures are details.
		s.log.Warn("MCP server unavailable", "reason", why)
	} else {
		s.log.Info("MCP server still unavailable", "reason", why)
	}
}

// start spawns the server, initialises it and lists its tools, within
// InitTimeout; on failure the process is killed and failure set.
func (s *Server) start() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	cli, kill, exited, err := s.spawn()
	if err != nil {
		// Nothing was started (no such command): no restart mends that.
		s.fail(err.Error())
		s.upOnce.Do(func() { close(s.up) })
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		kill()
		<-exited
		return
	}
	s.kill, s.exited = kill, exited // Close kills a server still starting
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), InitTimeout)
	defer cancel()
	tools, err := s.handshake(ctx, cli)
	if err != nil {
		kill()
		_ = cli.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("it did not answer initialize and tools/list within %s", InitTimeout)
		}
		if why := stopped(cli); why != "" {
			err = errors.New("stopped: " + why)
		}
		s.fail(err.Error())
		go s.restart(exited)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		kill()
		_ = cli.Close()
		return
	}
	s.cli, s.tools, s.failure = cli, tools, ""
	s.mu.Unlock()
	s.log.Info("MCP server up", "tools", len(tools))
	go s.watch(cli, exited)
	if s.changed != nil {
		s.changed()
	}
	s.upOnce.Do(func() { close(s.up) })
}

func (s *Server) handshake(ctx context.Context, cli *client.Client) ([]mcp.Tool, error) {
	if err := cli.Start(ctx); err != nil {
		return nil, err
	}
	cli.OnNotification(s.onNotification)
	if _, err := cli.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "evener-mcp", Version: "gateway"},
	}}); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return s.list(ctx, cli)
}

func (s *Server) list(ctx context.Context, cli *client.Client) ([]mcp.Tool, error) {
	res, err := cli.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	var out []mcp.Tool
	for _, t := range res.Tools {
		if err := CheckToolName(s.e.Name, t.Name); err != nil {
			s.refuse(t.Name, err)
			continue
		}
		if !Selected(s.e.Tools, s.e.DenyTools, t.Name) {
			continue
		}
		// The schemas as raw JSON, encoded once: the MCP library would
		// otherwise encode a structured schema again for every call it
		// validates (a tenth of a call's cost here).
		if t.RawInputSchema == nil {
			if raw, err := json.Marshal(t.InputSchema); err == nil {
				t.RawInputSchema, t.InputSchema = raw, mcp.ToolInputSchema{}
			}
		}
		if t.RawOutputSchema == nil && t.OutputSchema.Type != "" {
			if raw, err := json.Marshal(t.OutputSchema); err == nil {
				t.RawOutputSchema, t.OutputSchema = raw, mcp.ToolOutputSchema{}
			}
		}
		if err := cleanTool(&t); err != nil {
			s.refuse(t.Name, err)
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// spawn starts the process under the session's launcher, its stdin and
// stdout pipes to the client, its stderr to the log.
func (s *Server) spawn() (*client.Client, context.CancelFunc, chan struct{}, error) {
	cmd := s.e.Command
	if !filepath.IsAbs(cmd) {
		p, err := exec.LookPath(cmd)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("command %s: %w", cmd, err)
		}
		cmd = p
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	var once sync.Once
	closeChild := func() {
		once.Do(func() {
			inR.Close()
			outW.Close()
			errW.Close()
		})
	}
	ctx, kill := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		res, err := s.l.Run(ctx, confine.Command{
			Args: append([]string{cmd}, s.e.Args...), Env: s.e.Env,
			// The child's ends stay open here until it is gone (with the
			// sandbox off OnStart runs before the start), then closing
			// them gives the client its end of file.
			Stdin: inR, Stdout: outW, Stderr: errW,
			Network: network(s.e.Network),
		})
		closeChild()
		outR.Close()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			s.log.Warn("MCP server did not start", "error", err.Error())
		default:
			s.log.Warn("MCP server exited", "exit_code", res.ExitCode, "signal", res.Signal)
		}
	}()
	go func() {
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			s.log.Info("stderr", "line", strings.ToValidUTF8(sc.Text(), "?"))
		}
		errR.Close()
	}()
	cn := newConn(outR, inW)
	cn.onStop = func(why string) {
		s.log.Info("MCP server stopped", "reason", why)
		kill() // then restarted like one that crashed (watch, start)
	}
	cli := client.NewClient(cn, client.WithLegacyProtocolOnly())
	return cli, kill, exited, nil
}

// network is the launcher's choice for an entry's network: host keeps the
// host's, off none, proxy the session's (its proxies when the session's
// network is on, none when it is off).
func network(n string) confine.Network {
	switch n {
	case "host":
		return confine.NetworkHost
	case "off":
		return confine.NetworkOff
	}
	return ""
}

// watch waits for the process to end, then restarts it (unless closed).
func (s *Server) watch(cli *client.Client, exited chan struct{}) {
	<-exited
	s.mu.Lock()
	if s.closed || s.cli != cli {
		s.mu.Unlock()
		return
	}
	s.cli = nil
	s.mu.Unlock()
	_ = cli.Close()
	why := "it exited"
	if r := stopped(cli); r != "" {
		why = "stopped: " + r
	}
	s.fail(why)
	s.restart(exited)
}

// restart waits for the old process to be gone, then backs off and starts
// again, at most MaxRestarts times per session.
func (s *Server) restart(exited chan struct{}) {
	<-exited
	s.mu.Lock()
	if s.closed || s.restarts >= MaxRestarts {
		if !s.closed {
			s.failure += fmt.Sprintf("; not restarted again (%d restarts)", s.restarts)
			s.log.Warn("MCP server given up", "reason", s.failure)
		}
		s.mu.Unlock()
		s.upOnce.Do(func() { close(s.up) })
		return
	}
	s.restarts++
	wait := Backoff << (s.restarts - 1)
	s.mu.Unlock()
	time.Sleep(wait)
	s.start()
}

func (s *Server) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		s.refreshTools()
	case "notifications/progress":
		tok := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
		s.mu.Lock()
		ctx := s.calls[tok]
		s.mu.Unlock()
		if ctx != nil && s.progress != nil {
			s.progress(ctx, n.Params.AdditionalFields)
		}
	}
}

// Call calls the server's tool (its own name, without the prefix). A
// progress token in req passes through, and so does cancellation (ctx).
// A server that is not up, or that dies during the call, gives an error
// wrapping ErrUnavailable.
//
// The request is written as bytes on the server's connection (conn) and
// the result comes back with its content items as the server wrote them
// (Content): only what the call pipeline reads (isError, _meta) is
// decoded, so a result is not decoded into the library's types and encoded
// again on its way through (docs/gateway.md, "MCP servers behind evener-mcp").
func (s *Server) Call(ctx context.Context, tool string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.mu.Lock()
	cli, failure, exited := s.cli, s.failure, s.exited
	s.mu.Unlock()
	if cli == nil {
		if failure == "" {
			failure = "it is starting"
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrUnavailable, s.e.Name, failure)
	}
	params := callParams{Name: tool, Arguments: req.Params.Arguments}
	if m := req.Params.Meta; m != nil && m.ProgressToken != nil {
		params.Meta = &mcp.Meta{ProgressToken: m.ProgressToken}
		tok := fmt.Sprint(m.ProgressToken)
		s.mu.Lock()
		s.calls[tok] = ctx
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.calls, tok)
			s.mu.Unlock()
		}()
	}
	if raw, ok := params.Arguments.(json.RawMessage); ok && (len(raw) == 0 || string(raw) == "null") {
		params.Arguments = nil
	}
	tr, ok := cli.GetTransport().(*conn)
	if !ok {
		return nil, fmt.Errorf("%w: %s: no connection", ErrUnavailable, s.e.Name)
	}
	enc, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode the call: %w", err)
	}
	// Ids of our own kind ("gw-N"): the library's client numbers its
	// requests (tools/list, ping) from 1 on the same connection.
	id := "gw-" + strconv.FormatInt(s.seq.Add(1), 10)
	resp, err := tr.call(ctx, id, enc)
	if err != nil {
		if ctx.Err() != nil {
			cancelled(tr, mcp.NewRequestId(id), ctx.Err())
		}
		if why := tr.stopped(); why != "" {
			return nil, fmt.Errorf("%w: %s was stopped during the call (%s); it is being restarted", ErrUnavailable, s.e.Name, why)
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("%w: %s exited during the call; it is being restarted", ErrUnavailable, s.e.Name)
		default:
		}
		if errors.Is(err, transport.ErrTransportClosed) {
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, s.e.Name, err)
		}
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	return parseResult(resp.Result)
}

// callParams are a tools/call's params as sent downstream: the arguments
// as the client gave them (raw JSON from the stdio lane, a map otherwise).
type callParams struct {
	Name      string    `json:"name"`
	Arguments any       `json:"arguments,omitempty"`
	Meta      *mcp.Meta `json:"_meta,omitempty"`
}

// cancelled tells the server that the call with id was cancelled, off the
// caller's path and bounded: the caller has its error already, and a
// server that does not read must not hold it up.
func cancelled(tr transport.Interface, id mcp.RequestId, why error) {
	n := mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": why.Error()}},
		},
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tr.SendNotification(ctx, n)
	}()
}

// parseResult reads a downstream tools/call result: its content items are
// kept as written (each must be an object with a known type), structured
// content as raw JSON.
func parseResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	// What passes on as written must be UTF-8, as a client reads JSON:
	// invalid bytes (only ever inside strings, in JSON the decoder
	// accepts) become U+FFFD, as decoding and encoding again made them.
	if !utf8.Valid(raw) {
		raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
	}
	var r struct {
		Meta              *mcp.Meta         `json:"_meta,omitempty"`
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
		IsError           bool              `json:"isError,omitempty"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("tools/call result: %w", err)
	}
	if r.Content == nil {
		return nil, errors.New("tools/call result: content is missing")
	}
	res := &mcp.CallToolResult{Result: mcp.Result{Meta: r.Meta}, IsError: r.IsError}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		res.RawStructuredContent = r.StructuredContent
	}
	res.Content = make([]mcp.Content, len(r.Content))
	for i, c := range r.Content {
		// The type, read without decoding the item (a text may be
		// megabytes); the whole result was checked to be JSON above.
		if len(c) == 0 || c[0] != '{' {
			return nil, fmt.Errorf("tools/call result: content %d is not an object", i)
		}
		if t := memberOf(c, "type"); !contentTypes[t] {
			return nil, fmt.Errorf("tools/call result: content %d: unknown type %q", i, t)
		}
		res.Content[i] = Content{raw: c}
	}
	return res, nil
}

// memberOf is the value of obj's top-level string member key, read up to
// that member; "" when it is absent, not a string, or escaped.
func memberOf(obj []byte, key string) string {
	depth := 0
	want := true // the next string at depth 1 is a member name
	for i := 0; i < len(obj); i++ {
		switch c := obj[i]; c {
		case '{', '[':
			depth++
			want = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			want = depth == 1
		case '"':
			end := i + 1
			for end < len(obj) && obj[end] != '"' {
				if obj[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(obj) {
				return ""
			}
			s := obj[i+1 : end]
			i = end
			if depth != 1 || !want {
				continue
			}
			want = false
			if string(s) != key {
				continue
			}
			// The value: skip the colon and blanks; a plain string only.
			j := i + 1
			for j < len(obj) && (obj[j] == ':' || obj[j] == ' ' || obj[j] == '\t' || obj[j] == '\n' || obj[j] == '\r') {
				j++
			}
			if j >= len(obj) || obj[j] != '"' {
				return ""
			}
			k := bytes.IndexByte(obj[j+1:], '"')
			if k < 0 || bytes.IndexByte(obj[j+1:j+1+k], '\\') >= 0 {
				return ""
			}
			return string(obj[j+1 : j+1+k])
		}
	}
	return ""
}

// contentTypes are the content item types of a tool result (MCP
// specification, 2025-11-25).
var contentTypes = map[string]bool{"text": true, "image": true, "audio": true, "resource_link": true, "resource": true}

// Content is one content item of a downstream result, encoded exactly as
// the server wrote it. It embeds the library's TextContent only to be a
// mcp.Content (whose marker method is unexported); that value is never set
// or read: code that wants the item's fields decodes its JSON.
type Content struct {
	mcp.TextContent
	raw json.RawMessage
}

// MarshalJSON is the item as the server wrote it.
func (c Content) MarshalJSON() ([]byte, error) { return c.raw, nil }

// Close kills the server's process tree and waits for it to be gone.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	cli, kill, exited := s.cli, s.kill, s.exited
	s.cli = nil
	s.mu.Unlock()
	if kill != nil {
		kill()
	}
	if cli != nil {
		_ = cli.Close()
	}
	if exited != nil {
		<-exited
	}
}
