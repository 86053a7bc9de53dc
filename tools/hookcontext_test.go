package tools

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestAddHookContext: the hooks' context joins an object structured
// content (typed or raw), and nothing else: no structured content, one
// that is not an object, or one that has the member already.
func TestAddHookContext(t *testing.T) {
	added := []string{"a", "b \"quoted\""}
	for _, c := range []struct {
		name string
		res  *mcp.CallToolResult
		ok   bool
		want string
	}{
		{"typed", mcp.NewToolResultStructured(WriteResult{Path: "p", Bytes: 1}, "t"), true, `{"path":"p","bytes":1,"created":false,"hook_context":["a","b \"quoted\""]}`},
		{"raw", &mcp.CallToolResult{RawStructuredContent: json.RawMessage(` {"x": 1} `)}, true, `{"x": 1,"hook_context":["a","b \"quoted\""]}`},
		{"empty object", &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{}`)}, true, `{"hook_context":["a","b \"quoted\""]}`},
		{"none", mcp.NewToolResultText("t"), false, ``},
		{"array", &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`[1]`)}, false, `[1]`},
		{"taken", &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{"hook_context":1}`)}, false, `{"hook_context":1}`},
	} {
		ok := AddHookContext(c.res, added)
		var got []byte
		if len(c.res.RawStructuredContent) > 0 {
			got = c.res.RawStructuredContent
		} else if c.res.StructuredContent != nil {
			got, _ = json.Marshal(c.res.StructuredContent)
		}
		if ok != c.ok || string(got) != c.want {
			t.Errorf("%s: %v %s, want %v %s", c.name, ok, got, c.ok, c.want)
		}
		if ok && !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", c.name, got)
		}
	}
}

// TestDeclareHookContext: an object schema gains the member (a closed one
// too); any other is left as it is.
func TestDeclareHookContext(t *testing.T) {
	for in, declares := range map[string]bool{
		`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`: true,
		`{"type":"object"}`: true,
		`{"properties":{}}`: true,
		`{"type":"array"}`:  false,
		`{"type":"object","properties":{"hook_context":{"type":"integer"}}}`: false,
		`{"type":"object","properties":[]}`:                                  false,
		`not json`:                                                           false,
	} {
		out := DeclareHookContext(json.RawMessage(in))
		var s struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(out, &s)
		got := s.Properties[HookContextKey].Type == "array"
		if got != declares || (!declares && string(out) != in) {
			t.Errorf("DeclareHookContext(%s) = %s", in, out)
		}
	}
}
