//go:build linux

package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/internal/sandboxtest"
	"github.com/evener-dev/evener-mcp/tools"
)

func testOptions(t *testing.T, mode confine.Mode) Options {
	t.Helper()
	h := sandboxtest.NewHost(t)
	spec := h.Spec(mode)
	spec.Env = append(os.Environ(), "HOME="+h.Home, "TMPDIR="+h.Root)
	spec.Home, spec.ScratchRoot, spec.Limits = h.Home, h.Root, confine.DefaultLimits
	pol := sandboxtest.Resolve(t, spec, sandboxtest.Live(t, mode))
	return Options{Config: &config.Config{StateDir: filepath.Join(h.Root, "state")}, Policy: pol, Bounds: tools.DefaultBounds}
}

// testHub is a hub over o with a stdio transport that no client reads,
// before any session: a test builds its own.
func testHub(o Options) *Hub {
	h := &Hub{o: o, t: newStdioTransport(o, strings.NewReader(""), io.Discard), sessions: map[string]*Session{}}
	h.t.(*stdioTransport).h = h
	h.gw = &gatewayHub{h: h, registered: map[string]bool{}}
	return h
}

// TestSessionWithoutFileLayer: where the build has no confined file layer
// (macOS), a sandboxed session publishes the shell alone and says so,
// rather than file tools it could not confine.
func TestSessionWithoutFileLayer(t *testing.T) {
	h := testHub(testOptions(t, confine.ModeWorkspaceWrite))
	h.openFiles = func(*confine.Policy, string, confine.FileAccessOptions) (*confine.FileAccess, error) {
		return nil, confine.ErrNoFileLayer
	}
	s, err := h.buildSession(sessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Terminals stand on the session loopback, not on the file layer:
	// they stay where that exists (on macOS it does not).
	own := slices.DeleteFunc(slices.Clone(s.Tools), func(n string) bool { f, _ := tools.FactsOf(n); return f.Terminal })
	if !slices.Equal(own, []string{"shell"}) {
		t.Errorf("tools = %v, want the shell alone", s.Tools)
	}
	s.start(context.Background())
	if !strings.Contains(s.preamble, "only the shell is offered") {
		t.Errorf("the preamble does not say so:\n%s", s.preamble)
	}
	if _, ok := s.tool("read_file"); ok {
		t.Error("read_file is offered without a file layer")
	}
	if _, ok := s.tool("shell"); !ok {
		t.Error("handlers do not match the shell-only scope")
	}
}
