//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// persistent is a raw HTTP client of one MCP session, by its id, so that
// it can present that id to the next server after a restart.
type persistent struct {
	sid string
	n   int
}

// rawInit initializes a session over raw HTTP and returns it.
func rawInit(t *testing.T, srv *httpServer) *persistent {
	t.Helper()
	resp := srv.raw(t, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"persist","version":"1"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if sid == "" {
		t.Fatalf("no session id (%d):\n%s", resp.StatusCode, srv.stderr.String())
	}
	p := &persistent{sid: sid, n: 1}
	resp = srv.raw(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, p.hdr())
	resp.Body.Close()
	return p
}

func (p *persistent) hdr() map[string]string {
	return map[string]string{"Mcp-Session-Id": p.sid, "Mcp-Protocol-Version": "2025-11-25"}
}

// do sends one request of the session to srv: its HTTP status and body
// (JSON or an event stream, read whole, bounded in time by the client).
func (p *persistent) do(t *testing.T, srv *httpServer, method string, params any) (int, string) {
	t.Helper()
	p.n++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.n, "method": method, "params": params})
	resp := srv.raw(t, "POST", string(b), p.hdr())
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(body)
}

func (p *persistent) shell(t *testing.T, srv *httpServer, cmd string) (int, string) {
	t.Helper()
	return p.do(t, srv, "tools/call", map[string]any{"name": "shell", "arguments": map[string]any{"command": cmd}})
}

var scratchOut = regexp.MustCompile(`scratch=(/[^\s"\\]+)`)

// persistedSession starts serve with flags, opens a session and runs a
// shell call (before, then printing the scratch), and returns the server,
// the session and its scratch directory.
func persistedSession(t *testing.T, e *env, before string, flags ...string) (*httpServer, *persistent, string) {
	t.Helper()
	srv := e.serve(t, flags...)
	p := rawInit(t, srv)
	return srv, p, p.scratch(t, srv, before)
}

// scratch runs before and then prints the session's scratch in a shell
// call, and returns the scratch directory.
func (p *persistent) scratch(t *testing.T, srv *httpServer, before string) string {
	t.Helper()
	code, out := p.shell(t, srv, before+`echo scratch=$TMPDIR`)
	m := scratchOut.FindStringSubmatch(out)
	if code != 200 || m == nil {
		t.Fatalf("no scratch from a shell call (%d):\n%s", code, out)
	}
	return m[1]
}

