//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evener-dev/evener-mcp/memory"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The memory tools over MCP (docs/memory.md, "Memory"), as root and as the
// unprivileged user.

var allModes = append([]string{"off"}, modes...)

const memoMarker = "MEMO-7f3a-build-uses-make-j4"

// memoryDirs are the state directory's memory roots for e's worktree.
func memoryDirs(t *testing.T, e *env, worktree string) (state, project, personal string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(worktree)
	if err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(e.home, ".local", "state", "evener-mcp")
	return state, filepath.Join(state, "memory", "projects", memory.ProjectKey(real)), filepath.Join(state, "memory", "personal")
}

func listNames(t *testing.T, m *mcpConn) ([]string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tl, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
	}
	b, _ := json.Marshal(tl)
	return names, len(b)
}

func memoryTools(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "memory_") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func isErr(t *testing.T, r *mcp.CallToolResult, want string) {
	t.Helper()
	if !r.IsError || !strings.Contains(text(r), want) {
		t.Errorf("want an error containing %q, got isError=%v %s", want, r.IsError, text(r))
	}
}

// refused: the call is a protocol error (the tool is not published) or
// an error result.
func refused(t *testing.T, m *mcpConn, tool string, args map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	if r, err := m.c.CallTool(ctx, req); err == nil && !r.IsError {
		t.Errorf("%s ran: %s", tool, text(r))
	}
}

func ok(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error: %s", text(r))
	}
	return text(r)
}

// TestMemoryAcrossSessions: in every mode, off included, what one session
// writes the next session of the same project views, searches and edits;
// another project does not see it; the personal scope is shared; the
// index is in the preamble; escapes are refused; the shell (sandboxed
// modes) cannot list or read a memory file; writes are audited without
// content.
func TestMemoryAcrossSessions(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range allModes {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				writeFile(t, filepath.Join(e.home, ".ssh", "id_rsa"), "PRIVATE KEY\n")
				flags := []string{"--sandbox", mode, "--sandbox-net", "off"}
				m1 := e.mcp(t, flags...)
				ok(t, m1.call(t, "memory_write", map[string]any{"path": "notes/build.md", "content": "# Build quirks\n" + memoMarker + "\n"}))
				ok(t, m1.call(t, "memory_write", map[string]any{"scope": "personal", "path": "prefs.md", "content": "Prefers tabs\n"}))
				m1.c.Close()

				m2 := e.mcp(t, flags...)
				if ins := m2.init.Instructions; !strings.Contains(ins, "notes/build.md (") || !strings.Contains(ins, "# Build quirks") || !strings.Contains(ins, "prefs.md") {
					t.Errorf("the preamble lacks the memory index:\n%s", ins)
				}
				if got := ok(t, m2.call(t, "memory_view", map[string]any{"path": "notes/build.md"})); !strings.Contains(got, "     2\t"+memoMarker) {
					t.Errorf("view: %q", got)
				}
				if got := ok(t, m2.call(t, "memory_search", map[string]any{"pattern": "make-j[0-9]"})); !strings.Contains(got, "notes/build.md:2:") {
					t.Errorf("search: %q", got)
				}
				ok(t, m2.call(t, "memory_edit", map[string]any{"path": "notes/build.md", "old_text": "make-j4", "new_text": "make-j8"}))
				isErr(t, m2.call(t, "memory_edit", map[string]any{"path": "notes/build.md", "old_text": "make-j4", "new_text": "x"}), "found 0 times")
				// Escapes, in every mode.
				for _, p := range []string{"..", "../x", "notes/../../x", "/etc/passwd", filepath.Join(e.home, ".ssh", "id_rsa"), "~/.ssh/id_rsa", "~", "", "a\x00b", ".git/config"} {
					for _, tool := range []string{"memory_write", "memory_view", "memory_delete"} {
						args := map[string]any{"path": p, "content": "pwned"}
						if tool != "memory_write" {
							delete(args, "content")
						}
						if r := m2.call(t, tool, args); !r.IsError && p != "" {
							t.Errorf("%s %q accepted: %s", tool, p, text(r))
						} else if p == "" && tool != "memory_view" && !r.IsError {
							t.Errorf("%s of an empty path accepted", tool)
						}
					}
				}
				if b, _ := os.ReadFile(filepath.Join(e.home, ".ssh", "id_rsa")); string(b) != "PRIVATE KEY\n" {
					t.Fatalf("the secret changed: %q", b)
				}
				state, project, _ := memoryDirs(t, e, e.work)
				if _, err := os.Stat(filepath.Join(project, "notes", "build.md")); err != nil {
					t.Fatalf("the project root: %v", err)
				}
				// The shell: no memory file listed or read in the sandboxed
				// modes. With --sandbox off the shell runs with the user's
				// access: there the same command reads it (the control).
				out := m2.shellOut(t, "ls -laR "+state+" 2>&1; cat "+filepath.Join(project, "notes", "build.md")+" 2>&1; grep -r make-j "+state+" 2>&1; true")
				leaked := strings.Contains(out, "make-j") || strings.Contains(out, " build.md\n") || strings.Contains(out, "prefs.md") || strings.Contains(out, "Prefers")
				switch {
				case mode == "off" && !leaked:
					t.Errorf("control: the unconfined shell does not see memory, so the check proves nothing:\n%s", out)
				case mode != "off" && leaked:
					t.Errorf("the shell reads memory:\n%s", out)
				}
				if mode != "off" {
					if r := m2.call(t, "read_file", map[string]any{"path": filepath.Join(project, "notes", "build.md")}); !r.IsError {
						t.Errorf("read_file reads memory: %s", text(r))
					}
				}
				// Audited by base name, never content.
				log, _ := os.ReadFile(filepath.Join(state, "audit.jsonl"))
				if !strings.Contains(string(log), `"tool":"memory_write","mode":"`) || !strings.Contains(string(log), `"path":"build.md"`) || !strings.Contains(string(log), `"tool":"memory_edit"`) {
					t.Errorf("no memory audit records:\n%s", log)
				}
				if strings.Contains(string(log), "make-j") || strings.Contains(string(log), "Prefers tabs") {
					t.Errorf("the audit log holds memory content")
				}
				m2.c.Close()

				// Another project: its own memory; the personal scope is shared.
				m3 := e.mcp(t, append(flags, "--workdir", e.sibling)...)
				if got := ok(t, m3.call(t, "memory_view", map[string]any{})); strings.Contains(got, "build.md") {
					t.Errorf("another project sees this one's memory: %s", got)
				}
				isErr(t, m3.call(t, "memory_view", map[string]any{"path": "notes/build.md"}), "no such memory file")
				if got := ok(t, m3.call(t, "memory_search", map[string]any{"pattern": "make-j", "literal": true})); strings.Contains(got, "build.md") {
					t.Errorf("search crosses projects: %s", got)
				}
				if got := ok(t, m3.call(t, "memory_view", map[string]any{"scope": "personal", "path": "prefs.md"})); !strings.Contains(got, "Prefers tabs") {
					t.Errorf("personal scope not shared: %s", got)
				}
				ok(t, m3.call(t, "memory_delete", map[string]any{"scope": "personal", "path": "prefs.md"}))
			})
		}
	})
}

