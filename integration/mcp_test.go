//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// mcpConn is a real MCP client connected to the built server over stdio,
// started the way an agent host starts it, as the fixture's identity.
type mcpConn struct {
	c        *client.Client
	cmd      *exec.Cmd // the server, over stdio (nil over HTTP)
	init     *mcp.InitializeResult
	stderr   *lockedBuffer
	mu       sync.Mutex // guards progress
	progress []string
}

// mcp starts the server with flags (in the worktree) and initialises it.
func (e *env) mcp(t *testing.T, flags ...string) *mcpConn {
	t.Helper()
	return e.mcpWith(t, nil, nil, flags...)
}

// mcpWith is mcp with client options and client capabilities (a client
// with options speaks the session-keeping revision: roots and elicitation
// are server-initiated requests there).
func (e *env) mcpWith(t *testing.T, copts []client.ClientOption, caps *mcp.ClientCapabilities, flags ...string) *mcpConn {
	t.Helper()
	e.chown(t)
	m := &mcpConn{stderr: &lockedBuffer{}}
	cmdFunc := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		if len(e.prefix) > 0 {
			cmd = exec.CommandContext(ctx, e.prefix[0], append(append(e.prefix[1:len(e.prefix):len(e.prefix)], command), args...)...)
		}
		cmd.Env = e.serverEnv(t)
		cmd.Dir = e.work
		if !e.id.root && os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid)}}
		}
		m.cmd = cmd
		return cmd, nil
	}
	tr := transport.NewStdioWithOptions(binPath, nil, flags,
		transport.WithCommandFunc(cmdFunc), transport.WithCommandStderrWriter(m.stderr))
	if err := tr.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	if copts != nil {
		copts = append(copts, client.WithLegacyProtocolOnly())
	}
	c := client.NewClient(tr, copts...)
	t.Cleanup(func() { c.Close() })
	c.OnNotification(m.recordProgress)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The constructor starts the transport only; Start wires notifications.
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start client: %v", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "evener-integration", Version: "1"}
	if caps != nil {
		req.Params.Capabilities = *caps
	}
	var err error
	m.init, err = c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, m.stderr.String())
	}
	m.c = c
	return m
}

// recordProgress keeps the message of every progress notification.
func (m *mcpConn) recordProgress(n mcp.JSONRPCNotification) {
	if n.Method == "notifications/progress" {
		if msg, ok := n.Params.AdditionalFields["message"].(string); ok {
			m.mu.Lock()
			m.progress = append(m.progress, msg)
			m.mu.Unlock()
		}
	}
}

// call invokes a tool and returns its result (tool errors included).
func (m *mcpConn) call(t *testing.T, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	if tool == "shell" {
		req.Params.Meta = &mcp.Meta{ProgressToken: "p-1"}
	}
	res, err := m.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s %v: protocol error: %v\nstderr:\n%s", tool, args, err, m.stderr.String())
	}
	return res
}

// text is the concatenated text content of a result.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structured content.
func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// denial decodes the typed denial a result carries in
// _meta["evener-mcp/denial"] (nil when none).
func denial(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if r.Meta == nil {
		return nil
	}
	b, err := json.Marshal(r.Meta.AdditionalFields["evener-mcp/denial"])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// denied reports whether r is a typed denial with the given rule. A denial
// never carries structured content: strict clients validate it against the
// tool's output schema, which describes a success.
func denied(t *testing.T, r *mcp.CallToolResult, rule string) bool {
	t.Helper()
	s := denial(t, r)
	if r.IsError && s != nil && r.StructuredContent != nil {
		t.Errorf("a denial carries structured content, which strict clients reject: %v", r.StructuredContent)
	}
	return r.IsError && s["denied"] == true && (rule == "" || s["rule"] == rule)
}

func syscallMkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// preamble reads the session's preamble resource.
func (m *mcpConn) preamble(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "evener://sandbox/preamble"
	res, err := m.c.ReadResource(ctx, rr)
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("preamble resource: %v %v", err, res)
	}
	tc, _ := res.Contents[0].(mcp.TextResourceContents)
	return tc.Text
}
