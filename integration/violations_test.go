//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

const violationsURI = "evener://session/violations"

// violationWatch follows one client's notifications/resources/updated.
type violationWatch struct {
	m       *mcpConn
	updates chan string
	// inCall is set while a call runs; early counts the updates that
	// arrived before its result (told ahead of the result, docs/observability.md,
	// "Violations").
	inCall atomic.Bool
	early  atomic.Int64
}

func watchViolations(m *mcpConn) *violationWatch {
	w := &violationWatch{m: m, updates: make(chan string, 64)}
	m.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/resources/updated" {
			uri, _ := n.Params.AdditionalFields["uri"].(string)
			if w.inCall.Load() {
				w.early.Add(1)
			}
			select {
			case w.updates <- uri:
			default:
			}
		}
	})
	return w
}

type violationEntry struct {
	Action string `json:"action"`
	Target string `json:"target"`
	Raw    string `json:"raw"`
	Time   string `json:"time"`
	Tool   string `json:"tool"`
}

// call is m.call, counting the updates that arrive before its result.
func (w *violationWatch) call(t *testing.T, tool string, args map[string]any) (*mcp.CallToolResult, bool) {
	t.Helper()
	before := w.early.Load()
	w.inCall.Store(true)
	r := w.m.call(t, tool, args)
	w.inCall.Store(false)
	return r, w.early.Load() > before
}

// read reads the resource and returns its text and violations.
func (w *violationWatch) read(t *testing.T) (string, []violationEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = violationsURI
	res, err := w.m.c.ReadResource(ctx, req)
	if err != nil {
		t.Fatalf("resources/read: %v\nstderr:\n%s", err, w.m.stderr.String())
	}
	if len(res.Contents) != 1 {
		t.Fatalf("resources/read: %d contents", len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok || tc.MIMEType != "application/json" || tc.URI != violationsURI {
		t.Fatalf("resources/read: %#v", res.Contents[0])
	}
	var doc struct {
		Violations []violationEntry `json:"violations"`
	}
	if err := json.Unmarshal([]byte(tc.Text), &doc); err != nil || doc.Violations == nil {
		t.Fatalf("resource is not {\"violations\": [...]}: %v\n%s", err, tc.Text)
	}
	return tc.Text, doc.Violations
}

// updated waits (bounded) for an update of the resource.
func (w *violationWatch) updated(d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case uri := <-w.updates:
			if uri == violationsURI {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

func (w *violationWatch) drain() {
	for {
		select {
		case <-w.updates:
		default:
			return
		}
	}
}

func subscribe(t *testing.T, m *mcpConn, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	if on {
		req := mcp.SubscribeRequest{}
		req.Params.URI = violationsURI
		err = m.c.Subscribe(ctx, req)
	} else {
		req := mcp.UnsubscribeRequest{}
		req.Params.URI = violationsURI
		err = m.c.Unsubscribe(ctx, req)
	}
	if err != nil {
		t.Fatalf("subscribe %v: %v", on, err)
	}
}

func findViolation(vs []violationEntry, action, target string) *violationEntry {
	for i := range vs {
		if vs[i].Action == action && vs[i].Target == target {
			return &vs[i]
		}
	}
	return nil
}

// checkViolations drives one subscribed client through a proxy refusal
// and a file denial, each told by an update, and an unsubscribe.
func checkViolations(t *testing.T, e *env, m *mcpConn, tag string) {
	t.Helper()
	if caps := m.init.Capabilities.Resources; caps == nil || !caps.Subscribe {
		t.Fatalf("initialize does not advertise resources.subscribe: %+v", m.init.Capabilities)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := m.c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	listed := false
	for _, r := range list.Resources {
		listed = listed || (r.URI == violationsURI && r.MIMEType == "application/json")
	}
	if !listed {
		t.Fatalf("resources/list lacks %s: %+v", violationsURI, list.Resources)
	}
	w := watchViolations(m)
	if _, vs := w.read(t); len(vs) != 0 {
		t.Fatalf("a fresh session has violations: %+v", vs)
	}
	subscribe(t, m, true)

	// A proxy refusal: other.test is pinned to loopback, not allowed.
	host := "other.test:" + fmt.Sprint(9) // discard port: nothing is dialled, the name is refused
	r, early := w.call(t, "shell", map[string]any{"command": "curl -s -m 5 -o /dev/null http://" + host + "/" + tag + "; true"})
	if r.IsError {
		t.Fatalf("shell: %s", text(r))
	}
	if !early {
		t.Errorf("the update did not arrive before the shell call's result")
	}
	if !w.updated(10 * time.Second) {
		t.Fatalf("no notifications/resources/updated after a proxy refusal\nstderr:\n%s", m.stderr.String())
	}
	_, vs := w.read(t)
	if v := findViolation(vs, "network-outbound", host); v == nil || v.Time == "" {
		t.Fatalf("proxy refusal not in the resource: %+v", vs)
	}

	// A file denial: a planted key, read by the file tool.
	w.drain()
	r, early = w.call(t, "read_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")})
	if !denied(t, r, "denylist") {
		t.Fatalf("read_file of the key was not denied: %s", text(r))
	}
	if !early {
		t.Errorf("the update did not arrive before the read_file call's result")
	}
	if !w.updated(10 * time.Second) {
		t.Fatalf("no notifications/resources/updated after a file denial")
	}
	raw, vs := w.read(t)
	v := findViolation(vs, "file-read", "id_rsa")
	if v == nil || v.Tool != "read_file" {
		t.Fatalf("file denial not in the resource (action file-read, target id_rsa, tool read_file): %+v", vs)
	}
	if vs[len(vs)-1] != *v {
		t.Errorf("newest is not last: %+v", vs)
	}
	if strings.Contains(raw, e.home) || strings.Contains(raw, e.root) {
		t.Errorf("the resource names a host path:\n%s", raw)
	}

	// A kernel refusal the shell attributes from the command's output: the
	// host path is named by its base name.
	w.drain()
	if r, _ = w.call(t, "shell", map[string]any{"command": "touch /usr/evener-probe-" + tag + " 2>&1; true"}); r.IsError {
		t.Fatalf("shell: %s", text(r))
	}
	if !w.updated(10 * time.Second) {
		t.Fatalf("no notifications/resources/updated after a kernel refusal")
	}
	raw, vs = w.read(t)
	if v := findViolation(vs, "file-write", "evener-probe-"+tag); v == nil || v.Tool != "shell" || strings.Contains(v.Raw, "/usr") {
		t.Fatalf("kernel refusal not in the resource (file-write, base name, tool shell): %s", raw)
	}

	// Unsubscribed: still recorded, no longer told.
	subscribe(t, m, false)
	w.drain()
	m.call(t, "read_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")})
	if w.updated(time.Second) {
		t.Errorf("an update after unsubscribe")
	}
	if _, after := w.read(t); len(after) != len(vs)+1 {
		t.Errorf("the denial after unsubscribe was not recorded: %d then %d", len(vs), len(after))
	}
}

func violationsFixture(t *testing.T, e *env) string {
	t.Helper()
	cfg := egressFixture(t, e)
	writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "SECRET-KEY\n")
	return cfg
}

