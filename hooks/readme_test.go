package hooks

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
)

// TestReadmeExample runs the example hook of docs/hooks.md,
// as printed there, under the restricted sandbox: it blocks a force-push
// and lets a plain push through.
func TestReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../docs/hooks.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "```sh\n#!/bin/sh\n# Refuse force-pushes"
	_, rest, ok := strings.Cut(string(b), start)
	body, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("docs/hooks.md has no example hook")
	}
	w := newWorld(t)
	body = strings.TrimPrefix(start, "```sh\n#!/bin/sh\n") + body
	h := Hook{Event: PreToolUse, Matcher: "shell", Command: w.script(t, "no-force-push", body)}
	r := w.runner(t, confine.ModeRestricted, h)
	for _, tt := range []struct {
		command string
		block   bool
	}{
		{"git push --force origin main", true},
		{"git push -f", true},
		{"git push origin main", false},
		{"echo --force", false},
	} {
		out := r.Run(context.Background(), PreToolUse, call("shell", `{"command":"`+tt.command+`"}`))
		if out.Blocked != tt.block || (tt.block && !strings.Contains(out.Reason, "force-pushing is not allowed here")) {
			t.Errorf("%q: %+v, want blocked %v", tt.command, out, tt.block)
		}
	}
}
