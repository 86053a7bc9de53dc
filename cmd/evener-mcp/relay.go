package main

import "github.com/evener-dev/evener-mcp/confine"

// The hidden subcommands run inside a sandbox, like runc's init: the
// egress relay (the sandbox's only way to the session's proxies) and the
// SOCKS ProxyCommand for git over SSH. They load no configuration.
func runHidden(sub string, args []string) (int, bool) {
	switch sub {
	case confine.RelaySubcommand:
		return confine.RunRelay(args), true
	case confine.ConnectSubcmd:
		return confine.RunConnect(args), true
	}
	return 0, false
}