// TestMemoryPlanted: a symlink and a hard link the host planted inside a
// memory root (to ~/.ssh/id_rsa), a FIFO, and a memory root that is itself
// a symlink, with the sandbox off and on.
func TestMemoryPlanted(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		for _, mode := range []string{"off", "workspace-write"} {
			t.Run(mode, func(t *testing.T) {
				e := newEnv(t, id)
				secret := filepath.Join(e.home, ".ssh", "id_rsa")
				writeFile(t, secret, "PRIVATE KEY\n")
				flags := []string{"--sandbox", mode, "--sandbox-net", "off"}
				m1 := e.mcp(t, flags...)
				ok(t, m1.call(t, "memory_write", map[string]any{"path": "a.md", "content": "a\n"}))
				m1.c.Close()
				_, project, personal := memoryDirs(t, e, e.work)
				must(t, os.Symlink(secret, filepath.Join(project, "link.md")))
				must(t, os.Symlink(filepath.Dir(secret), filepath.Join(project, "sshdir")))
				must(t, os.Link(secret, filepath.Join(project, "hard.md")))
				must(t, syscallMkfifo(filepath.Join(project, "fifo.md")))
				// The personal root becomes a symlink to another directory.
				outside := filepath.Join(e.root, "outside")
				mustMkdir(t, outside)
				must(t, os.RemoveAll(personal))
				must(t, os.Symlink(outside, personal))

				m := e.mcp(t, flags...)
				if strings.Contains(m.init.Instructions, "PRIVATE") {
					t.Errorf("the preamble shows the secret")
				}
				for _, p := range []string{"link.md", "hard.md", "sshdir/id_rsa", "fifo.md"} {
					r := m.call(t, "memory_view", map[string]any{"path": p})
					if !r.IsError || strings.Contains(text(r), "PRIVATE") {
						t.Errorf("memory_view %s: %s", p, text(r))
					}
					if r := m.call(t, "memory_edit", map[string]any{"path": p, "old_text": "PRIVATE", "new_text": "x"}); !r.IsError {
						t.Errorf("memory_edit %s accepted", p)
					}
				}
				if r := m.call(t, "memory_write", map[string]any{"path": "sshdir/id_rsa", "content": "pwned"}); !r.IsError {
					t.Errorf("write through a planted directory symlink: %s", text(r))
				}
				if got := text(m.call(t, "memory_search", map[string]any{"pattern": "PRIVATE", "literal": true})); strings.Contains(got, "PRIVATE") {
					t.Errorf("search finds the secret: %s", got)
				}
				if got := text(m.call(t, "memory_view", map[string]any{})); strings.Contains(got, "PRIVATE") {
					t.Errorf("the listing shows the secret: %s", got)
				}
				if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY\n" {
					t.Fatalf("the secret changed: %q", b)
				}
				isErr(t, m.call(t, "memory_view", map[string]any{"path": "link.md"}), `read refused in memory: "link.md" (rule: symlink)`)
				isErr(t, m.call(t, "memory_view", map[string]any{"path": "hard.md"}), "rule: denylist")
				state, _, _ := memoryDirs(t, e, e.work)
				if log, _ := os.ReadFile(filepath.Join(state, "audit.jsonl")); !strings.Contains(string(log), `"tool":"memory_view","mode":"`+mode+`","decision":"denied","rule":"symlink","path":"link.md"`) {
					t.Errorf("the refusals are not audited:\n%s", log)
				}
				isErr(t, m.call(t, "memory_write", map[string]any{"scope": "personal", "path": "x.md", "content": "x"}), "symlink")
				if es, _ := os.ReadDir(outside); len(es) != 0 {
					t.Errorf("written through the symlinked root: %v", es)
				}
				// The project scope still works.
				ok(t, m.call(t, "memory_view", map[string]any{"path": "a.md"}))
			})
		}
	})
}

