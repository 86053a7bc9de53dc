package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// parseTools validates names against KnownTools and drops duplicates and
// empty entries (a trailing comma in --tools). An empty result is an error:
// a server with no tools is a mistake, and "all" is spelled by omission.
func parseTools(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		// SERVER__TOOL names a tool of an MCP server behind this one
		// (docs/gateway.md, "MCP servers behind evener-mcp"), known only once it runs.
		if srv, _, ok := strings.Cut(n, "__"); ok && MCPServerName.MatchString(srv) {
			out = appendNew(out, n)
			continue
		}
		if !slices.Contains(KnownTools, n) {
			return nil, fmt.Errorf("unknown tool %q (known: %s)", n, strings.Join(KnownTools, ", "))
		}
		out = appendNew(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty tool list (omit it to publish every tool)")
	}
	return out, nil
}

// checkDomain is a minimal syntax check of an allowlist pattern; egress owns
// the matching semantics. It accepts host names, IP literals, whole-label
// wildcards ("*.example.com", "api.*.example.com") and an optional :port, and
// refuses URLs and wildcards whose fixed suffix is a single label ("*",
// "*.com"), which would open the allowlist to a whole top-level domain.
func checkDomain(d string) error {
	switch {
	case d == "":
		return errors.New("empty pattern")
	case strings.ContainsAny(d, " \t\r\n/\\") || strings.Contains(d, "://"):
		return fmt.Errorf("%q: want a host pattern like example.com, *.example.com or host:port, not a URL", d)
	}
	host, port, err := net.SplitHostPort(d)
	if err != nil { // no port, or a bare IPv6 literal
		host, port = d, ""
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: bad port %q", d, port)
	}
	if net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")) != nil {
		return nil
	}
	labels := strings.Split(host, ".")
	fixed := len(labels) // labels after the last wildcard
	for i, l := range labels {
		switch {
		case l == "*":
			fixed = len(labels) - i - 1
		case l == "":
			return fmt.Errorf("%q: empty label", d)
		case strings.Trim(l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "":
			return fmt.Errorf("%q: bad character in %q (a wildcard must be a whole label)", d, l)
		}
	}
	if fixed < 2 && fixed < len(labels) {
		return fmt.Errorf("%q: too broad (a wildcard needs at least two fixed labels after it, like *.example.com)", d)
	}
	return nil
}
