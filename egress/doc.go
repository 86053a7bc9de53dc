// Package egress decides, for every outbound connection a sandboxed command
// attempts, whether it may go out and to which checked addresses, and runs
// the per-session proxies that enforce it. It imports nothing else of this
// module; the rules it enforces are in the docs/network.md, "The network".
//
// The pipeline, with the file for each stage:
//
//  1. Canonicalisation (canon.go): every host the decision compares (an
//     allowlist entry, a fixed-deny-list name, the host a client asks for)
//     is first put into one canonical spelling (canonicalHost), so no two
//     spellings of one destination get two answers.
//  2. The allowlist and the decision (allowlist.go): Pattern is one entry
//     (`*.x.com` every subdomain but not the apex, `a.*.x.com` exactly one
//     label, a port or the web ports 80 and 443), Allowlist is a session's
//     entries, and Allowlist.Decide says for a host and port: refused by the
//     fixed deny list (cloud metadata, link-local, localhost), refused as
//     not allowed or as a private address, or allowed with the resolved
//     addresses it checked, the only ones to dial. The baseline
//     (baseline.go) is the embedded allowlist every session starts from.
//  3. The proxies (proxy.go for what they share: startProxies, proxyPair,
//     the Violation a refusal reports, dialing a checked address): an HTTP
//     proxy for CONNECT tunnels and plain-HTTP requests (http.go) and a
//     SOCKS5 proxy (socks.go), each on 127.0.0.1 with random credentials.
//     Each request is decided on its own; an allowed one is dialed at an
//     address the decision checked, never by name.
//  4. The bridge (bridge.go): socketBridge exposes the two proxies as Unix
//     sockets in a private directory, which confine's launcher binds into
//     a sandbox whose network namespace has no other way out (confine's
//     relay helpers carry the sandbox's loopback to them).
//  5. Outlet (outlet.go) is one sandbox session's egress, the whole of the
//     above: OpenOutlet builds the allowlist (baseline plus the configured
//     entries, with names pinned by a hosts file: HostsEnv), starts the
//     proxies and the bridge; Outlet.Bridge is what the launcher needs,
//     Outlet.Between the refusals recorded while a command ran, and Close
//     ends them all.
package egress
