// Command evener-mcp-inside carries only the helpers that evener-mcp starts
// inside a sandbox: the session sandbox's spawner and slots, the egress
// relay and its connect helper, the loopback holder and the Landlock helper
// (confine.RunHidden). It loads no configuration and links nothing but the
// confine package, so it starts in a fraction of what evener-mcp takes: a
// session sandbox starts one slot per call, and on a machine where every
// page fault is expensive that start was most of a call's CPU
// (docs/speed.md, "Session sandbox"). Without it beside them, evener-mcp and
// evener-mcp-server run the same helpers from evener-mcp, more slowly.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"fmt"
	"os"

	"github.com/evener-dev/evener-mcp/confine"
)

func main() {
	if len(os.Args) > 1 {
		if code, ok := confine.RunHidden(os.Args[1], os.Args[2:]); ok {
			os.Exit(code)
		}
	}
	fmt.Fprintln(os.Stderr, "evener-mcp-inside runs only the helpers evener-mcp starts inside a sandbox; run evener-mcp instead")
	os.Exit(2)
}
