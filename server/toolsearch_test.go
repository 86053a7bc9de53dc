package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/tools"
)

// TestToolScopeSearch: tool search in the one filter. A server under
// search has its tools withheld until found, and find_tools and call_tool
// published (after our own tools) while any is under search; a found tool is
// listed; a tool --tools or the client names is never searched; a client
// may ask for find_tools (or call_tool), which searches every downstream tool it does not
// name; one that asks for it with no MCP servers behind is refused.
func TestToolScopeSearch(t *testing.T) {
	all := tools.Names()
	down := []string{"files__read", "files__write", "mem__x"}
	with := func(extra ...string) []string { return append(slices.Clone(all), extra...) }
	for _, tc := range []struct {
		name     string
		sc       toolScope
		want     []string
		searched []string
		err      string
	}{
		{name: "no search", sc: toolScope{Gateway: true}, want: with(down...)},
		{name: "one server searched", sc: toolScope{Gateway: true, Search: map[string]bool{"files": true}},
			want: with(findToolsName, callToolName, "mem__x"), searched: []string{"files__read", "files__write"}},
		{name: "found is listed", sc: toolScope{Gateway: true, Search: map[string]bool{"files": true}, Found: map[string]bool{"files__write": true}},
			want: with(findToolsName, callToolName, "files__write", "mem__x"), searched: []string{"files__read", "files__write"}},
		{name: "all found: find_tools stays", sc: toolScope{Gateway: true, Search: map[string]bool{"files": true, "mem": true},
			Found: map[string]bool{"files__read": true, "files__write": true, "mem__x": true}},
			want: with(append([]string{findToolsName, callToolName}, down...)...), searched: down},
		{name: "--tools names are never searched", sc: toolScope{Gateway: true, Server: []string{"read_file", "files__read"}, Search: map[string]bool{"files": true}},
			want: []string{"read_file", "files__read"}},
		{name: "client leaves out what --tools names", sc: toolScope{Gateway: true, Server: []string{"read_file", "files__read"}, Client: []string{"read_file", findToolsName}, Search: map[string]bool{"files": true}},
			want: []string{"read_file", "files__read"}},
		{name: "client names are never searched", sc: toolScope{Gateway: true, Client: []string{"read_file", "files__read"}, Search: map[string]bool{"files": true}},
			want: []string{"read_file", "files__read"}},
		{name: "client asks for find_tools", sc: toolScope{Gateway: true, Client: []string{"read_file", findToolsName, "mem__x"}},
			want: []string{"read_file", findToolsName, callToolName, "mem__x"}, searched: []string{"files__read", "files__write"}},
		{name: "client asks for find_tools, found", sc: toolScope{Gateway: true, Client: []string{findToolsName}, Found: map[string]bool{"files__read": true}},
			want: []string{findToolsName, callToolName, "files__read"}, searched: down},
		{name: "client asks for call_tool", sc: toolScope{Gateway: true, Client: []string{callToolName}},
			want: []string{findToolsName, callToolName}, searched: down},
		{name: "find_tools without servers", sc: toolScope{Client: []string{findToolsName}}, err: `tool "find_tools" is not available`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.sc.publish(down)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("tools\n %v, want\n %v", got, tc.want)
			}
			if _, searched := tc.sc.downstream(down); !slices.Equal(searched, tc.searched) {
				t.Errorf("searched %v, want %v", searched, tc.searched)
			}
			// What a session lists before its servers are up: no
			// find_tools, nothing to find.
			if none, _ := tc.sc.publish(nil); slices.Contains(none, findToolsName) {
				t.Errorf("find_tools published with no downstream tool: %v", none)
			}
		})
	}
}

// TestSearchServers: a server's tool_search wins over the global one,
// which wins over the size; above toolSearchAbove the servers left to the
// default are searched, and one searched for its size stays so.
func TestSearchServers(t *testing.T) {
	yes, no := true, false
	servers := []config.MCPServer{{Name: "a"}, {Name: "b", ToolSearch: &yes}, {Name: "c", ToolSearch: &no}}
	for _, tc := range []struct {
		name   string
		global *bool
		size   int
		was    map[string]bool
		want   map[string]bool
	}{
		{name: "small", size: toolSearchAbove, want: map[string]bool{"a": false, "b": true, "c": false}},
		{name: "large", size: toolSearchAbove + 1, want: map[string]bool{"a": true, "b": true, "c": false}},
		{name: "was large", size: 10, was: map[string]bool{"a": true}, want: map[string]bool{"a": true, "b": true, "c": false}},
		{name: "global off", global: &no, size: 1 << 20, want: map[string]bool{"a": false, "b": true, "c": false}},
		{name: "global on", global: &yes, size: 0, want: map[string]bool{"a": true, "b": true, "c": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := searchServers(&config.Config{MCPServers: servers, ToolSearch: tc.global}, tc.size, tc.was)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("server %s searched %v, want %v (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}