// TestHTTPPersistSessions: with --persist-sessions, SIGTERM ends a
// session's processes but keeps its record and scratch; the next server on
// the same state directory resumes the session from its Mcp-Session-Id:
// the same scratch (a file made before the restart is there), the same
// mode (a write outside the worktree still fails). A DELETE then removes
// record and scratch.
func TestHTTPPersistSessions(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		flags := []string{"--persist-sessions", "--sandbox", "workspace-write", "--sandbox-net", "off"}
		srv, p, scratch := persistedSession(t, e, `echo x > "$TMPDIR/marker" && `, flags...)
		record := filepath.Join(e.home, ".local", "state", "evener-mcp", "sessions", p.sid+".json")
		if fi, err := os.Stat(record); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the session's record %s: %v %v", record, fi, err)
		}

		// A command still running at SIGTERM ends with the server.
		marker := fmt.Sprintf("sleep 33%d", len(id.name))
		go func() {
			// Not through t: this request fails when the server goes.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			body := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"shell","arguments":{"command":"` + marker + `"}}}`
			req, err := http.NewRequestWithContext(ctx, "POST", srv.url, strings.NewReader(body))
			if err != nil {
				return
			}
			for k, v := range p.hdr() {
				req.Header.Set(k, v)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		if !waitFor(15*time.Second, func() bool { return len(procsWith(marker)) > 0 }) {
			t.Fatalf("%q never started", marker)
		}
		pid := srv.cmd.Process.Pid
		srv.stop(t)
		if left := descendants(pid); len(left) > 0 {
			t.Errorf("processes left under the server after SIGTERM: %v", left)
		}
		if !waitFor(5*time.Second, func() bool { return len(procsWith(marker)) == 0 }) {
			t.Errorf("%q survived SIGTERM", marker)
		}
		if b, err := os.ReadFile(filepath.Join(scratch, "marker")); err != nil || string(b) != "x\n" {
			t.Fatalf("the scratch did not survive SIGTERM: %q %v", b, err)
		}
		if _, err := os.Stat(record); err != nil {
			t.Fatalf("the record did not survive SIGTERM: %v", err)
		}

		srv2 := e.serve(t, flags...)
		code, out := p.shell(t, srv2, `cat "$TMPDIR/marker"; echo scratch=$TMPDIR`)
		if m := scratchOut.FindStringSubmatch(out); code != 200 || m == nil || m[1] != scratch || !strings.Contains(out, `x\n`) {
			t.Fatalf("the resumed session (%d), want scratch %s with its marker:\n%s\n%s", code, scratch, out, srv2.stderr.String())
		}
		t.Logf("resumed: %s", out)
		escape := filepath.Join(e.sibling, "escaped")
		code, out = p.shell(t, srv2, "echo y > "+escape+" && echo WROTE")
		if _, err := os.Stat(escape); err == nil || strings.Contains(out, "WROTE\\n") {
			t.Errorf("the resumed session wrote outside its worktree (%d):\n%s", code, out)
		}
		if code, out = p.shell(t, srv2, "echo in > inside && cat inside"); code != 200 || !strings.Contains(out, `in\n`) {
			t.Errorf("the resumed session cannot write its worktree (%d):\n%s", code, out)
		}
		code, out = p.do(t, srv2, "resources/read", map[string]any{"uri": "evener://sandbox/preamble"})
		if code != 200 || !strings.Contains(out, "sandbox: workspace-write, enforced by bwrap") || !strings.Contains(out, "network: off") {
			t.Errorf("the resumed session's preamble (%d):\n%s", code, out)
		}

		// mcp-go's own client, its server restarted on the same port,
		// carries on in the same session without noticing.
		c := srv2.mustConnect(t, clientOpts{})
		scrC := strings.TrimSpace(c.shellOut(t, `echo c > "$TMPDIR/c-marker"; echo $TMPDIR`))
		srv2.stop(t)
		srv3 := e.serve(t, append(flags, "--listen", srv2.addr)...)
		if got := c.shellOut(t, `cat "$TMPDIR/c-marker"; echo $TMPDIR`); got != "c\n"+scrC+"\n" {
			t.Errorf("mcp-go's client after the restart: %q, want its marker and scratch %s\n%s", got, scrC, srv3.stderr.String())
		}
		srv2 = srv3

		resp := srv2.raw(t, "DELETE", "", p.hdr())
		resp.Body.Close()
		if !waitFor(10*time.Second, func() bool {
			_, e1 := os.Stat(record)
			_, e2 := os.Stat(scratch)
			return os.IsNotExist(e1) && os.IsNotExist(e2)
		}) {
			t.Errorf("DELETE left the record or the scratch")
		}
	})
}

