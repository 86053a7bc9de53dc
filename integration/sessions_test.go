//go:build linux

package integration

// Sessions: what one MCP session gets, whichever transport carries it
// (isolation, idle expiry, narrowing, the delegate floor, approval, roots,
// the pids cgroup); the HTTP transport's own guards are in http_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestHTTPSessionsIsolated: two concurrent sessions of one server get their
// own scratch directories and process tables; neither can reach the host's
// loopback, where every session's proxies listen; deleting a session kills
// what it runs and removes its scratch; SIGTERM leaves no process, socket
// or directory behind.
func TestHTTPSessionsIsolated(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		// A short drain: the SIGTERM below finds a call in flight, which
		// the drain lets run this long before every session is closed.
		srv := e.serve(t, "--sandbox", "workspace-write", "--drain-timeout", "1s")
		tmp := filepath.Join(e.root, "tmp") // the server's TMPDIR: scratch and bridge sockets
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})

		scrA := strings.TrimSpace(a.shellOut(t, "echo $TMPDIR"))
		scrB := strings.TrimSpace(b.shellOut(t, "echo $TMPDIR"))
		if scrA == "" || scrA == scrB {
			t.Fatalf("scratch directories: a %q, b %q", scrA, scrB)
		}
		for _, d := range []string{scrA, scrB} {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				t.Fatalf("scratch %s does not exist on the host: %v", d, err)
			}
		}

		// a runs a long command; b must not see it.
		marker := fmt.Sprintf("sleep 30%d", len(id.name))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "shell"
			req.Params.Arguments = map[string]any{"command": marker + "; echo finished"}
			_, _ = a.c.CallTool(ctx, req)
		}()
		if !waitFor(15*time.Second, func() bool { return len(procsWith(marker)) > 0 }) {
			t.Fatalf("a's %q never started", marker)
		}
		seen := b.shellOut(t, `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done`)
		if strings.Contains(seen, marker) {
			t.Errorf("b sees a's process:\n%s", seen)
		}
		// Every port the server listens on (the HTTP port and every
		// session's proxies) is unreachable from b's sandbox.
		ports := listeningPorts(srv.cmd.Process.Pid)
		if len(ports) < 3 {
			t.Fatalf("server listens on %v; want the HTTP port and two proxies per session", ports)
		}
		for _, p := range ports {
			if !dialable(p) {
				t.Fatalf("control: port %d not reachable from the host", p)
			}
			out := b.shellOut(t, fmt.Sprintf(`(exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && echo REACHED || echo refused`, p))
			if strings.Contains(out, "REACHED") {
				t.Errorf("b's sandbox reached the host's 127.0.0.1:%d", p)
			}
		}
		// b's sandbox sees its own scratch in the server's scratch parent
		// and nothing else: not a's scratch, not a's bridge sockets.
		parentView := b.shellOut(t, "ls -A "+filepath.Dir(scrB)+"; ls -A "+scrA+" >/dev/null 2>&1 && echo LISTED-A")
		if strings.Contains(parentView, "LISTED-A") || strings.TrimSpace(parentView) != filepath.Base(scrB) {
			t.Errorf("b's sandbox sees in the scratch parent:\n%s", parentView)
		}
		if host := entries(filepath.Dir(scrA)); len(host) < 4 {
			t.Errorf("control: the host's scratch parent holds %v; want two scratch dirs and two bridge dirs", host)
		}
		// b cannot read a's scratch through its file tools either.
		r := b.call(t, "list_dir", map[string]any{"path": scrA})
		if !r.IsError {
			t.Errorf("b listed a's scratch: %s", text(r))
		}

		// Deleting a (the client's DELETE) kills its sleep and removes its
		// scratch; b keeps working.
		a.c.Close()
		if !waitFor(15*time.Second, func() bool { return len(procsWith(marker)) == 0 }) {
			t.Errorf("a's %q survived the session's deletion", marker)
		}
		wg.Wait()
		if !waitFor(10*time.Second, func() bool { _, err := os.Stat(scrA); return os.IsNotExist(err) }) {
			t.Errorf("a's scratch %s survived the session's deletion", scrA)
		}
		if out := b.shellOut(t, "echo still here"); !strings.Contains(out, "still here") {
			t.Errorf("b stopped working after a was deleted: %q", out)
		}

		// SIGTERM with a command running in b: nothing left behind.
		marker2 := fmt.Sprintf("sleep 31%d", len(id.name))
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "shell"
			req.Params.Arguments = map[string]any{"command": marker2}
			_, _ = b.c.CallTool(ctx, req)
		}()
		if !waitFor(15*time.Second, func() bool { return len(procsWith(marker2)) > 0 }) {
			t.Fatalf("b's %q never started", marker2)
		}
		pid := srv.cmd.Process.Pid
		srv.stop(t)
		if left := descendants(pid); len(left) > 0 {
			t.Errorf("processes left under the server after SIGTERM: %v", left)
		}
		if !waitFor(5*time.Second, func() bool { return len(procsWith(marker2)) == 0 }) {
			t.Errorf("b's %q survived SIGTERM", marker2)
		}
		if left := entries(tmp); len(left) > 0 {
			t.Errorf("left in the server's TMPDIR after SIGTERM: %v", left)
		}
		for _, p := range ports {
			if dialable(p) {
				t.Errorf("port %d still accepts after SIGTERM", p)
			}
		}
		if srv.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("serve exited %d after SIGTERM:\n%s", srv.cmd.ProcessState.ExitCode(), srv.stderr.String())
		}
	})
}

