package server

import (
	"strings"
	"testing"
)

// TestGatewayScope: --tools and the client's narrowing both filter the
// gateway's tools (README, "MCP servers behind evener-mcp"); a client may
// not ask for a downstream tool --tools left out.
func TestGatewayScope(t *testing.T) {
	for _, tc := range []struct {
		name             string
		published, asked []string
		in, out          []string
		ownAsked         []string
		err              string
	}{
		{name: "all", in: []string{"files__read", "mem__x"}},
		{name: "tools names ours only", published: []string{"read_file"}, out: []string{"files__read"}},
		{name: "tools names one", published: []string{"read_file", "files__read"}, in: []string{"files__read"}, out: []string{"files__write"}},
		{name: "client names one", asked: []string{"read_file", "files__read"}, in: []string{"files__read"}, out: []string{"files__write"}, ownAsked: []string{"read_file"}},
		{name: "client names only downstream", asked: []string{"files__read"}, in: []string{"files__read"}, out: []string{"files__write"}, ownAsked: []string{}},
		{name: "client asks for more", published: []string{"read_file"}, asked: []string{"files__read"}, err: "not available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed, own, err := newGatewayScope(tc.published, tc.asked)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.in {
				if !allowed(n) {
					t.Errorf("%s not allowed", n)
				}
			}
			for _, n := range tc.out {
				if allowed(n) {
					t.Errorf("%s allowed", n)
				}
			}
			if tc.ownAsked != nil && strings.Join(own, ",") != strings.Join(tc.ownAsked, ",") {
				t.Errorf("own asked %v, want %v", own, tc.ownAsked)
			}
		})
	}
}
