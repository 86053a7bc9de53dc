package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/tools"
)

// TestToolScope: the one function that decides a session's tools. --tools
// and the client's narrowing filter ours and the gateway's; a client may
// not ask for a tool --tools left out; what the session lacks (a file
// layer, terminals, memory) withholds its tools; a session with no tool
// that changes files (the delegate floor) keeps only the memory tools that
// read.
func TestToolScope(t *testing.T) {
	all := tools.Names()
	without := func(drop func(tools.Facts) bool) []string {
		return slices.DeleteFunc(slices.Clone(all), func(n string) bool { f, _ := tools.FactsOf(n); return drop(f) })
	}
	down := []string{"files__read", "files__write", "mem__x"}
	for _, tc := range []struct {
		name string
		sc   toolScope
		want []string
		err  string
	}{
		{name: "all", sc: toolScope{}, want: append(slices.Clone(all), down...)},
		{name: "tools names ours only", sc: toolScope{Server: []string{"read_file"}}, want: []string{"read_file"}},
		{name: "tools names one downstream", sc: toolScope{Server: []string{"read_file", "files__read"}}, want: []string{"read_file", "files__read"}},
		{name: "client names one of each", sc: toolScope{Client: []string{"read_file", "files__read"}}, want: []string{"read_file", "files__read"}},
		{name: "client names only downstream", sc: toolScope{Client: []string{"files__read"}}, want: []string{"files__read"}},
		{name: "client names none", sc: toolScope{Client: []string{}}, want: nil},
		{name: "client leaves out what --tools names", sc: toolScope{Server: []string{"read_file", "files__read"}, Client: []string{"read_file"}}, want: []string{"read_file"}},
		{name: "client asks for more downstream", sc: toolScope{Server: []string{"read_file"}, Client: []string{"files__read"}}, err: "not available on this server (--tools)"},
		{name: "client asks for more of ours", sc: toolScope{Server: []string{"read_file"}, Client: []string{"shell"}}, err: `tool "shell" is not available on this server (it publishes read_file)`},
		// The shell alone changes no file the server knows of: the floor.
		{name: "no file layer", sc: toolScope{NoFiles: true}, want: append(without(func(f tools.Facts) bool { return f.Files || f.Memory == "write" }), down...)},
		{name: "no terminals", sc: toolScope{NoTerminals: true}, want: append(without(func(f tools.Facts) bool { return f.Terminal }), down...)},
		{name: "no memory", sc: toolScope{NoMemory: true}, want: append(without(func(f tools.Facts) bool { return f.Memory != "" }), down...)},
		{name: "delegate floor: memory reads only", sc: toolScope{Client: []string{"read_file", "memory_view", "memory_write"}}, want: []string{"read_file", "memory_view"}},
		{name: "a tool that changes files keeps memory writes", sc: toolScope{Client: []string{"write_file", "memory_write"}}, want: []string{"write_file", "memory_write"}},
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
		})
	}
}
