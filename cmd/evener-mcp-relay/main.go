// Command evener-mcp-relay is the egress relay that runs inside each
// sandbox with the network on: it listens on the sandbox's loopback and
// relays to the session's proxies through the bridged Unix sockets, then
// runs the command. It is evener-mcp's own hidden helper built on its own:
// evener-mcp links a JSON Schema library whose package initialisation
// compiles its metaschemas (about 6 ms at every start), a cost each
// sandboxed command would otherwise pay. When this binary is not installed
// beside evener-mcp, evener-mcp re-executes itself instead.
package main

import (
	"fmt"
	"os"

	"github.com/evener-dev/evener-mcp/confine"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "evener-mcp-relay: internal helper of evener-mcp")
		os.Exit(2)
	}
	switch os.Args[1] {
	case confine.RelaySubcommand:
		os.Exit(confine.RunRelay(os.Args[2:]))
	case confine.ConnectSubcmd:
		os.Exit(confine.RunConnect(os.Args[2:]))
	}
	fmt.Fprintf(os.Stderr, "evener-mcp-relay: unknown helper %q\n", os.Args[1])
	os.Exit(2)
}