// TestViolationsResourceStdio: over stdio, the session's violations
// resource is listed, read and subscribed to; a proxy refusal and a file
// denial each send notifications/resources/updated and appear in it.
func TestViolationsResourceStdio(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := violationsFixture(t, e)
		// The legacy revision: resources/subscribe is a request there.
		m := e.mcpWith(t, []client.ClientOption{}, nil, "--sandbox", "workspace-write", "--sandbox-net", "on", "--config", cfg)
		checkViolations(t, e, m, "stdio")
		// The audit log keeps both kinds, as before.
		b, err := os.ReadFile(filepath.Join(e.home, ".local", "state", "evener-mcp", "audit.jsonl"))
		if err != nil || !strings.Contains(string(b), `"tool":"egress"`) || !strings.Contains(string(b), `"tool":"read_file","mode":"workspace-write","decision":"denied"`) {
			t.Errorf("audit log lacks the refusals: %v\n%s", err, b)
		}
	})
}

// TestViolationsResourceHTTP: over Streamable HTTP each session sees and
// is told of its own violations only, with and without a GET stream.
func TestViolationsResourceHTTP(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		cfg := violationsFixture(t, e)
		s := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "on", "--config", cfg)
		a := s.mustConnect(t, clientOpts{listen: true})
		b := s.mustConnect(t, clientOpts{})
		wa := watchViolations(a)
		subscribe(t, a, true)
		checkViolations(t, e, b, "http-b")
		if wa.updated(time.Second) {
			t.Errorf("session A was told of session B's violations")
		}
		if _, vs := wa.read(t); len(vs) != 0 {
			t.Errorf("session A sees session B's violations: %+v", vs)
		}
		wa.drain()
		checkViolations(t, e, a, "http-a")
	})
}
