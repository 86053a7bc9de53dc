package server

import (
	"runtime"
	"sync"
)

// procs raises the runtime's GOMAXPROCS while a tool that computes runs
// (tools.Facts.Computes) and restores it when the last one ends. A stdio
// server keeps a scheduler slot fewer than CPUs, so that its hand-offs do
// not wake threads that take the CPU from the client and the servers
// behind it (docs/gateway.md, "MCP servers behind evener-mcp", speed); grep and
// glob are the server's own work across many files and want every CPU.
type procs struct {
	mu   sync.Mutex // guards n, base
	n    int        // the computing calls in flight
	base int        // GOMAXPROCS before the first of them
	full int        // GOMAXPROCS while any runs; 0: never changed
}

func newProcs(full int) *procs {
	if full <= runtime.GOMAXPROCS(0) {
		full = 0
	}
	return &procs{full: full}
}

// hold raises GOMAXPROCS for one call; the returned func ends it.
func (p *procs) hold() func() {
	if p == nil || p.full == 0 {
		return func() {}
	}
	p.mu.Lock()
	if p.n == 0 {
		p.base = runtime.GOMAXPROCS(p.full)
	}
	p.n++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.n--
		if p.n == 0 {
			runtime.GOMAXPROCS(p.base)
		}
	}
}
