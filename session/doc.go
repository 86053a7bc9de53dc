// Package session is one sandbox session, with no MCP in it: the policy a
// session runs under (the server's, narrowed by the client and by the
// delegate floor), its scratch and launcher, its race-safe file layer, its
// egress outlet, its audit stream, and the bound on its concurrent process
// calls. `evener-mcp exec` opens one for a single command; the MCP server
// (package server) opens one per MCP session and keeps only MCP state
// beside it (docs/architecture.md).
//
// Resolve is the pure part, table-tested without a server or bubblewrap:
// from the server's policy, whether the session's tools change files, and
// what the client asked, to the session's policy. Open builds the rest;
// NarrowWorkdir and Close are its only other changes of state.
package session