// TestMemorySwapRace: a memory subdirectory swapped for a symlink to
// ~/.ssh during 1000 writes (the same race as TestMCPSwapRace for the file
// tools) never writes or reads outside the root, with the sandbox off.
func TestMemorySwapRace(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		seedSecrets(t, e)
		m := e.mcp(t, "--sandbox", "off", "--sandbox-net", "off")
		ok(t, m.call(t, "memory_write", map[string]any{"path": "d/id_rsa", "content": "harmless\n"}))
		_, project, _ := memoryDirs(t, e, e.work)
		d := filepath.Join(project, "d")
		link := filepath.Join(project, "d-link")
		must(t, os.Symlink(filepath.Join(e.home, ".ssh"), link))
		before, _ := os.ReadDir(filepath.Join(e.home, ".ssh"))

		stopSwaps := swapRace(t, d, link)
		deadline := time.Now().Add(30 * time.Second)
		writes, landed := 0, 0
		for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
			if r := m.call(t, "memory_write", map[string]any{"path": "d/planted", "content": "x"}); !r.IsError {
				landed++
			}
			writes++
			if i%10 == 0 {
				if r := m.call(t, "memory_view", map[string]any{"path": "d/id_rsa"}); strings.Contains(text(r), "SECRET") {
					t.Fatalf("write %d: memory_view read the secret through the swapped directory", i)
				}
			}
		}
		swaps := stopSwaps()
		after, _ := os.ReadDir(filepath.Join(e.home, ".ssh"))
		if len(after) != len(before) {
			t.Errorf("the secret directory changed: %d entries before, %d after", len(before), len(after))
		}
		if _, err := os.Lstat(filepath.Join(e.home, ".ssh", "planted")); err == nil {
			t.Errorf("a write landed in ~/.ssh")
		}
		t.Logf("%d writes (%d landed in the root, the rest refused) against %d swaps", writes, landed, swaps)
		if swaps < 100 || writes < 100 || landed == 0 || landed == writes {
			t.Errorf("only %d swaps and %d writes: the race was not exercised", swaps, writes)
		}
	})
}

