//go:build linux

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// TestIDKey: integers and plain strings are the lane's; anything the
// library reads differently (a fraction, an exponent, an escape) is not.
func TestIDKey(t *testing.T) {
	for in, want := range map[string]bool{
		`7`: true, `-8`: true, `0`: true, `"seven"`: true, `""`: true,
		`7.0`: false, `1e3`: false, `"a\"b"`: false, `"\u0041"`: false, `-`: false, `null`: false,
		`true`: false, `{}`: false, ``: false, `"unterminated`: false, `--1`: false, `1-`: false,
	} {
		if _, ok := idKey(json.RawMessage(in)); ok != want {
			t.Errorf("idKey(%s) = %v, want %v", in, ok, want)
		}
	}
	a, _ := idKey(json.RawMessage(`7`))
	b, _ := idKey(json.RawMessage(`"7"`))
	if a == b {
		t.Errorf("7 and \"7\" share a key")
	}
}

// TestLaneMatchesLibrary: a gateway tool's call reads the same, byte for
// byte, whether the stdio lane served it or the protocol library did: a
// result with every member, arguments the input schema refuses, a panic,
// a handler error and a missing result. Each has one owner (call.go, and
// the library's encoding), whichever path the call took.
func TestLaneMatchesLibrary(t *testing.T) {
	o := testOptions(t, confine.ModeWorkspaceWrite)
	calls := []string{
		`{"mode":"ok"}`,
		`{"mode":5}`,
		`{"mode":"ok","extra":true}`,
		`{"mode":"panic"}`,
		`{"mode":"err"}`,
		`{"mode":"nil"}`,
	}
	var paths [2][]string
	for i, onLane := range []bool{false, true} {
		paths[i] = laneRun(t, o, onLane, calls)
	}
	for i := range calls {
		if paths[0][i] != paths[1][i] {
			t.Errorf("call %s:\n library %s\n lane    %s", calls[i], paths[0][i], paths[1][i])
		}
	}
}

// laneRun serves calls of a downstream tool fake__echo over a stdio
// server whose lane is on or off, and returns each call's response line.
func laneRun(t *testing.T, o Options, onLane bool, calls []string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr := newStdioTransport(o, inR, outW)
	h, err := newHub(ctx, o, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.closeAll()
	def := mcp.Tool{Name: "fake__echo", RawInputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"],"additionalProperties":false}`)}
	handler := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Mode string }
		_ = req.BindArguments(&args) // the lane's arguments stay raw JSON, as a downstream call reads them
		switch args.Mode {
		case "panic":
			panic("downstream went wrong")
		case "err":
			return nil, errors.New("downstream failed")
		case "nil":
			return nil, nil
		}
		res := mcp.NewToolResultStructured(map[string]any{"z": 1, "a": []any{"b", 2.5}}, "text <&> \u2028")
		res.IsError = true
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"k": "v"}}
		return res, nil
	}
	s := h.lookup(ctx)
	s.mu.Lock()
	s.handlers[def.Name] = tools.Tool{ServerTool: mcpserver.ServerTool{Tool: def, Handler: handler}, Facts: gatewayFacts(def.Name)}
	s.defs[def.Name] = def
	s.mu.Unlock()
	h.gw.register([]mcp.Tool{def})
	done := make(chan error, 1)
	go func() { done <- tr.serve(ctx) }()
	// Every line the server writes, read as it comes (a pipe nobody reads
	// would stop the server's writes).
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	defer func() {
		inW.Close()
		<-done
		outW.Close()
		for range lines {
		}
	}()
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id string) string {
		timeout := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("no answer to %s", id)
				}
				if strings.Contains(l, `"id":`+id+`,`) || strings.Contains(l, `"id":`+id+`}`) {
					return l
				}
			case <-timeout:
				t.Fatalf("no answer to %s within a minute", id)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer("0")
	if !tr.lane.on.Load() {
		t.Fatal("the lane did not open after initialize")
	}
	tr.lane.on.Store(onLane)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var out []string
	for i, args := range calls {
		id := fmt.Sprint(i + 1)
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fake__echo","arguments":` + args + `}}`)
		out = append(out, answer(id))
	}
	return out
}
