//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// strictServer is a stdio MCP server whose one tool declares a closed
// output schema (no member beyond "greeted") and returns structured
// content, as servers built on the TypeScript SDK with zod do.
const strictServer = `"use strict";
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (l) => {
  const m = JSON.parse(l);
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "strict", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ jsonrpc: "2.0", id: m.id, result: { tools: [{ name: "greet", description: "greets", inputSchema: { type: "object" },
      outputSchema: { type: "object", properties: { greeted: { type: "string" } }, required: ["greeted"], additionalProperties: false } }] } });
  } else if (m.method === "tools/call") {
    send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "{\"greeted\":\"you\"}" }], structuredContent: { greeted: "you" } } });
  } else if (m.id !== undefined) {
    send({ jsonrpc: "2.0", id: m.id, result: {} });
  }
});
`

// validOutput checks sc against the output schema tool publishes, as a
// strict client (the TypeScript SDK's) does.
func validOutput(t *testing.T, m *mcpConn, tool string, sc any) error {
	t.Helper()
	ctx, cancel := testCtx()
	defer cancel()
	list, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Tools, func(tl mcp.Tool) bool { return tl.Name == tool })
	if i < 0 {
		t.Fatalf("%s is not listed", tool)
	}
	raw := list.Tools[i].RawOutputSchema
	if raw == nil {
		raw, _ = json.Marshal(list.Tools[i].OutputSchema)
	}
	if !bytes.Contains(raw, []byte(`"hook_context"`)) {
		t.Errorf("%s's output schema does not declare hook_context: %s", tool, raw)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("out.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("out.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sc)
	v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return s.Validate(v)
}

// TestHookContextStructured: what the user's PreToolUse and PostToolUse
// hooks add to a call is in the result's structuredContent (hook_context),
// which some clients hand the model alone, as well as in a text block;
// the output schema declares it, ours and a downstream server's closed
// one alike, so the result still validates; a refusal keeps its text only.
func TestHookContextStructured(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.work, "hello.txt"), "hello\n")
		dir := filepath.Join(e.root, "hooks")
		pre := hookScript(t, dir, "pre-context", `echo '{"additionalContext":"pre-context-31"}'`)
		post := hookScript(t, dir, "post-context", `echo '{"additionalContext":"post-context-32"}'`)
		cfg := hookConfig(t, e, "hooks",
			hookDef{event: "PreToolUse", matcher: "read_file|strict__greet", command: pre},
			hookDef{event: "PostToolUse", matcher: "read_file|strict__greet", command: post})
		down := e.mcpConfig(t, map[string]any{"strict": map[string]any{"command": "node", "args": []string{e.script(t, "strict.cjs", strictServer)}}})
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg, "--mcp-config", down)
		want := []any{"pre-context-31", "post-context-32"}

		r := m.call(t, "read_file", map[string]any{"path": "hello.txt"})
		sc := structured(t, r)
		if r.IsError || sc["content"] != "hello\n" {
			t.Fatalf("read_file: %v %s", sc, text(r))
		}
		if got, _ := sc["hook_context"].([]any); !slices.Equal(got, want) {
			t.Errorf("read_file: structuredContent hook_context %v, want %v (structuredContent: %v)", sc["hook_context"], want, sc)
		}
		if tx := text(r); !strings.Contains(tx, "pre-context-31") || !strings.Contains(tx, "post-context-32") {
			t.Errorf("read_file: the text lost the hooks' context: %q", tx)
		}
		if err := validOutput(t, m, "read_file", r.StructuredContent); err != nil {
			t.Errorf("read_file's result does not validate against its output schema: %v", err)
		}

		r = m.call(t, "strict__greet", nil)
		sc = structured(t, r)
		if got, _ := sc["hook_context"].([]any); r.IsError || sc["greeted"] != "you" || !slices.Equal(got, want) {
			t.Errorf("strict__greet: structuredContent %v, want greeted and hook_context %v: %s", sc, want, text(r))
		}
		if err := validOutput(t, m, "strict__greet", r.StructuredContent); err != nil {
			t.Errorf("strict__greet's result does not validate against its published output schema: %v", err)
		}

		// A refusal has no structuredContent: its text is what every
		// client shows, the context with it.
		r = m.call(t, "read_file", map[string]any{"path": "missing.txt"})
		if !r.IsError || r.StructuredContent != nil {
			t.Errorf("read_file of a missing file: %v %v", r.IsError, r.StructuredContent)
		}
	})
}
