package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestDecodeArgs(t *testing.T) {
	call := func(js string) mcp.CallToolRequest {
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(`{"params":{"name":"x","arguments":`+js+`}}`), &req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	var e editArgs
	if err := decodeArgs(call(`{"path":"a","edits":[{"old_text":"x","new_text":"y","replace_all":true}],"dry_run":true}`), &e); err != nil ||
		e.Path != "a" || len(e.Edits) != 1 || !e.Edits[0].ReplaceAll || e.Edits[0].NewText != "y" || !e.DryRun {
		t.Errorf("edit args: %+v %v", e, err)
	}
	var r readArgs
	if err := decodeArgs(call(`{"path":"a","offset":-5,"limit":null}`), &r); err != nil || r.Offset != -5 || r.Limit != 0 {
		t.Errorf("read args: %+v %v", r, err)
	}
	for _, c := range []struct{ js, want string }{
		{`{"path":"a","Path":"b"}`, `unknown field "Path"`},
		{`{"path":"a","follow":true}`, `unknown field "follow"`},
		{`{"path":42}`, `"path" must be string, not number`},
		{`{"path":"a","limit":1e300}`, `"limit" must be int, not number`},
		{`{"path":"a","limit":1.5}`, `"limit" must be int, not number`},
		{`{"path":"a","offset":"3"}`, `"offset" must be int, not string`},
		{`[1]`, `want an object`},
	} {
		var r readArgs
		if err := decodeArgs(call(c.js), &r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.js, err, c.want)
		}
	}
	for _, c := range []struct{ js, want string }{
		{`{"path":"a","edits":[{"old_text":"x","new_text":"y","extra":1}]}`, `unknown field "extra"`},
		{`{"path":"a","edits":["x"]}`, `"edits[0]" must be object, not string`},
		{`{"path":"a","edits":{"old_text":"x"}}`, `"edits" must be array, not object`},
		{`{"path":"a","dry_run":"yes"}`, `"dry_run" must be bool, not string`},
	} {
		var e editArgs
		if err := decodeArgs(call(c.js), &e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.js, err, c.want)
		}
	}
}
