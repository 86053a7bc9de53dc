package server

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

func roots(paths ...string) []mcp.Root {
	var out []mcp.Root
	for _, p := range paths {
		out = append(out, mcp.Root{URI: "file://" + p})
	}
	return out
}

func TestNarrowedRoot(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(base, "wd")
	for _, d := range []string{"wd/a/x", "wd/a/y", "wd/b", "other", "wd-evil"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "other"), filepath.Join(wd, "link-out")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		roots []mcp.Root
		want  string // "" no change; "ERR" refused
	}{
		{"none", nil, ""},
		{"the worktree", roots(wd), ""},
		{"above", roots(base), ""},
		{"one inside", roots(wd + "/a/x"), wd + "/a/x"},
		{"two inside share a", roots(wd+"/a/x", wd+"/a/y"), wd + "/a"},
		{"two inside share wd", roots(wd+"/a/x", wd+"/b"), wd},
		{"inside and above", roots(wd+"/a/x", base), ""},
		{"outside only", roots(base + "/other"), "ERR"},
		{"prefix sibling", roots(base + "/wd-evil"), "ERR"},
		{"symlink leaving", roots(wd + "/link-out"), "ERR"},
		{"dot-dot leaving", roots(wd + "/a/../../other"), "ERR"},
		{"inside plus outside", roots(wd+"/b", base+"/other"), wd + "/b"},
		{"not file scheme", []mcp.Root{{URI: "https://x/" + wd}}, "ERR"},
		{"relative", []mcp.Root{{URI: "file:relative"}}, "ERR"},
	}
	for _, c := range cases {
		got, err := narrowedRoot(wd, c.roots)
		switch {
		case c.want == "ERR" && err == nil:
			t.Errorf("%s: got %q, want refusal", c.name, got)
		case c.want != "ERR" && (err != nil || got != c.want):
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// FuzzNarrowedRoot: whatever roots a client sends, the result is "" or a
// directory at or inside the worktree.
func FuzzNarrowedRoot(f *testing.F) {
	for _, s := range []string{"file:///tmp", "file:///wd/a/../../x", "file:///wd/a\x00b", "file://host/wd/a", "file:///wd/a%2f..%2f..", "file:///wd/./a//b/"} {
		f.Add(s, "file:///wd/a")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := narrowedRoot("/wd", []mcp.Root{{URI: a}, {URI: b}})
		if err == nil && got != "" && !confine.Within(got, "/wd") {
			t.Fatalf("roots %q %q narrowed /wd to %q", a, b, got)
		}
	})
}

func TestParseNarrowing(t *testing.T) {
	caps := func(v any) mcp.ClientCapabilities {
		return mcp.ClientCapabilities{Experimental: map[string]any{NarrowingCapability: v}}
	}
	if _, ok, err := parseNarrowing(mcp.ClientCapabilities{}); ok || err != nil {
		t.Errorf("no request: ok=%v err=%v", ok, err)
	}
	n, ok, err := parseNarrowing(caps(map[string]any{"tools": []string{"read_file"}, "sandbox": "restricted", "network": "off"}))
	if !ok || err != nil || n.Sandbox != "restricted" || n.Network != "off" || len(n.Tools) != 1 {
		t.Errorf("valid request: %+v %v %v", n, ok, err)
	}
	for _, bad := range []any{
		map[string]any{"sandbox": "read-only", "allow_domains": []string{"x"}},
		map[string]any{"tools": "read_file"},
		"read-only",
	} {
		if _, _, err := parseNarrowing(caps(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestBoundedEventStore(t *testing.T) {
	ctx := context.Background()
	s := newBoundedEventStore(3, 2)
	var ids []string
	for i := 0; i < 5; i++ {
		id, err := s.StoreEvent(ctx, "s1", "A", json.RawMessage(`{"n":`+string(rune('0'+i))+`}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Only the last three of stream A remain: replay after the third gives
	// the fourth and fifth.
	var got []string
	stream, err := s.ReplayEventsAfter(ctx, "s1", ids[2], func(id string, m json.RawMessage) error {
		got = append(got, string(m))
		return nil
	})
	if err != nil || stream != "A" || strings.Join(got, "") != `{"n":3}{"n":4}` {
		t.Errorf("replay = %q, %q, %v", got, stream, err)
	}
	// An event pushed out of the window is unknown.
	if _, err := s.ReplayEventsAfter(ctx, "s1", ids[0], func(string, json.RawMessage) error { return nil }); !errors.Is(err, mcpserver.ErrUnknownEventID) {
		t.Errorf("evicted event: %v", err)
	}
	// A third stream evicts the oldest (A).
	s.StoreEvent(ctx, "s1", "B", json.RawMessage(`{}`))
	s.StoreEvent(ctx, "s1", "C", json.RawMessage(`{}`))
	if _, err := s.ReplayEventsAfter(ctx, "s1", ids[4], func(string, json.RawMessage) error { return nil }); !errors.Is(err, mcpserver.ErrUnknownEventID) {
		t.Errorf("evicted stream: %v", err)
	}
	// Sessions do not see each other's events; purge forgets them.
	if _, err := s.ReplayEventsAfter(ctx, "s2", ids[4], func(string, json.RawMessage) error { return nil }); err == nil {
		t.Error("another session replayed s1's events")
	}
	s.PurgeSession(ctx, "s1")
	if len(s.sessions) != 0 {
		t.Errorf("purge left %d sessions", len(s.sessions))
	}
}
