package main

import "github.com/evener-dev/evener-mcp/confine"

// runHidden runs the hidden helpers (confine.RunHidden) that run inside
// or beside a sandbox; they load no configuration.
func runHidden(sub string, args []string) (int, bool) { return confine.RunHidden(sub, args) }
