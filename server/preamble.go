package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/confine"
)

// probeTimeout bounds each start-up probe: a deadline, not a wait.
const probeTimeout = 10 * time.Second

// Preamble is the capability preamble (README.md, "Use it from Claude Code"): what the session is told
// about its own box, every line read from the resolved policy or measured
// through the session's own launcher, so it measures what a command meets.
// A probe that cannot run renders "unprobed", never a guess.
func Preamble(ctx context.Context, sess *confine.Launcher, allowDomains []string, degradedShell string) string {
	p := sess.Policy()
	var gitLine, pathLine string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		gitLine = probe(ctx, sess, "git config --list >/dev/null 2>&1; echo $?", func(out string) string {
			return "`git config --list` exited " + out
		})
	}()
	go func() {
		defer wg.Done()
		pathLine = probe(ctx, sess, `for t in go node rg; do if command -v "$t" >/dev/null 2>&1; then printf '%s ' "$t"; fi; done; echo`, func(out string) string {
			if out == "" {
				return "none of go, node, rg is on PATH"
			}
			return "on PATH: " + strings.Join(strings.Fields(out), ", ") + " (of go, node, rg)"
		})
	}()
	wg.Wait()

	var b strings.Builder
	fmt.Fprintf(&b, "You are working inside evener-mcp's sandbox. These lines describe the box you are in; they are read from the enforced policy.\n")
	if p.Mode() == confine.ModeOff {
		if d := p.Degraded(); d != "" {
			fmt.Fprintf(&b, "- sandbox: NOT ENFORCING (no usable backend: %s). Commands run with the user's full access.\n", d)
		} else {
			fmt.Fprintf(&b, "- sandbox: off. Commands and file tools run with the user's full access.\n")
		}
	} else {
		mode := string(p.Mode())
		if p.WritesBlocked() {
			mode += " with writes blocked"
		}
		fmt.Fprintf(&b, "- sandbox: %s, enforced by %s for every command; the file tools apply the same boundary.\n", mode, p.Backend())
		if gaps := p.LandlockGaps(); len(gaps) > 0 {
			fmt.Fprintf(&b, "- weaker backend (landlock: no namespaces): NOT given: %s.\n", strings.Join(gaps, "; "))
		}
		switch p.Network() {
		case confine.NetworkOff:
			fmt.Fprintf(&b, "- network: off. Commands have no network at all, loopback included.\n")
		default:
			fmt.Fprintf(&b, "- network: on, only through this session's proxies (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY are set; git over SSH goes through SOCKS). They allow well-known source hosts and model providers, plus the entries below; everything else, loopback and private addresses included, is refused with HTTP 403 (SOCKS reply 2); 502/504 (SOCKS 4/5/6) means the destination is allowed but could not be reached. No direct route, no DNS.\n")
		}
		if len(allowDomains) > 0 {
			fmt.Fprintf(&b, "- allow-domain entries: %s\n", strings.Join(allowDomains, ", "))
		}
		fmt.Fprintf(&b, "- writable: %s.\n", writableSummary(p))
		fmt.Fprintf(&b, "- masked paths: %d (credentials, shell histories, pseudo-filesystems); reads of them are refused.\n", len(p.Denylist())+len(confine.PseudoDenylist))
		if p.Backend() == "landlock" {
			fmt.Fprintf(&b, "- git: commits work; .git/config, hooks, commondir and gitdir are not read-only under this backend: what a command changes there is set aside and put back when it ends.\n")
		} else {
			fmt.Fprintf(&b, "- git: commits work; .git/config, hooks, commondir and gitdir are read-only.\n")
		}
		if line := protectedSummary(p); line != "" {
			fmt.Fprintf(&b, "- %s\n", line)
		}
		if n := len(p.StateRW()); n > 0 {
			fmt.Fprintf(&b, "- runner state: %d director%s outside your roots, writable in every mode (an agent host's own state).\n", n, plural(n, "y", "ies"))
		}
	}
	fmt.Fprintf(&b, "- scratch directory: %s (also $TMPDIR and $EVENER_SCRATCH_DIR); it is removed when the session ends.\n", sess.Scratch())
	fmt.Fprintf(&b, "- caches: %s", p.Cache())
	if p.Cache() == confine.CachePrivate {
		env := confine.CacheEnv(sess.Scratch(), p.Mode(), "")
		fmt.Fprintf(&b, " (cold, per session): GOCACHE=%s, GOMODCACHE=%s", env["GOCACHE"], env["GOMODCACHE"])
	}
	b.WriteString(".\n")
	if degradedShell != "" {
		fmt.Fprintf(&b, "- WARNING: %s\n", degradedShell)
	}
	fmt.Fprintf(&b, "- probe: %s.\n", gitLine)
	fmt.Fprintf(&b, "- probe: %s.\n", pathLine)
	return b.String()
}

func writableSummary(p *confine.Policy) string {
	switch p.Mode() {
	case confine.ModeReadOnly:
		return "only the scratch directory (read-only mode)"
	case confine.ModeRestricted:
		if p.WritesBlocked() {
			return "only the scratch directory (no tool here changes files, so writes are blocked); reads are limited to the worktree"
		}
		return "the worktree and the scratch directory; reads are limited to the worktree"
	}
	n := len(p.AddDirs())
	if n == 0 {
		return "the worktree, the scratch directory and private caches"
	}
	return fmt.Sprintf("the worktree, %d extra root(s), the scratch directory and private caches", n)
}

// protectedSummary names the protected paths inside the worktree
// (worktree-relative) and counts the others, "" when there are none.
func protectedSummary(p *confine.Policy) string {
	in, out := p.ProtectedInWorktree()
	if len(in)+out == 0 {
		return ""
	}
	s := "protected (never writable, by the file tools or any command; renaming them or a directory above them fails too): "
	if len(in) > 0 {
		s += strings.Join(in, ", ")
	}
	if out > 0 {
		if len(in) > 0 {
			s += " and "
		}
		s += fmt.Sprintf("%d path(s) outside the worktree", out)
	}
	return s + "."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// probe runs script through the session's launcher and renders its output,
// or "unprobed" with the reason.
func probe(ctx context.Context, sess *confine.Launcher, script string, render func(string) string) string {
	var out bytes.Buffer
	res, err := sess.Run(ctx, confine.Command{Args: []string{"sh", "-c", script}, Stdout: &out, Timeout: probeTimeout})
	switch {
	case err != nil:
		return "unprobed (" + err.Error() + ")"
	case res.TimedOut:
		return "unprobed (timed out)"
	case res.ExitCode != 0:
		return fmt.Sprintf("unprobed (probe exited %d)", res.ExitCode)
	}
	return render(strings.TrimSpace(out.String()))
}