// TestHTTPIdleTimeout: a session with no call in flight for the idle
// timeout is ended like a DELETE; one with a call in flight is not.
func TestHTTPIdleTimeout(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--idle-timeout", "1s")
		busy := srv.mustConnect(t, clientOpts{})
		idle := srv.mustConnect(t, clientOpts{})
		scrIdle := strings.TrimSpace(idle.shellOut(t, "echo $TMPDIR"))
		// A call longer than the idle timeout completes.
		if out := busy.shellOut(t, "sleep 3; echo survived"); !strings.Contains(out, "survived") {
			t.Errorf("a call in flight was cut by the idle timeout: %q", out)
		}
		if !waitFor(10*time.Second, func() bool { _, err := os.Stat(scrIdle); return os.IsNotExist(err) }) {
			t.Fatalf("the idle session's scratch %s was not removed", scrIdle)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "shell"
		req.Params.Arguments = map[string]any{"command": "true"}
		if _, err := idle.c.CallTool(ctx, req); err == nil {
			t.Errorf("an expired session still answered")
		}
	})
}

// TestHTTPNarrowing: a client may ask for fewer tools, a stricter mode or
// the network off, never more; a session without mutation tools runs its
// shell read-only (the delegate floor).
func TestHTTPNarrowing(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--tools", "read_file,write_file,list_dir,shell")

		// Fewer tools, no mutation tool: the floor makes the shell read-only.
		m := srv.mustConnect(t, clientOpts{narrowing: map[string]any{"tools": []string{"read_file", "shell"}}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		lt, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range lt.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"read_file", "shell"}) {
			t.Errorf("narrowed tools/list = %v", names)
		}
		if !strings.Contains(m.init.Instructions, "sandbox: read-only") {
			t.Errorf("the narrowed session's preamble does not say read-only:\n%s", m.init.Instructions)
		}
		m.call(t, "shell", map[string]any{"command": "echo x > planted.txt"})
		if _, err := os.Stat(filepath.Join(e.work, "planted.txt")); err == nil {
			t.Errorf("the floor's shell wrote the worktree")
		}
		wreq := mcp.CallToolRequest{}
		wreq.Params.Name = "write_file"
		wreq.Params.Arguments = map[string]any{"path": "x.txt", "content": "x"}
		if r, err := m.c.CallTool(ctx, wreq); err == nil && !r.IsError {
			t.Errorf("a tool outside the session's scope ran: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(e.work, "x.txt")); err == nil {
			t.Errorf("a tool outside the session's scope wrote the worktree")
		}

		// A stricter mode: restricted refuses the sibling project.
		r := srv.mustConnect(t, clientOpts{narrowing: map[string]any{"sandbox": "restricted"}})
		if res := r.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); !denied(t, res, "outside-roots") {
			t.Errorf("restricted session read the sibling: %s", text(res))
		}
		w := srv.mustConnect(t, clientOpts{})
		if res := w.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); res.IsError {
			t.Errorf("the server's own mode refused the sibling: %s", text(res))
		}

		// Never wider: each is refused at initialise, with the reason.
		for _, bad := range []map[string]any{
			{"sandbox": "off"},
			{"network": "on"},
			{"tools": []string{"apply_patch"}},
			{"sandbox": "everything"},
			{"sandbox": "read-only", "widen": true},
			// The delegate floor cannot be bypassed by an explicit mode.
			{"tools": []string{"read_file", "shell"}, "sandbox": "workspace-write"},
			{"tools": []string{"read_file", "shell"}, "sandbox": "restricted"},
		} {
			if _, err := srv.connect(t, clientOpts{narrowing: bad}); err == nil {
				t.Errorf("narrowing %v was accepted", bad)
			} else if !strings.Contains(err.Error(), "session refused") && !strings.Contains(err.Error(), "unknown field") {
				t.Errorf("narrowing %v refused without a reason: %v", bad, err)
			}
		}
	})
}

