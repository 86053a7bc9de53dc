package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestEncodeResult: the lane writes a result as the library encodes it
// for a client on a revision with sessions.
func TestEncodeResult(t *testing.T) {
	withMeta := mcp.NewToolResultText("m")
	withMeta.Meta = &mcp.Meta{AdditionalFields: map[string]any{"k": "v"}}
	raw := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent("aGk=", "image/png")}, RawStructuredContent: json.RawMessage(`{"n":1}`)}
	for name, res := range map[string]*mcp.CallToolResult{
		"text":       mcp.NewToolResultText("hello"),
		"error":      mcp.NewToolResultError("no"),
		"structured": mcp.NewToolResultStructured(map[string]any{"a": []any{1.0, "b"}}, "fallback"),
		"meta":       withMeta,
		"raw":        raw,
		"empty":      {Content: []mcp.Content{}},
	} {
		var b bytes.Buffer
		if err := encodeResult(&b, res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lib, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%s: the lane wrote %q: %v", name, b.String(), err)
		}
		_ = json.Unmarshal(lib, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: lane %s, library %s", name, b.String(), lib)
		}
	}
	if err := encodeResult(&bytes.Buffer{}, nil); err == nil {
		t.Errorf("a nil result encoded")
	}
}

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