// TestMemoryWhoGetsWhat: a read-only session writes memory; a delegate
// (by --tools or by initialize-time narrowing) gets memory_view and
// memory_search only, whatever it asks for; --disable-memory and a
// project file's memory = false publish none and add no guidance; the
// default tools/list stays under 20 KB.
func TestMemoryWhoGetsWhat(t *testing.T) {
	all := []string{"memory_delete", "memory_edit", "memory_search", "memory_view", "memory_write"}
	readers := []string{"memory_search", "memory_view"}
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		def := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		names, size := listNames(t, def)
		if got := memoryTools(names); !slices.Equal(got, all) {
			t.Errorf("default session: %v", got)
		}
		t.Logf("tools/list: %d bytes of JSON", size)
		if size > 20<<10 {
			t.Errorf("tools/list is %d bytes, over 20 KB", size)
		}
		def.c.Close()

		ro := e.mcp(t, "--sandbox", "read-only", "--sandbox-net", "off")
		if names, _ := listNames(t, ro); !slices.Equal(memoryTools(names), all) {
			t.Errorf("read-only session: %v", memoryTools(names))
		}
		ok(t, ro.call(t, "memory_write", map[string]any{"path": "ro.md", "content": "written by a read-only session\n"}))
		if r := ro.call(t, "write_file", map[string]any{"path": "x.txt", "content": "x"}); !r.IsError {
			t.Errorf("the read-only session wrote the worktree")
		}
		ro.c.Close()

		del := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--tools", "read_file,grep,memory_view,memory_write,memory_search,memory_delete")
		if names, _ := listNames(t, del); !slices.Equal(memoryTools(names), readers) {
			t.Errorf("--tools delegate: %v", memoryTools(names))
		}
		if !strings.Contains(del.init.Instructions, "may read memory, not change it") || !strings.Contains(del.init.Instructions, "ro.md") {
			t.Errorf("delegate preamble:\n%s", del.init.Instructions)
		}
		if got := ok(t, del.call(t, "memory_view", map[string]any{"path": "ro.md"})); !strings.Contains(got, "read-only session") {
			t.Errorf("delegate view: %s", got)
		}
		ok(t, del.call(t, "memory_search", map[string]any{"pattern": "read-only"}))
		for _, tool := range []string{"memory_write", "memory_delete", "memory_edit"} {
			refused(t, del, tool, map[string]any{"path": "ro.md", "content": "x", "old_text": "read", "new_text": "x"})
		}
		del.c.Close()

		caps := &mcp.ClientCapabilities{Experimental: map[string]any{"evener-mcp/session": map[string]any{
			"tools": []string{"read_file", "memory_view", "memory_write", "memory_edit", "memory_search"}}}}
		nar := e.mcpWith(t, []client.ClientOption{}, caps, "--sandbox", "workspace-write", "--sandbox-net", "off")
		if names, _ := listNames(t, nar); !slices.Equal(memoryTools(names), readers) {
			t.Errorf("narrowed delegate: %v", memoryTools(names))
		}
		refused(t, nar, "memory_write", map[string]any{"path": "ro.md", "content": "x"})
		nar.c.Close()

		off := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off", "--disable-memory")
		if names, _ := listNames(t, off); len(memoryTools(names)) != 0 {
			t.Errorf("--disable-memory publishes %v", memoryTools(names))
		}
		if strings.Contains(off.init.Instructions, "memory") {
			t.Errorf("--disable-memory adds guidance:\n%s", off.init.Instructions)
		}
		refused(t, off, "memory_view", map[string]any{})
		off.c.Close()

		writeFile(t, filepath.Join(e.work, ".evener", "mcp.toml"), "memory = false\n")
		pf := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		if names, _ := listNames(t, pf); len(memoryTools(names)) != 0 {
			t.Errorf("project memory = false publishes %v", memoryTools(names))
		}
		pf.c.Close()
		writeFile(t, filepath.Join(e.work, ".evener", "mcp.toml"), "memory = true\n")
		r := e.runIn(t, e.work, nil, "--sandbox", "workspace-write", "--disable-memory")
		if !strings.Contains(r.stderr, "the project file may only turn it off") {
			t.Errorf("project memory = true past --disable-memory: %s", r)
		}
	})
}

