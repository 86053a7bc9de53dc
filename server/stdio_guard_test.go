package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		name, in string
		wantErr  string
	}{
		{"plain", `{"a":1,"b":{"c":[1,2,{"d":3}]}}`, ""},
		{"duplicate top", `{"a":1,"a":2}`, "duplicate key"},
		{"duplicate nested", `{"p":{"path":"x","path":"y"}}`, "duplicate key"},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, ""},
		{"same key in array items", `[{"k":1},{"k":2}]`, ""},
		{"case differs", `{"path":1,"Path":2}`, ""},
		{"key after nested value", `{"a":{"x":1},"a":2}`, "duplicate key"},
		{"string value equal to a key", `{"a":"a","b":"a"}`, ""},
		{"deep", strings.Repeat("[", 65) + strings.Repeat("]", 65), "nested deeper"},
		{"not deep enough to refuse", strings.Repeat("[", 60) + strings.Repeat("]", 60), ""},
		{"syntax error left to the library", `{"a":`, ""},
	}
	for _, c := range cases {
		err := checkJSON([]byte(c.in))
		if (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
		}
	}
}

func TestGuardedReader(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"x","params":{"a":1,"a":2}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"\xff\"}",
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	g := newGuardedReader(strings.NewReader(in), &syncWriter{w: &out})
	passed, _ := io.ReadAll(&stdioTransport{in: g})
	if got := strings.Count(string(passed), "\n"); got != 2 || !strings.Contains(string(passed), `"id":4`) {
		t.Errorf("passed on:\n%s", passed)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			t.Fatalf("rejection is not JSON: %q", l)
		}
		ids = append(ids, string(mustJSON(m["id"])))
	}
	if strings.Join(ids, ",") != "2,3" {
		t.Errorf("rejected ids %v, want 2,3", ids)
	}
}

func TestGuardedReaderOversized(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"x":"` + strings.Repeat("y", MaxMessageBytes+10) + `"}}` + "\n" + `{"jsonrpc":"2.0","id":78,"method":"ping"}` + "\n"
	var out bytes.Buffer
	passed, _ := io.ReadAll(&stdioTransport{in: newGuardedReader(strings.NewReader(big), &syncWriter{w: &out})})
	if !strings.Contains(out.String(), `"id":77`) || !strings.Contains(out.String(), "larger than") {
		t.Errorf("oversized message not answered with its id: %q", out.String()[:min(200, out.Len())])
	}
	if string(passed) != `{"jsonrpc":"2.0","id":78,"method":"ping"}`+"\n" {
		t.Errorf("the next message was not passed on intact: %q", passed)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// FuzzCheckJSON: never panics, and a document re-encoded from a decoded
// value (whose objects cannot repeat a key) is never refused unless it is
// nested too deep.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `[[[]]]`, `{"a":{"b":[{"c":1,"c":2}]}}`, `"x"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkJSON(b)
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		canon, err := json.Marshal(v)
		if err != nil {
			return
		}
		if err := checkJSON(canon); err != nil && !strings.Contains(err.Error(), "nested deeper") {
			t.Fatalf("refused %q (from %q): %v", canon, b, err)
		}
	})
}

// TestGuardedReaderOversizedIDLast: the TypeScript SDK writes a request's
// id after its params, so the id of an oversized request stands at its
// end; the refusal must still carry it (a client otherwise waits for its
// own timeout).
func TestGuardedReaderOversizedIDLast(t *testing.T) {
	body := `{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a","content":"` + strings.Repeat("z", MaxMessageBytes+10) + `","id":999}},"jsonrpc":"2.0","id":"req-9"}`
	var out bytes.Buffer
	_, _ = io.ReadAll(&stdioTransport{in: newGuardedReader(strings.NewReader(body+"\n"), &syncWriter{w: &out})})
	if !strings.Contains(out.String(), `"id":"req-9"`) {
		t.Errorf("oversized message with its id last not answered with that id: %q", out.String())
	}
}

func TestIDScan(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":5,"method":"x"}`, `5`},
		{`{"method":"x","params":{"id":3,"a":[{"id":4}]},"id":"abc"}`, `"abc"`},
		{`{"params":{"s":"\"id\":7,"},"id":-12}`, `-12`},
		{`{"params":{"id":1}}`, ``},
		{`{"idx":1,"xid":2}`, ``},
		{`{"id":{"a":1}}`, ``},
		{`{"id":[1]}`, ``},
		{`{"id":null}`, `null`},
		{`{"id" : "a\"b" }`, `"a\"b"`},
		{`{"method":"x","id":1e3}`, `1e3`},
		{`{"id":tru}`, ``},
		{`[{"id":1}]`, ``},
	} {
		s := idScan{key: "id"}
		s.feed([]byte(c.in))
		if string(s.id) != c.want {
			t.Errorf("%s: id %q, want %q", c.in, s.id, c.want)
		}
	}
}

// FuzzIDScan: never panics, and whatever id it finds is the one the
// decoder reads as the top-level "id" of a valid object.
func FuzzIDScan(f *testing.F) {
	for _, s := range []string{`{"id":1}`, `{"a":{"id":2},"id":"x"}`, `{"id":"\\"}`, `{"i\u0064":3}`, `{"id":1,"id":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := idScan{key: "id"}
		s.feed(b)
		if s.id == nil || checkJSON(b) != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if got, ok := m["id"]; ok && string(got) != string(s.id) {
			// Escaped spellings of "id" are the decoder's business; the
			// scanner answers only the literal key.
			if !bytes.Contains(b, []byte(`"id"`)) {
				return
			}
			var a, b2 any
			_ = json.Unmarshal(got, &a)
			_ = json.Unmarshal(s.id, &b2)
			if fmt.Sprint(a) != fmt.Sprint(b2) {
				t.Fatalf("%q: scanned id %s, decoder %s", b, s.id, got)
			}
		}
	})
}

// checkJSONTokens is the token-by-token checker checkJSON replaced, kept
// as the reference the differential fuzz compares against. It walks: duplicate keys (compared
// exactly: no case folding) and nesting deeper than maxDepth are refused.
// Syntax errors are left to the protocol library, which answers them.
func checkJSONTokens(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	type frame struct {
		obj     bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxDepth {
					return fmt.Errorf("message nested deeper than %d levels", maxDepth)
				}
				if top != nil && top.obj {
					top.wantKey = true
				}
				stack = append(stack, &frame{obj: t == '{', keys: map[string]bool{}, wantKey: t == '{'})
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.wantKey {
				if top.keys[t] {
					return fmt.Errorf("duplicate key %q in a JSON object", t)
				}
				top.keys[t] = true
				top.wantKey = false
				continue
			}
			if top != nil && top.obj {
				top.wantKey = true
			}
		default:
			if top != nil && top.obj {
				top.wantKey = true
			}
		}
	}
}

// FuzzCheckJSONDifferential: the byte scanner refuses exactly what the
// decoder-based reference refuses, on any input the decoder accepts.
func FuzzCheckJSONDifferential(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":1},"b":2}`, `[{"a":1},{"a":1}]`, `{"a":"{\"a\":1}","b":[1,{"c":2,"c":3}]}`, `{"k":"\\","k":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			_ = checkJSON(b)
			return
		}
		got, want := checkJSON(b), checkJSONTokens(b)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("%q: scanner %v, reference %v", b, got, want)
		}
	})
}
