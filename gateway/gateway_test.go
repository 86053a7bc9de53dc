package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestParseResult: a downstream result keeps its content items byte for
// byte and its structured content raw; what the pipeline reads (isError,
// _meta) is decoded; a result the specification does not allow is an
// error, as the library's client makes it.
func TestParseResult(t *testing.T) {
	raw := `{"content":[{"type":"text","text":"a\u00e9\n","annotations":{"priority":1}},{"type":"image","data":"aGk=","mimeType":"image/png"}],"structuredContent":{"n":9007199254740993},"isError":true,"_meta":{"k":"v"}}`
	res, err := parseResult(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Meta == nil || res.Meta.AdditionalFields["k"] != "v" {
		t.Errorf("isError or _meta lost: %+v", res)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	// The items and the structured content as written: the escape and
	// the integer above 2^53 survive.
	for _, want := range []string{`{"type":"text","text":"a\u00e9\n","annotations":{"priority":1}}`, `{"n":9007199254740993}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s not passed as written in %s", want, out)
		}
	}
	// Invalid UTF-8 from a downstream does not reach the client.
	res, err = parseResult(json.RawMessage("{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}"))
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := json.Marshal(res); !utf8.Valid(out) || !strings.Contains(string(out), "a\uFFFDb") {
		t.Errorf("invalid UTF-8 passed through: %q", out)
	}
	for _, bad := range []string{
		`{}`,
		`{"content":[{"type":"video"}]}`,
		`{"content":["text"]}`,
		`{"content":[{"text":"no type"}]}`,
		`{"content":[{"type":"text"}`,
	} {
		if _, err := parseResult(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestMemberOf: the content type is the top-level member, not a nested
// one or one inside a string.
func TestMemberOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"text"}`, "text"},
		{`{ "text" : "\"type\":\"x\"", "type" : "image" }`, "image"},
		{`{"a":{"type":"inner"},"type":"audio"}`, "audio"},
		{`{"a":["type","x"],"type":"resource"}`, "resource"},
		{`{"type":"te\"xt"}`, ""},
		{`{"type":1}`, ""},
		{`{"a":{"type":"inner"}}`, ""},
		{`{"type":"resource_link","type2":"x"}`, "resource_link"},
	} {
		if got := memberOf([]byte(tc.in), "type"); got != tc.want {
			t.Errorf("memberOf(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzMemberOf: on any JSON object memberOf agrees with the decoder, or
// says "" where the decoder's value is an escaped or non-string one.
func FuzzMemberOf(f *testing.F) {
	for _, s := range []string{`{"type":"text"}`, `{"a":{"type":"b"},"type":"c"}`, `{"x":"\\","type":"d"}`, `{"type":"e\u0041"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(s))
		if !utf8.ValidString(s) || dec.Decode(&m) != nil || dec.More() || !strings.HasPrefix(strings.TrimSpace(s), "{") {
			return
		}
		got := memberOf([]byte(strings.TrimSpace(s)), "type")
		var want string
		if json.Unmarshal(m["type"], &want) != nil {
			want = ""
		}
		if got != "" && got != want {
			t.Fatalf("memberOf(%s) = %q, decoder %q", s, got, want)
		}
		if got == "" && want != "" && !strings.Contains(string(m["type"]), `\`) && duplicateFree(s) {
			t.Fatalf("memberOf(%s) missed %q", s, want)
		}
	})
}

// duplicateFree: memberOf reads the first "type", the decoder keeps the
// last (the guard refuses duplicates before either sees a message), and
// the decoder folds case.
func duplicateFree(s string) bool {
	return strings.Count(strings.ToLower(s), `"type"`) <= 1 && !strings.Contains(strings.ToLower(s), `\u`)
}

// TestContentMarshal: Content is the item as written, inside the
// library's own encoding of a result.
func TestContentMarshal(t *testing.T) {
	item := `{"type":"text","text":"x"}`
	res := &mcp.CallToolResult{Content: []mcp.Content{Content{raw: json.RawMessage(item)}, mcp.NewTextContent("y")}}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"type": "text", "text": "x"}, map[string]any{"type": "text", "text": "y"}}
	if !reflect.DeepEqual(got["content"], want) {
		t.Errorf("content %v, want %v", got["content"], want)
	}
}