// TestMemoryCaps: a file over the cap, a scope over its total and over its
// file count are refused with clear errors; nothing is half-written.
func TestMemoryCaps(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		lim := memory.DefaultLimits
		isErr(t, m.call(t, "memory_write", map[string]any{"path": "big.md", "content": strings.Repeat("x", int(lim.FileBytes)+1)}), "memory file cap")
		chunk := strings.Repeat("y", int(lim.FileBytes))
		n := int(lim.ScopeBytes / lim.FileBytes)
		for i := 0; i < n; i++ {
			ok(t, m.call(t, "memory_write", map[string]any{"path": "big/" + string(rune('a'+i)) + ".md", "content": chunk}))
		}
		isErr(t, m.call(t, "memory_write", map[string]any{"path": "one-more.md", "content": chunk}), "over its")
		// Replacing a file with a shorter one is always possible.
		ok(t, m.call(t, "memory_write", map[string]any{"path": "big/a.md", "content": "short\n"}))
		for i := 0; i < n; i++ {
			ok(t, m.call(t, "memory_delete", map[string]any{"path": "big/" + string(rune('a'+i)) + ".md"}))
		}
		for i := 0; i < lim.Files; i++ {
			ok(t, m.call(t, "memory_write", map[string]any{"path": "n/" + strings.Repeat("f", 1+i%50) + string(rune('A'+i/50)) + ".md", "content": "n\n"}))
		}
		isErr(t, m.call(t, "memory_write", map[string]any{"path": "n/last.md", "content": "n\n"}), "its cap")
		if got := text(m.call(t, "memory_view", map[string]any{})); !strings.Contains(got, "200 files") {
			t.Errorf("listing after the count cap: %.200s", got)
		}
		// The next session's preamble indexes at most 20 files per scope.
		m.c.Close()
		next := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		ins := next.init.Instructions
		if !strings.Contains(ins, "project: 200 files") || !strings.Contains(ins, "and 180 more (memory_view)") || strings.Count(ins, "(2 bytes)") != 20 {
			t.Errorf("the preamble's memory index is not bounded:\n%s", ins)
		}
	})
}

// TestMemoryDeepDeletes: 80 write/delete pairs of the deepest path in the
// personal scope (about 70 wedged every project's personal memory: the
// directories stayed and counted against the walk's bound) leave the root
// empty; view, write and search keep working, from another project too;
// memory_delete removes an empty directory (a chain an older build left)
// and refuses one that holds a file.
func TestMemoryDeepDeletes(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		flags := []string{"--sandbox", "workspace-write", "--sandbox-net", "off"}
		m := e.mcp(t, flags...)
		for i := 0; i < 80; i++ {
			p := fmt.Sprintf("x%d/a/b/c/d/e/f/g.md", i)
			ok(t, m.call(t, "memory_write", map[string]any{"scope": "personal", "path": p, "content": "note\n"}))
			ok(t, m.call(t, "memory_delete", map[string]any{"scope": "personal", "path": p}))
		}
		_, project, personal := memoryDirs(t, e, e.work)
		if es, err := os.ReadDir(personal); err != nil || len(es) != 0 {
			t.Fatalf("the personal root after the deletes: %d entries, %v", len(es), err)
		}
		ok(t, m.call(t, "memory_write", map[string]any{"scope": "personal", "path": "prefs.md", "content": "tabs\n"}))
		m.c.Close()

		// A chain of empty directories as an older build left it, and a
		// directory that holds a file.
		mustMkdir(t, filepath.Join(project, "old", "a", "b", "c"))
		writeFile(t, filepath.Join(project, "kept", "k.md"), "kept\n")
		m2 := e.mcp(t, append(flags, "--workdir", e.sibling)...)
		if got := ok(t, m2.call(t, "memory_search", map[string]any{"scope": "personal", "pattern": "tabs", "literal": true})); !strings.Contains(got, "prefs.md:1:tabs") {
			t.Errorf("personal search from another project: %s", got)
		}
		ok(t, m2.call(t, "memory_view", map[string]any{"scope": "personal"}))
		m2.c.Close()
		m3 := e.mcp(t, flags...)
		ok(t, m3.call(t, "memory_delete", map[string]any{"path": "old/a/b/c"}))
		if _, err := os.Lstat(filepath.Join(project, "old")); !os.IsNotExist(err) {
			t.Errorf("the emptied chain is still there: %v", err)
		}
		isErr(t, m3.call(t, "memory_delete", map[string]any{"path": "kept"}), "not empty")
		if got := ok(t, m3.call(t, "memory_view", map[string]any{})); !strings.Contains(got, "kept/k.md") {
			t.Errorf("listing: %s", got)
		}
	})
}
