package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/evener-dev/evener-mcp/memory"
	"github.com/evener-dev/evener-mcp/tools"
)

// memoryStore is a session's memory (docs/memory.md, "Memory").
type memoryStore = memory.Store

// openMemory opens the session's memory when it publishes a memory tool
// (toolset.go settles which: none without memory, only those that read
// for a session with no tool that changes files). The project scope is the
// server's worktree's (before any narrowing by a client's roots), so every
// session of one worktree finds the same memory. An error means no memory
// tool can be offered.
func (s *Session) openMemory() error {
	if !slices.ContainsFunc(s.Tools, func(t string) bool { f, _ := tools.FactsOf(t); return f.Memory != "" }) {
		return nil
	}
	st, err := memory.Open(s.h.o.Config.StateDir, s.h.o.Policy.Workdir(), s.sb.Policy, memory.DefaultLimits)
	if err != nil {
		return err
	}
	for _, e := range st.Unavailable() {
		s.notices = append(s.notices, e.Error())
	}
	s.memory = st
	return nil
}

// Bounds of the preamble's memory index.
const (
	memoryIndexFiles = 20
	memoryIndexBytes = 3 << 10
)

// memoryPreamble is the preamble's memory section: what memory is for and
// an index of each scope (file names, sizes, first lines), bounded; ""
// when the session publishes no memory tool.
func (s *Session) memoryPreamble() string {
	if s.memory == nil {
		return ""
	}
	var mine []string
	for _, t := range s.Tools {
		if f, ok := tools.FactsOf(t); ok && f.Memory != "" {
			mine = append(mine, t)
		}
	}
	if len(mine) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- memory (%s): notes kept between sessions, outside the worktree: scope project (the default; this worktree only) or personal (yours, in every project). Keep what would help a later session: build and test quirks, conventions, the user's preferences. Never secrets.", strings.Join(mine, ", "))
	if !slices.Contains(mine, "memory_write") {
		b.WriteString(" This session may read memory, not change it.")
	}
	b.WriteByte('\n')
	for _, sc := range []memory.Scope{memory.Project, memory.Personal} {
		r, err := s.memory.Root(sc)
		if err != nil {
			fmt.Fprintf(&b, "  - %s: unavailable (%v)\n", sc, err)
			continue
		}
		es, err := r.List("", true)
		if err != nil {
			fmt.Fprintf(&b, "  - %s: not listed (%v)\n", sc, err)
			continue
		}
		fmt.Fprintf(&b, "  - %s: %s\n", sc, files(len(es)))
		start := b.Len()
		for i, e := range es {
			line := fmt.Sprintf("    - %s (%d bytes): %s\n", e.Path, e.Size, e.FirstLine)
			if i >= memoryIndexFiles || b.Len()-start+len(line) > memoryIndexBytes {
				fmt.Fprintf(&b, "    - and %d more (memory_view)\n", len(es)-i)
				break
			}
			b.WriteString(line)
		}
	}
	return b.String()
}

// files is "1 file", "2 files".
func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