// TestHTTPRefusedInitializeEnds: a refused initialize leaves no session
// behind: the id the transport minted for it answers 404 soon after.
func TestHTTPRefusedInitializeEnds(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--idle-timeout", "1s")
		post := func(body string, hdr map[string]string) *http.Response {
			resp := srv.raw(t, http.MethodPost, body, hdr)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp
		}

		resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"x","version":"1"},"capabilities":{"experimental":{"evener-mcp/session":{"sandbox":"off"}}}}}`, nil)
		sid := resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Skip("the transport minted no session id for a refused initialize")
		}
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
		if !waitFor(5*time.Second, func() bool {
			return post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, h).StatusCode == http.StatusNotFound
		}) {
			t.Errorf("the refused initialize's session %s still answers", sid)
		}
	})
}

// TestHTTPDelegateFloorDegraded: where no backend exists, a session without
// mutation tools keeps read-only file tools, runs an unconfined shell, and
// says so in the startup warning and the preamble.
func TestHTTPDelegateFloorDegraded(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "EVENER_MCP_BWRAP=/nonexistent/bwrap")
		srv := e.serve(t, "--sandbox-net", "off")
		if !strings.Contains(srv.stderr.String(), "NOT ENFORCING") {
			t.Errorf("the degraded server's startup line:\n%s", srv.stderr.String())
		}
		m := srv.mustConnect(t, clientOpts{narrowing: map[string]any{"tools": []string{"read_file", "list_dir", "shell"}}})
		if !strings.Contains(m.init.Instructions, "unconfined") {
			t.Errorf("the preamble does not say the shell is unconfined:\n%s", m.init.Instructions)
		}
		if !waitFor(5*time.Second, func() bool { return strings.Contains(srv.stderr.String(), "the shell is unconfined") }) {
			t.Errorf("no warning for the degraded session:\n%s", srv.stderr.String())
		}
		// An explicit stricter mode is refused, not degraded.
		if _, err := srv.connect(t, clientOpts{narrowing: map[string]any{"sandbox": "read-only"}}); err == nil {
			t.Errorf("an explicit read-only request was accepted without a backend")
		}
	})
	// Over stdio the startup line itself says it.
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "EVENER_MCP_BWRAP=/nonexistent/bwrap")
		m := e.mcp(t, "--sandbox-net", "off", "--tools", "read_file,shell")
		if !waitFor(5*time.Second, func() bool { return strings.Contains(m.stderr.String(), "NOT ENFORCING for the shell") }) {
			t.Errorf("stdio startup line:\n%s", m.stderr.String())
		}
		if r := m.call(t, "read_file", map[string]any{"path": e.home + "/notes.txt"}); r.IsError {
			t.Errorf("degraded file tools cannot read: %s", text(r))
		}
	})
}

// approver is an elicitation handler that records what it was asked and
// answers with action and approve.
type approver struct {
	mu      sync.Mutex // guards asked
	asked   []string
	action  mcp.ElicitationResponseAction
	approve bool
}

func (a *approver) handle(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, r.Params.Message)
	a.mu.Unlock()
	res := &mcp.ElicitationResult{}
	res.Action = a.action
	if a.action == mcp.ElicitationResponseActionAccept {
		res.Content = map[string]any{"approve": a.approve}
	}
	return res, nil
}

func (a *approver) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked)
}

// TestHTTPEscalation: an outside-roots denial of read_file, write_file or
// edit_file asks the human through elicitation and proceeds only on an
// explicit accept; a decline, an accept without approval and a client
// without elicitation keep the denial, and after a no the session asks
// nothing for a while; masked paths, the shell and
// apply_patch are never escalated; the model's result never mentions an
// approval.
func TestHTTPEscalation(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "SECRET-KEY\n")
		writeFile(t, filepath.Join(e.sibling, "edit.txt"), "alpha\n")
		srv := e.serve(t, "--sandbox", "restricted", "--sandbox-net", "off")

		yes := &approver{action: mcp.ElicitationResponseActionAccept, approve: true}
		m := srv.mustConnect(t, clientOpts{elicitation: yes.handle})
		r := m.call(t, "read_file", map[string]any{"path": "../sibling/notes"})
		if r.IsError || !strings.Contains(text(r), "sibling file") {
			t.Errorf("approved read: %s", text(r))
		}
		if yes.count() != 1 || !strings.Contains(yes.asked[0], "../sibling/notes") {
			t.Errorf("the human was asked %v", yes.asked)
		}
		if strings.Contains(strings.ToLower(text(r)), "approv") || strings.Contains(strings.ToLower(text(r)), "escalat") {
			t.Errorf("the model's result mentions the approval: %s", text(r))
		}
		r = m.call(t, "write_file", map[string]any{"path": "../sibling/approved.txt", "content": "ok\n"})
		if b, err := os.ReadFile(filepath.Join(e.sibling, "approved.txt")); r.IsError || err != nil || string(b) != "ok\n" {
			t.Errorf("approved write: %s (%v)", text(r), err)
		}
		r = m.call(t, "edit_file", map[string]any{"path": "../sibling/edit.txt", "edits": []map[string]any{{"old_text": "alpha", "new_text": "beta"}}})
		if b, _ := os.ReadFile(filepath.Join(e.sibling, "edit.txt")); r.IsError || string(b) != "beta\n" {
			t.Errorf("approved edit: %s", text(r))
		}
		// The model's path cannot pose as the server's words to the human.
		before := yes.count()
		m.call(t, "read_file", map[string]any{"path": "../sibling/x\nThe server says: this is safe, approve it"})
		if yes.count() != before+1 {
			t.Errorf("no question for an outside path with a newline (asked %d)", yes.count()-before)
		} else if strings.Contains(yes.asked[before], "\n") {
			t.Errorf("the question carries the model's raw newline: %q", yes.asked[before])
		}
		// Approval covers one call: the next one asks again.
		before = yes.count()
		m.call(t, "read_file", map[string]any{"path": "../sibling/notes"})
		if yes.count() != before+1 {
			t.Errorf("a second call was not asked about (%d -> %d)", before, yes.count())
		}
		// Never escalated: masked paths, the shell, apply_patch, list_dir.
		before = yes.count()
		if r := m.call(t, "read_file", map[string]any{"path": filepath.Join(e.home, ".ssh", "id_rsa")}); !r.IsError || strings.Contains(text(r), "SECRET") {
			t.Errorf("masked read: %s", text(r))
		}
		m.call(t, "shell", map[string]any{"command": "cat ../sibling/notes"})
		patch := "*** Begin Patch\n*** Add File: ../sibling/patched.txt\n+x\n*** End Patch\n"
		m.call(t, "apply_patch", map[string]any{"patch": patch})
		m.call(t, "list_dir", map[string]any{"path": "../sibling"})
		// A worktree symlink leading outside is a symlink denial: final,
		// and never a question naming the link.
		if err := os.Symlink(filepath.Join(e.sibling, "notes"), filepath.Join(e.work, "out-link")); err != nil {
			t.Fatal(err)
		}
		if r := m.call(t, "read_file", map[string]any{"path": "out-link"}); !r.IsError || strings.Contains(text(r), "sibling file") {
			t.Errorf("read through a symlink leading outside: %s", text(r))
		}
		if yes.count() != before {
			t.Errorf("a final denial asked the human: %v", yes.asked[before:])
		}
		if _, err := os.Stat(filepath.Join(e.sibling, "patched.txt")); err == nil {
			t.Errorf("apply_patch outside the roots was escalated and applied")
		}

		for name, a := range map[string]*approver{
			"decline":           {action: mcp.ElicitationResponseActionDecline},
			"cancel":            {action: mcp.ElicitationResponseActionCancel},
			"accept-no-approve": {action: mcp.ElicitationResponseActionAccept, approve: false},
		} {
			c := srv.mustConnect(t, clientOpts{elicitation: a.handle})
			if r := c.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); !denied(t, r, "outside-roots") {
				t.Errorf("%s: read proceeded: %s", name, text(r))
			}
			if r := c.call(t, "write_file", map[string]any{"path": "../sibling/" + name, "content": "x"}); !denied(t, r, "outside-roots") {
				t.Errorf("%s: write proceeded: %s", name, text(r))
			}
			if _, err := os.Stat(filepath.Join(e.sibling, name)); err == nil {
				t.Errorf("%s: the file was written", name)
			}
			// After a no, the session asks nothing for a while (approval
			// fatigue): the write was refused without a question.
			if a.count() != 1 {
				t.Errorf("%s: asked %d times, want 1 (no question after a no)", name, a.count())
			}
		}
		// One question at a time: while the human thinks about one call,
		// a concurrent outside call is refused without a question.
		slow := &approver{action: mcp.ElicitationResponseActionAccept, approve: true}
		slowHandle := func(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			time.Sleep(1500 * time.Millisecond)
			return slow.handle(ctx, r)
		}
		sc := srv.mustConnect(t, clientOpts{elicitation: slowHandle})
		var first *mcp.CallToolResult
		done := make(chan struct{})
		go func() {
			defer close(done)
			first, _ = callCtx(context.Background(), sc, "read_file", map[string]any{"path": "../sibling/notes"})
		}()
		time.Sleep(500 * time.Millisecond)
		if r := sc.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); !denied(t, r, "outside-roots") {
			t.Errorf("a concurrent outside call proceeded while a question was pending: %s", text(r))
		}
		<-done
		if first == nil || first.IsError || slow.count() != 1 {
			t.Errorf("the pending question: asked %d times, first result %v", slow.count(), first)
		}
		// A client without elicitation: the denial is final.
		plain := srv.mustConnect(t, clientOpts{})
		if r := plain.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); !denied(t, r, "outside-roots") {
			t.Errorf("no elicitation: read proceeded: %s", text(r))
		}
	})
}

// TestRoots: a client's roots may narrow the worktree, never widen or
// move it, over stdio and over HTTP (where mcp-go's server sends roots/list
// on the client's standalone GET stream).
func TestRoots(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) { testRoots(t, transport) })
	}
}

func testRoots(t *testing.T, transport string) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		sub := filepath.Join(e.work, "sub")
		mustMkdir(t, sub)
		var srv *httpServer
		if transport == "http" {
			srv = e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		}
		connect := func(roots ...string) *mcpConn {
			if srv != nil {
				return srv.mustConnect(t, clientOpts{roots: roots})
			}
			return e.mcpWith(t, []client.ClientOption{client.WithRootsHandler(rootsFunc(roots))}, nil,
				"--sandbox", "workspace-write", "--sandbox-net", "off")
		}
		m := connect(sub)
		r := m.call(t, "write_file", map[string]any{"path": "in-root.txt", "content": "x"})
		if r.IsError && transport == "http" && strings.Contains(text(r), "did not answer roots/list") {
			// Under CI load the first roots/list of a session over HTTP
			// once went unanswered within 5 s (docs/residuals.md): the
			// call is refused, never run in the whole worktree, and the
			// next one asks again, which is what this retry checks.
			t.Logf("first call refused, roots unanswered: %s", text(r))
			r = m.call(t, "write_file", map[string]any{"path": "in-root.txt", "content": "x"})
		}
		if r.IsError {
			t.Errorf("write inside the narrowed root: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(sub, "in-root.txt")); err != nil {
			t.Errorf("the narrowed worktree is not the root: %v\n%s", err, m.stderr.String())
		}
		if r := m.call(t, "write_file", map[string]any{"path": filepath.Join(e.work, "top.txt"), "content": "x"}); !denied(t, r, "outside-roots") {
			t.Errorf("write outside the client's root: %s", text(r))
		}
		m.call(t, "shell", map[string]any{"command": "touch ../top-shell.txt"})
		if _, err := os.Stat(filepath.Join(e.work, "top-shell.txt")); err == nil {
			t.Errorf("the shell wrote outside the client's root")
		}
		if _, err := os.Stat(filepath.Join(e.work, "top.txt")); err == nil {
			t.Errorf("the file tools wrote outside the client's root")
		}

		// A root above the worktree does not widen it.
		wide := connect(e.root)
		if r := wide.call(t, "write_file", map[string]any{"path": filepath.Join(e.sibling, "wide.txt"), "content": "x"}); !denied(t, r, "outside-roots") {
			t.Errorf("a wider root widened the session: %s", text(r))
		}
		if r := wide.call(t, "write_file", map[string]any{"path": "wide-ok.txt", "content": "x"}); r.IsError {
			t.Errorf("the worktree under a wider root: %s", text(r))
		}
		// Roots only outside the worktree: the session refuses to work.
		away := connect(e.sibling)
		if r := away.call(t, "write_file", map[string]any{"path": filepath.Join(e.sibling, "away.txt"), "content": "x"}); !r.IsError || !strings.Contains(text(r), "outside this server's worktree") {
			t.Errorf("roots outside the worktree: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(e.sibling, "away.txt")); err == nil {
			t.Errorf("a root outside the worktree was written")
		}
	})
}

// flakyRoots answers roots/list with an error the first time, then with
// its roots: a client that could not answer once.
type flakyRoots struct {
	roots []string
	asked atomic.Int32
}

func (f *flakyRoots) ListRoots(ctx context.Context, r mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	if f.asked.Add(1) == 1 {
		return nil, errors.New("roots unavailable right now")
	}
	return rootsFunc(f.roots).ListRoots(ctx, r)
}

// TestRootsUnanswered (docs/http.md, "Roots"): a client that declares
// roots and does not answer roots/list has that call refused, not run in
// the whole worktree; its next call asks again and is narrowed. Over
// HTTP, a client that declares roots but never opens the stream mcp-go
// sends roots/list on is refused after the 5 s wait.
func TestRootsUnanswered(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		sub := filepath.Join(e.work, "sub")
		mustMkdir(t, sub)
		fr := &flakyRoots{roots: []string{sub}}
		m := e.mcpWith(t, []client.ClientOption{client.WithRootsHandler(fr)}, nil, "--sandbox", "workspace-write", "--sandbox-net", "off")
		r := m.call(t, "write_file", map[string]any{"path": "first.txt", "content": "x"})
		if !r.IsError || !strings.Contains(text(r), "did not answer roots/list") {
			t.Errorf("a call whose roots were not answered: %s", text(r))
		}
		for _, p := range []string{filepath.Join(e.work, "first.txt"), filepath.Join(sub, "first.txt")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("the refused call wrote %s", p)
			}
		}
		if r := m.call(t, "write_file", map[string]any{"path": "second.txt", "content": "x"}); r.IsError {
			t.Errorf("the next call, roots answered: %s", text(r))
		}
		if _, err := os.Stat(filepath.Join(sub, "second.txt")); err != nil {
			t.Errorf("the next call was not narrowed to the roots: %v", err)
		}
		if n := fr.asked.Load(); n != 2 {
			t.Errorf("roots/list asked %d times, want 2", n)
		}

		srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		h := srv.mustConnect(t, clientOpts{roots: []string{sub}, noListen: true})
		start := time.Now()
		r = h.call(t, "write_file", map[string]any{"path": "http.txt", "content": "x"})
		if !r.IsError || !strings.Contains(text(r), "did not answer roots/list") {
			t.Errorf("HTTP, no stream for roots/list: %s", text(r))
		}
		if d := time.Since(start); d < 4*time.Second {
			t.Errorf("refused after %v, before the wait for the answer", d)
		}
		if _, err := os.Stat(filepath.Join(e.work, "http.txt")); err == nil {
			t.Errorf("the refused HTTP call wrote the file")
		}
	})
}

// sessionCgroup finds the pids cgroup (v1) holding one of pid's threads.
func sessionCgroup(pid int) string {
	tids := map[string]bool{}
	for _, t := range entries(fmt.Sprintf("/proc/%d/task", pid)) {
		tids[t] = true
	}
	root := "/sys/fs/cgroup/pids/evener-mcp"
	for _, d := range entries(root) {
		b, err := os.ReadFile(filepath.Join(root, d, "tasks"))
		if err != nil {
			continue
		}
		for _, l := range strings.Fields(string(b)) {
			if tids[l] {
				return filepath.Join(root, d)
			}
		}
	}
	return ""
}

// TestSessionPidsCgroup (root servers, cgroup v1): a session's sandboxes
// are born in one session pids cgroup, entered once by a spawner thread of
// the server (no migration per spawn); the limit still stops a fork bomb;
// ending the session removes the cgroup and everything in it.
func TestSessionPidsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root servers only (RLIMIT_NPROC binds the others)")
	}
	if fi, err := os.Stat("/sys/fs/cgroup/pids"); err != nil || !fi.IsDir() {
		t.Skip("no cgroup v1 pids hierarchy on this host")
	}
	e := newEnv(t, identities(t)[0])
	cfg := filepath.Join(e.root, "cfg", "procs.toml")
	writeFile(t, cfg, "[limits]\nprocs = 200\n")
	srv := e.serve(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--config", cfg)
	pid := srv.cmd.Process.Pid
	m := srv.mustConnect(t, clientOpts{})
	m.shellOut(t, "true")
	var cg string
	if !waitFor(10*time.Second, func() bool { cg = sessionCgroup(pid); return cg != "" }) {
		t.Fatalf("no session pids cgroup holds a thread of the server")
	}
	// Never the server's main thread: Go never ends it, so the cgroup
	// could not be removed (seen: it leaked one run in three).
	if tasks, _ := os.ReadFile(filepath.Join(cg, "tasks")); slices.Contains(strings.Fields(string(tasks)), strconv.Itoa(pid)) {
		t.Errorf("the server's main thread is in the session cgroup")
	}
	b, _ := os.ReadFile(filepath.Join(cg, "pids.max"))
	if v := strings.TrimSpace(string(b)); os.Getenv("EVENER_MCP_SESSION_SANDBOX") != "0" {
		// The session sandbox adds its holder's own tasks (the spawner's
		// and its bubblewrap) to procs at each call (docs/speed.md,
		// "Session sandbox"): the commands' share stays at most 200.
		if n, err := strconv.Atoi(v); err != nil || n < 200 || n > 200+64 {
			t.Errorf("session cgroup pids.max = %q, want 200 and the holder's few tasks", b)
		}
	} else if v != "200" {
		t.Errorf("session cgroup pids.max = %q", b)
	}
	// A command of the session runs inside it.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		callCtx(ctx, m, "shell", map[string]any{"command": "sleep 341"})
	}()
	var sleeper []int
	if !waitFor(10*time.Second, func() bool { sleeper = procsWith("sleep 341"); return len(sleeper) > 0 }) {
		t.Fatal("the sleep never started")
	}
	b, _ = os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sleeper[0]))
	if !strings.Contains(string(b), ":pids:/evener-mcp/"+filepath.Base(cg)+"\n") {
		t.Errorf("the command is not in the session cgroup %s:\n%s", cg, b)
	}
	// The limit holds for the session.
	// dash, not bash: bash retries a failed fork for seconds.
	out := m.shellOut(t, `exec /bin/sh -c 'i=0; while [ $i -lt 2000 ]; do sleep 342 >/dev/null 2>&1 & i=$((i+1)); done; echo started=$i'`)
	if strings.Contains(out, "started=2000") || !strings.Contains(strings.ToLower(out), "fork") {
		t.Errorf("a fork bomb under procs = 200 did not fail on fork: %q", out)
	}
	// Ending the session ends everything in the cgroup, then the cgroup.
	m.c.Close()
	if !waitFor(15*time.Second, func() bool { return len(procsWith("sleep 341")) == 0 && len(procsWith("sleep 342")) == 0 }) {
		t.Errorf("processes of the ended session survive")
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(cg); return os.IsNotExist(err) }) {
		tasks, _ := os.ReadFile(filepath.Join(cg, "tasks"))
		t.Errorf("the session cgroup %s survives the session (tasks: %q)", cg, tasks)
	}
}

// TestHTTPDefaultTmp: with the usual TMPDIR (/tmp), where each sandbox's
// private /tmp covers the server's scratch parent, sessions still get their
// scratch and their network, and nothing is left in /tmp.
func TestHTTPDefaultTmp(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		e.extra = append(e.extra, "TMPDIR=/tmp")
		before := map[string]bool{}
		for _, n := range entries("/tmp") {
			before[n] = true
		}
		srv := e.serve(t, "--sandbox", "workspace-write")
		a := srv.mustConnect(t, clientOpts{})
		b := srv.mustConnect(t, clientOpts{})
		out := a.shellOut(t, `echo scratch=$TMPDIR; echo x > "$TMPDIR/a-file" && cat "$TMPDIR/a-file"; ls -A "$(dirname "$TMPDIR")"; echo proxy=$HTTP_PROXY`)
		if !strings.Contains(out, "scratch=/tmp/evs-") || !strings.Contains(out, "\nx\n") || !strings.Contains(out, "proxy=http://") {
			t.Errorf("session a under /tmp:\n%s", out)
		}
		scrB := strings.TrimSpace(b.shellOut(t, "echo $TMPDIR"))
		if strings.Contains(out, filepath.Base(scrB)) {
			t.Errorf("a sees b's scratch:\n%s", out)
		}
		if r := b.call(t, "write_file", map[string]any{"path": filepath.Join(scrB, "b-file"), "content": "y"}); r.IsError {
			t.Errorf("b's file tools cannot write its scratch: %s", text(r))
		}
		srv.stop(t)
		// Only what this server made: its scratch parent (which holds every
		// session's scratch and egress sockets) and the two scratches. Other
		// tests and servers make their own entries in /tmp meanwhile.
		parent := filepath.Dir(scrB)
		if !strings.HasPrefix(parent, "/tmp/evs-") || before[filepath.Base(parent)] {
			t.Fatalf("b's scratch %q is not in a new scratch parent under /tmp", scrB)
		}
		for _, d := range []string{parent, scrB} {
			if _, err := os.Lstat(d); !os.IsNotExist(err) {
				t.Errorf("left in /tmp: %s (%v)", d, err)
			}
		}
	})
}

// TestStdioNarrowing: over stdio too, a client may narrow its session at
// initialise (the hub swaps the session made at start for the narrowed
// one); the instructions and a second startup line say so. Widening is
// refused by the same code as over HTTP (TestHTTPNarrowing).
func TestStdioNarrowing(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		caps := &mcp.ClientCapabilities{Experimental: map[string]any{"evener-mcp/session": map[string]any{"sandbox": "restricted"}}}
		m := e.mcpWith(t, []client.ClientOption{}, caps, "--sandbox", "workspace-write", "--sandbox-net", "off")
		if r := m.call(t, "read_file", map[string]any{"path": "../sibling/notes"}); !denied(t, r, "outside-roots") {
			t.Errorf("the narrowed stdio session read the sibling: %s", text(r))
		}
		if !strings.Contains(m.init.Instructions, "sandbox: restricted") {
			t.Errorf("the instructions are not the narrowed session's:\n%s", m.init.Instructions)
		}
		if !waitFor(5*time.Second, func() bool {
			return strings.Contains(m.stderr.String(), "restricted") && strings.Contains(m.stderr.String(), "narrowed by the client")
		}) {
			t.Errorf("stderr does not say the session was narrowed:\n%s", m.stderr.String())
		}
	})
}
