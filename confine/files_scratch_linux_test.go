//go:build linux

package confine

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// TestFileLayerHidesOtherScratch (issue 13 item 10): a file layer refuses
// every other server's and session's scratch in a temp root (a stdio
// server's evener-mcp-*, an HTTP server's evs-* parent, egress sockets'
// evener-egress-*), not only its own server's siblings; its own scratch
// stays readable, and so does a worktree that happens to live in a
// directory with such a name.
func TestFileLayerHidesOtherScratch(t *testing.T) {
	f := newFixtureUnder(t, "/var/tmp")
	tmp := f.scratch // the policy's scratch root: where servers make scratch
	own := filepath.Join(tmp, "evener-mcp-own")
	others := []string{
		filepath.Join(tmp, "evener-mcp-other", "notes"),
		filepath.Join(tmp, "evs-http", "evener-mcp-s1", "notes"),
		filepath.Join(tmp, "evener-egress-1", "x"),
	}
	for _, o := range append(others, filepath.Join(own, "mine"), filepath.Join(tmp, "unrelated", "x")) {
		mustWrite(t, o, "x\n")
	}
	p := f.resolve(t, ModeWorkspaceWrite, NetworkOff, usableHost)
	fa, err := NewFileAccess(p, own)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	for _, o := range others {
		var d *Denial
		if _, _, err := fa.ReadFile(o); !errors.As(err, &d) {
			t.Errorf("read %s: %v, want a denial", o, err)
		}
	}
	for _, ok := range []string{filepath.Join(own, "mine"), filepath.Join(tmp, "unrelated", "x")} {
		if _, _, err := fa.ReadFile(ok); err != nil {
			t.Errorf("read %s: %v", ok, err)
		}
	}
	d, err := fa.OpenDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	ents, _, err := d.Names(100)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if want := []string{"evener-mcp-own", "unrelated"}; !slices.Equal(names, want) {
		t.Errorf("listing the temp root shows %v, want %v", names, want)
	}

	// A worktree inside a directory so named is the user's own project.
	wt := filepath.Join(tmp, "evener-mcp-demo", "proj")
	mustWrite(t, filepath.Join(wt, "main.go"), "package main\n")
	spec := f.spec(ModeWorkspaceWrite, NetworkOff)
	spec.Workdir = wt
	q, err := Resolve(spec, usableHost)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := NewFileAccess(q, "")
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if _, _, err := fb.ReadFile(filepath.Join(wt, "main.go")); err != nil {
		t.Errorf("worktree under an evener-mcp-* directory: %v", err)
	}
	if _, _, err := fb.ReadFile(others[0]); err == nil {
		t.Errorf("another scratch readable beside the worktree")
	}
}