// TestHTTPPersistFailClosed: a server that cannot enforce a session's
// persisted mode (no bubblewrap on its PATH: it runs its own fresh
// sessions unconfined, as the default mode degrades) refuses to resume it,
// with an error naming the mode and the reason, and runs nothing; the
// record stays, and a server that can enforce it again resumes it. A
// record that does not parse is refused too.
func TestHTTPPersistFailClosed(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		flags := []string{"--persist-sessions", "--sandbox-net", "off"}
		srv, p, scratch := persistedSession(t, e, `echo x > "$TMPDIR/marker" && `, flags...)
		srv.stop(t)
		record := filepath.Join(e.home, ".local", "state", "evener-mcp", "sessions", p.sid+".json")

		// A PATH with a shell but no bubblewrap: were the session run
		// unconfined, its command would run.
		nobw := filepath.Join(e.root, "nobwrap")
		mustMkdir(t, nobw)
		for _, b := range []string{"bash", "sh"} {
			if err := os.Symlink("/bin/"+b, filepath.Join(nobw, b)); err != nil {
				t.Fatal(err)
			}
		}
		base := append([]string(nil), e.extra...)
		e.extra = append(e.extra, "PATH="+nobw)
		srv2 := e.serve(t, flags...)
		if !strings.Contains(srv2.stderr.String(), "NOT ENFORCING") && !strings.Contains(srv2.stderr.String(), "bwrap") {
			t.Logf("control: the server without bwrap said:\n%s", srv2.stderr.String())
		}
		ran := filepath.Join(e.work, "ran")
		code, out := p.shell(t, srv2, "echo ran > "+ran)
		if code != 503 || !strings.Contains(out, "workspace-write") || !strings.Contains(out, "bwrap") || !strings.Contains(out, `"error"`) {
			t.Errorf("the resume on a host without bubblewrap (%d), want 503 naming the mode and bwrap:\n%s", code, out)
		}
		t.Logf("refused: %s", out)
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("the refused session ran its command")
		}
		if _, err := os.Stat(record); err != nil {
			t.Errorf("the refused session's record is gone: %v", err)
		}
		if _, err := os.Stat(filepath.Join(scratch, "marker")); err != nil {
			t.Errorf("the refused session's scratch is gone: %v", err)
		}
		srv2.stop(t)

		// bubblewrap there when the server starts, gone when the session
		// resumes: the host is measured again at the resume.
		gone := filepath.Join(e.root, "gonebwrap")
		mustMkdir(t, gone)
		for _, b := range []string{"bash", "sh", "bwrap"} {
			if err := os.Symlink("/usr/bin/"+b, filepath.Join(gone, b)); err != nil {
				t.Fatal(err)
			}
		}
		e.extra = append(append([]string(nil), base...), "PATH="+gone)
		srvGone := e.serve(t, flags...)
		if err := os.Remove(filepath.Join(gone, "bwrap")); err != nil {
			t.Fatal(err)
		}
		if code, out = p.shell(t, srvGone, "echo ran > "+ran); code != 503 || !strings.Contains(out, "workspace-write") || !strings.Contains(out, "bwrap") {
			t.Errorf("the resume after bubblewrap went (%d), want 503 naming the mode and bwrap:\n%s", code, out)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("the refused session ran its command")
		}
		srvGone.stop(t)

		// bubblewrap back: the same session resumes, confined.
		e.extra = base
		srv3 := e.serve(t, flags...)
		if code, out = p.shell(t, srv3, `cat "$TMPDIR/marker"`); code != 200 || !strings.Contains(out, `x\n`) {
			t.Errorf("the session did not resume once bubblewrap was back (%d):\n%s", code, out)
		}
		srv3.stop(t)

		// A record that does not parse is refused, not guessed at.
		if err := os.WriteFile(record, []byte(`{"version":1,"mode":"off"`), 0o600); err != nil {
			t.Fatal(err)
		}
		e.chown(t)
		srv4 := e.serve(t, flags...)
		if code, out = p.shell(t, srv4, "echo ran > "+ran); code != 503 || !strings.Contains(out, "record") {
			t.Errorf("a malformed record (%d), want 503:\n%s", code, out)
		}
		t.Logf("malformed: %s", out)
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("a session with a malformed record ran its command")
		}
		// The client's DELETE of a session the server has not resumed
		// removes its record.
		resp := srv4.raw(t, "DELETE", "", p.hdr())
		resp.Body.Close()
		if _, err := os.Stat(record); resp.StatusCode != 200 || !os.IsNotExist(err) {
			t.Errorf("DELETE of an unresumed session: %d, record %v", resp.StatusCode, err)
		}
	})
}

// TestHTTPPersistIdleExpiry: records idle past --idle-timeout are removed
// with their scratch, at the next server's start and while it runs; an
// id whose record is gone is an ended session (404).
func TestHTTPPersistIdleExpiry(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		flags := []string{"--persist-sessions", "--sandbox", "workspace-write", "--sandbox-net", "off", "--idle-timeout", "4s"}
		srv, p, scratch := persistedSession(t, e, "", flags...)
		record := filepath.Join(e.home, ".local", "state", "evener-mcp", "sessions", p.sid+".json")
		srv.stop(t)
		if _, err := os.Stat(scratch); err != nil {
			t.Fatalf("control: the scratch did not survive SIGTERM: %v", err)
		}
		time.Sleep(4500 * time.Millisecond)
		srv2 := e.serve(t, flags...)
		if _, err := os.Stat(record); !os.IsNotExist(err) {
			t.Errorf("an expired record survived the start: %v", err)
		}
		if _, err := os.Stat(scratch); !os.IsNotExist(err) {
			t.Errorf("an expired record's scratch survived the start: %v", err)
		}
		if code, _ := p.shell(t, srv2, "true"); code != 404 {
			t.Errorf("an expired session answered %d, want 404", code)
		}

		// A record left by a server stopped just now expires while the
		// next one runs: the periodic sweep removes it, with its scratch.
		r := rawInit(t, srv2)
		rscratch := r.scratch(t, srv2, "")
		rrec := filepath.Join(filepath.Dir(record), r.sid+".json")
		srv2.stop(t)
		srv2 = e.serve(t, flags...)
		if _, err := os.Stat(rrec); err != nil {
			t.Fatalf("control: a fresh record did not survive the restart: %v", err)
		}
		if !bothGone(rrec, rscratch) {
			t.Errorf("a record that expired while the server ran survived, or its scratch did")
		}

		// A live session idle past the timeout ends, record and scratch.
		q := rawInit(t, srv2)
		qscratch := q.scratch(t, srv2, "")
		qrec := filepath.Join(filepath.Dir(record), q.sid+".json")
		if _, err := os.Stat(qrec); err != nil {
			t.Fatalf("control: no record for the live session: %v", err)
		}
		if !bothGone(qrec, qscratch) {
			t.Errorf("an idle live session's record or scratch survived its expiry")
		}
	})
}

