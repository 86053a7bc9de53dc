//go:build linux

package memory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
)

// FuzzPath: whatever path the model names, a write either is refused or
// lands inside the root, and CleanPath never accepts a path that leaves
// it lexically.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "..", "../x", "/etc/x", "~/x", "a\x00", ".git/x", "a/./b", "x/../../y", "\u202e.md", "GIT~1/x"} {
		f.Add(s)
	}
	fx := newFixtureF(f)
	s, err := Open(fx.state, fx.wt, fx.base, Limits{FileBytes: 64, ScopeBytes: 1 << 20, Files: 1 << 14})
	if err != nil {
		f.Fatal(err)
	}
	r, err := s.Root(Project)
	if err != nil {
		f.Fatal(err)
	}
	outside := filepath.Dir(fx.state)
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanPath(p)
		if err == nil {
			if filepath.IsAbs(c) || !filepath.IsLocal(c) || strings.Contains(c, "\x00") {
				t.Fatalf("CleanPath(%q) = %q", p, c)
			}
		}
		if _, err := r.Write(p, []byte("m")); err == nil {
			if err != nil || !filepath.IsLocal(p) {
				t.Fatalf("write %q accepted", p)
			}
			_ = r.Delete(p)
		}
		es, _ := os.ReadDir(outside)
		for _, e := range es {
			if e.Name() != "evener-mcp" {
				t.Fatalf("%q wrote %s outside the memory root", p, e.Name())
			}
		}
	})
}

func newFixtureF(f *testing.F) *fixture { return newFixture(f, confine.ModeOff) }
