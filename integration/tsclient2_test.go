//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The official TypeScript SDK v2 client (integration/tsclient2, pinned),
// negotiating the newest revision each transport offers.

var ts2Packages npmDir

// ts2Result is the line listen.mjs prints.
type ts2Result struct {
	Version string         `json:"version"`
	Honored map[string]any `json:"honored"`
	Denied  bool           `json:"denied"`
	Told    int            `json:"told"`
	Early   int            `json:"early"`
	After   int            `json:"after"`
	Updates []struct {
		Meta map[string]any `json:"_meta"`
		URI  string         `json:"uri"`
	} `json:"updates"`
	Closed string   `json:"closed"`
	Errors []string `json:"errors"`
}

func runTS2(t *testing.T, plan map[string]any) ts2Result {
	t.Helper()
	dir := ts2Packages.install(t, "tsclient2", "@modelcontextprotocol/client")
	b, _ := json.Marshal(plan)
	pf := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(pf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "listen.mjs"), pf)
	cmd.Dir = dir
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("TypeScript SDK v2 client: %v\nstdout:\n%s\nstderr:\n%s", err, so.String(), se.String())
	}
	var r ts2Result
	if err := json.Unmarshal(bytes.TrimSpace(so.Bytes()), &r); err != nil {
		t.Fatalf("client output %q: %v\nstderr:\n%s", so.String(), err, se.String())
	}
	t.Logf("%s", bytes.TrimSpace(so.Bytes()))
	return r
}

// TestTSClientV2Listen: over stdio the SDK v2 client negotiates
// 2026-07-28, opens a subscriptions/listen stream for the violations
// resource, and is told of a refused read on it, ahead of the result, and
// of nothing once it closed the stream. Over HTTP it falls back to
// 2025-11-25 (the sessionless revision is refused there) and is told
// through resources/subscribe, as before.
func TestTSClientV2Listen(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		key := filepath.Join(e.home, ".ssh", "id_rsa")
		writeFile(t, key, "SECRET-KEY\n")
		flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off"}
		t.Run("stdio", func(t *testing.T) {
			p := e.stdioPlan(t, flags...)
			r := runTS2(t, map[string]any{"transport": "stdio", "command": p.Command, "args": p.Args, "env": p.Env, "cwd": p.Cwd, "path": key})
			if r.Version != "2026-07-28" || !r.Denied || len(r.Errors) > 0 {
				t.Fatalf("version %s, denied %v, errors %v", r.Version, r.Denied, r.Errors)
			}
			if h, _ := json.Marshal(r.Honored); string(h) != `{"resourceSubscriptions":["`+violationsURI+`"]}` {
				t.Errorf("honored %s; want the violations resource only", h)
			}
			if r.Told != 1 || r.Early != 1 || r.Updates[0].URI != violationsURI || r.Updates[0].Meta["io.modelcontextprotocol/subscriptionId"] == nil {
				t.Errorf("told %d (%d ahead of the result): %+v; want one, on the stream, ahead of the result", r.Told, r.Early, r.Updates)
			}
			if r.After != 0 || r.Closed != "local" {
				t.Errorf("after close: %d updates, closed %q", r.After, r.Closed)
			}
		})
		t.Run("http", func(t *testing.T) {
			s := e.serve(t, flags...)
			r := runTS2(t, map[string]any{"transport": "http", "url": s.url, "path": key})
			if r.Version != "2025-11-25" || !r.Denied || len(r.Errors) > 0 {
				t.Fatalf("version %s, denied %v, errors %v", r.Version, r.Denied, r.Errors)
			}
			if r.Told != 1 || r.After != 0 {
				t.Errorf("told %d, then %d after unsubscribing; want 1 then 0", r.Told, r.After)
			}
		})
	})
}