// TestHTTPPersistRoots: the worktree a session's roots narrowed it to is
// part of its record: after a restart the session is as narrow as it was
// (the roots are not asked again), with its network (on: new proxies) as
// it was.
func TestHTTPPersistRoots(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		sub := filepath.Join(e.work, "sub")
		mustMkdir(t, sub)
		flags := []string{"--persist-sessions", "--sandbox", "workspace-write"}
		srv := e.serve(t, flags...)
		m := srv.mustConnect(t, clientOpts{roots: []string{sub}})
		if r := m.call(t, "write_file", map[string]any{"path": "before.txt", "content": "x"}); r.IsError {
			t.Fatalf("write inside the narrowed root: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(sub, "before.txt")); err != nil {
			t.Fatalf("control: the roots did not narrow the worktree: %v", err)
		}
		srv.stop(t)
		srv2 := e.serve(t, append(flags, "--listen", srv.addr)...)
		if r := m.call(t, "write_file", map[string]any{"path": "after.txt", "content": "x"}); r.IsError {
			t.Errorf("write inside the narrowed root after the restart: %s\n%s", text(r), srv2.stderr.String())
		}
		if _, err := os.Stat(filepath.Join(sub, "after.txt")); err != nil {
			t.Errorf("the resumed session's worktree is not its root: %v", err)
		}
		if r := m.call(t, "write_file", map[string]any{"path": filepath.Join(e.work, "top.txt"), "content": "x"}); !denied(t, r, "outside-roots") {
			t.Errorf("the resumed session wrote outside its root: %s", text(r))
		}
		m.call(t, "shell", map[string]any{"command": "touch ../top-shell.txt"})
		if _, err := os.Stat(filepath.Join(e.work, "top-shell.txt")); err == nil {
			t.Errorf("the resumed session's shell wrote outside its root")
		}
		if out := m.shellOut(t, "echo proxy=$HTTP_PROXY"); !strings.Contains(out, "proxy=http://") {
			t.Errorf("the resumed session lost its network: %q", out)
		}
	})
}

// bothGone waits (at most 15 s) until a session's record and its scratch
// are both removed.
func bothGone(record, scratch string) bool {
	return waitFor(15*time.Second, func() bool {
		_, e1 := os.Stat(record)
		_, e2 := os.Stat(scratch)
		return os.IsNotExist(e1) && os.IsNotExist(e2)
	})
}

// TestHTTPPersistChmodScratch: a persisted session whose command made its
// scratch 0755 (chmod $TMPDIR) and left read-only directories in it is
// still removed, record and scratch, by the next server's start-up sweep
// once idle past --idle-timeout; the log says so only when it is true.
func TestHTTPPersistChmodScratch(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		flags := []string{"--persist-sessions", "--sandbox", "workspace-write", "--sandbox-net", "off", "--idle-timeout", "3s"}
		srv, p, scratch := persistedSession(t, e, `mkdir -p "$TMPDIR/ro/d" && touch "$TMPDIR/ro/d/f" && chmod 0555 "$TMPDIR/ro/d" "$TMPDIR/ro" && chmod 0755 "$TMPDIR" && `, flags...)
		record := filepath.Join(e.home, ".local", "state", "evener-mcp", "sessions", p.sid+".json")
		srv.stop(t)
		if fi, err := os.Stat(scratch); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("control: the scratch is not the 0755 one the session made: %v %v", fi, err)
		}
		time.Sleep(3500 * time.Millisecond)
		srv2 := e.serve(t, flags...)
		if !bothGone(record, scratch) {
			t.Errorf("a session whose scratch was chmod'ed 0755 kept its record or scratch:\n%s", srv2.stderr.String())
		}
		if strings.Contains(srv2.stderr.String(), "could not remove") {
			t.Errorf("the sweep says it could not remove a session:\n%s", srv2.stderr.String())
		}
	})
}
