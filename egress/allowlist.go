package egress

// This file is the decision layer: allowlist entries (Pattern), the fixed
// deny list, the address classes, and Decide, which the HTTP and SOCKS
// proxies call for every connection and every request.
//
// Decide, in order:
//
//  1. port outside 1-65535                       -> deny "invalid-port"
//  2. host that does not canonicalise            -> deny "invalid-host"
//  3. the fixed deny list (names and addresses)  -> deny "deny-list:<what>"
//  4. IP literal: an IP entry must match; a non-public address only through
//     an entry naming that address WITH this port -> deny "private-address"
//  5. name: no entry matches                     -> deny "not-allowed" (no DNS)
//     an entry matches the name, not the port    -> deny "port-not-allowed" (no DNS)
//  6. resolve (ctx-bounded); lookup failure       -> "resolve-failed": not a
//     policy refusal (the destination is allowed), so the proxies answer it
//     as a gateway failure (HTTP 502, SOCKS "host unreachable") and report
//     no violation; see Decision.lookupFailed
//  7. drop every resolved address on the fixed deny list, and every
//     non-public one not named literally with this port; none left
//                                                 -> deny "private-address"
//  8. allow; Addrs are the surviving addresses, the only ones to dial.
//
// The fixed deny list (always refused, whatever the allowlist says, and
// refused as allowlist entries too):
//
//   - cloud metadata addresses: 169.254.169.254 (AWS, GCP, Azure, OpenStack,
//     Oracle, DigitalOcean, ...), 169.254.170.2 and 169.254.170.23 (ECS/EKS
//     credentials), fd00:ec2::/32 (AWS IPv6 IMDS, DNS, NTP),
//     100.100.100.200 (Alibaba), 168.63.129.16 (Azure WireServer),
//     192.0.0.192 (Oracle legacy);
//   - cloud metadata names, and their subdomains: metadata,
//     metadata.google.internal, metadata.goog, metadata.azure.com,
//     instance-data, instance-data.ec2.internal, metadata.tencentyun.com,
//     metadata.platformequinix.com, metadata.packet.net;
//   - localhost and *.localhost (RFC 6761: always loopback);
//   - link-local 169.254.0.0/16 and fe80::/10, "this network" 0.0.0.0/8,
//     the unspecified ::, the deprecated IPv4-compatible ::/96 (other than
//     ::1), multicast 224.0.0.0/4 and ff00::/8, broadcast 255.255.255.255 and
//     the reserved 240.0.0.0/4;
//   - the same addresses embedded in NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
//     form. IPv4-mapped forms (::ffff:a.b.c.d) are plain IPv4 after
//     canonicalisation.
//
// Non-public addresses (reachable only through an entry that names the
// address literally with its port, "127.0.0.1:8080"): loopback 127.0.0.0/8
// and ::1, RFC 1918, CGNAT 100.64.0.0/10, 192.0.0.0/24, the documentation and
// benchmarking ranges, ULA fc00::/7, site-local fec0::/10, discard 100::/64,
// Teredo 2001::/32, documentation 2001:db8::/32 and 3fff::/20, local-use
// NAT64 64:ff9b:1::/48, and NAT64/6to4 forms embedding a non-public IPv4.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"
)

// Deny reason codes (Decision.Rule when !Allow).
const (
	ruleInvalidHost   = "invalid-host"
	ruleInvalidPort   = "invalid-port"
	ruleNotAllowed    = "not-allowed"
	rulePortNotAllow  = "port-not-allowed"
	rulePrivate       = "private-address"
	ruleResolveFailed = "resolve-failed"
	ruleDenyPrefix    = "deny-list:"
)

// defaultResolveTimeout bounds a lookup when the caller's context has no
// deadline of its own.
const defaultResolveTimeout = 10 * time.Second

type patternKind uint8

const (
	kindExact   patternKind = iota + 1 // example.com
	kindLeading                        // *.example.com
	kindMiddle                         // bedrock.*.amazonaws.com
	kindIP                             // 1.2.3.4, [2001:db8::1]:8080
)

// Pattern is one allowlist entry. The zero Pattern matches nothing. Patterns
// are comparable with ==; two entries that mean the same are equal.
type Pattern struct {
	kind   patternKind
	name   string     // kindExact: the name; kindMiddle: the labels before '*'
	suffix string     // kindLeading, kindMiddle: the labels after '*'
	addr   netip.Addr // kindIP
	port   int        // 0: the web ports 80 and 443 only
}

// ParsePattern parses one allowlist entry:
//
//	example.com                exactly that name
//	*.example.com              every subdomain at any depth, not example.com itself
//	bedrock.*.amazonaws.com    exactly one label in place of the '*'
//	203.0.113.7, 2001:db8::1   an IP literal ([2001:db8::1] with a port)
//
// each optionally followed by ":port" (1-65535, decimal, no leading zero).
// Without a port an entry allows only ports 80 and 443. Names are
// canonicalised (case, one trailing dot, IDNA). At most one '*', and it must be
// a whole label neither first-and-only nor last; the fixed labels after it
// must be at least two and must not be an ICANN public suffix ("*.co.uk" and
// "bedrock.*.co.uk" would cover every registrable domain beneath). A loopback,
// private or other non-public address is accepted only with an explicit port;
// anything on the fixed deny list (metadata, link-local, localhost, ...) is
// refused, since it could never match.
func ParsePattern(s string) (Pattern, error) {
	p, err := parsePattern(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("allowlist entry %q: %w", truncate(s), err)
	}
	return p, nil
}

func parsePattern(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, errors.New("empty entry")
	}
	if len(s) > maxRawHost {
		return Pattern{}, errors.New("too long")
	}
	if !utf8.ValidString(s) {
		return Pattern{}, errors.New("not valid UTF-8")
	}
	if strings.Contains(s, "://") {
		return Pattern{}, errors.New("remove the scheme: an entry is a host with an optional :port")
	}
	// badHostBytes forbids '*', which is ours to interpret here.
	if why := badHostBytes(strings.ReplaceAll(s, "*", "x")); why != "" {
		return Pattern{}, errors.New(why)
	}

	host, port, err := splitPatternPort(s)
	if err != nil {
		return Pattern{}, err
	}

	if strings.Contains(host, "*") {
		return parseWildcard(host, port)
	}

	c, err := canonHost(host)
	if err != nil {
		return Pattern{}, hostWhy(err)
	}
	if c.isIP() {
		cls, code, why := classify(c.addr)
		switch cls {
		case classDenied:
			return Pattern{}, fmt.Errorf("%s is on the fixed deny list (%s): it is never reachable", c.addr, strings.TrimPrefix(code, ruleDenyPrefix))
		case classNonPublic:
			if port == 0 {
				return Pattern{}, fmt.Errorf("%s is %s: name it with its port (%s), a local service must be named exactly",
					c.addr, why, joinHostPort(c.addr, 8080))
			}
		}
		return Pattern{kind: kindIP, addr: c.addr, port: port}, nil
	}
	if code, why, ok := deniedName(c.name); ok {
		return Pattern{}, fmt.Errorf("%s is on the fixed deny list (%s: %s): it is never reachable", c.name, strings.TrimPrefix(code, ruleDenyPrefix), why)
	}
	return Pattern{kind: kindExact, name: c.name, port: port}, nil
}

// splitPatternPort splits "host[:port]", "[v6][:port]" or a bare IPv6.
func splitPatternPort(s string) (host string, port int, err error) {
	if s[0] == '[' {
		j := strings.IndexByte(s, ']')
		if j < 0 {
			return "", 0, errors.New("unbalanced brackets")
		}
		host, rest := s[:j+1], s[j+1:]
		if rest == "" {
			return host, 0, nil
		}
		if rest[0] != ':' {
			return "", 0, errors.New("only \":port\" may follow \"]\"")
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, 0, nil
	case 1:
		i := strings.IndexByte(s, ':')
		port, err := parsePort(s[i+1:])
		return s[:i], port, err
	default:
		// An IPv6 literal without a port; with one it must be bracketed.
		return s, 0, nil
	}
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, fmt.Errorf("port %q: want a decimal number 1-65535", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q: want a decimal number 1-65535", s)
		}
		n = n*10 + int(s[i]-'0')
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want a decimal number 1-65535", s)
	}
	return n, nil
}

func parseWildcard(host string, port int) (Pattern, error) {
	if strings.Count(host, "*") > 1 {
		return Pattern{}, errors.New("at most one '*' is allowed")
	}
	if host == "*" || host == "*." {
		return Pattern{}, errors.New("a bare '*' would allow everything; name the domains")
	}
	if host[0] == '[' || strings.Contains(host, ":") {
		return Pattern{}, errors.New("'*' cannot appear in an IP address")
	}
	if strings.HasSuffix(host, ".") {
		host = host[:len(host)-1]
	}
	labels := strings.Split(host, ".")
	star := -1
	for i, l := range labels {
		if strings.Contains(l, "*") {
			if l != "*" {
				return Pattern{}, errors.New("'*' must be a whole label (\"*.example.com\" or \"a.*.example.com\")")
			}
			star = i
		}
	}
	if star == len(labels)-1 {
		return Pattern{}, errors.New("'*' cannot be the last label")
	}
	after := strings.Join(labels[star+1:], ".")
	c, err := canonHost(after)
	if err != nil {
		return Pattern{}, hostWhy(err)
	}
	if c.isIP() {
		return Pattern{}, errors.New("'*' cannot stand for part of an IP address")
	}
	suffix := c.name
	if strings.Count(suffix, ".") < 1 {
		return Pattern{}, fmt.Errorf("\"*.%s\" is too broad: at least two fixed labels must follow '*'", suffix)
	}
	if ps, icann := publicsuffix.PublicSuffix(suffix); icann && ps == suffix {
		return Pattern{}, fmt.Errorf("%q is a public suffix: a wildcard over it would cover every domain registered under it", suffix)
	}
	if _, why, ok := deniedName(suffix); ok {
		return Pattern{}, fmt.Errorf("%s is on the fixed deny list (%s): nothing under it is reachable", suffix, why)
	}
	if star == 0 {
		return Pattern{kind: kindLeading, suffix: suffix, port: port}, nil
	}
	before, err := canonName(strings.Join(labels[:star], "."))
	if err != nil {
		return Pattern{}, err
	}
	return Pattern{kind: kindMiddle, name: before, suffix: suffix, port: port}, nil
}

// canonName canonicalises name labels without reading them as an address
// (the labels before a middle '*' may be numeric).
func canonName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty label")
	}
	ascii, err := toASCIIName(s, s)
	if err != nil {
		return "", hostWhy(err)
	}
	if err := checkLDH(s, ascii); err != nil {
		return "", hostWhy(err)
	}
	return ascii, nil
}

// String returns the entry in canonical form; ParsePattern(p.String()) == p.
func (p Pattern) String() string {
	var h string
	switch p.kind {
	case kindExact:
		h = p.name
	case kindLeading:
		h = "*." + p.suffix
	case kindMiddle:
		h = p.name + ".*." + p.suffix
	case kindIP:
		if p.port != 0 {
			return joinHostPort(p.addr, p.port)
		}
		return p.addr.String()
	default:
		return ""
	}
	if p.port != 0 {
		return h + ":" + strconv.Itoa(p.port)
	}
	return h
}

func joinHostPort(a netip.Addr, port int) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(port))
}

// portOK: an entry without a port allows 80 and 443; otherwise exactly its port.
func (p Pattern) portOK(port int) bool {
	if p.port == 0 {
		return port == 80 || port == 443
	}
	return port == p.port
}

// matchName reports whether the canonical name host matches p (ignoring port).
func (p Pattern) matchName(host string) bool {
	switch p.kind {
	case kindExact:
		return host == p.name
	case kindLeading:
		return len(host) > len(p.suffix)+1 && strings.HasSuffix(host, p.suffix) &&
			host[len(host)-len(p.suffix)-1] == '.'
	case kindMiddle:
		if len(host) < len(p.name)+len(p.suffix)+3 ||
			!strings.HasPrefix(host, p.name) || host[len(p.name)] != '.' ||
			!strings.HasSuffix(host, p.suffix) || host[len(host)-len(p.suffix)-1] != '.' {
			return false
		}
		mid := host[len(p.name)+1 : len(host)-len(p.suffix)-1]
		return mid != "" && !strings.Contains(mid, ".")
	}
	return false
}

// Resolver resolves names. Decide passes the canonical name (no trailing
// dot); the default resolver queries it as an absolute name, so resolv.conf
// search domains never apply.
type Resolver interface {
	LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error)
}

// A name under the special-use "invalid" TLD (RFC 6761, section 6.4) is
// answered "no such host" at once, without a query: it never resolves, so a
// query could only leak the name. (Tests use it as an allowed name that does
// not resolve.)
type defaultResolver struct{}

func (defaultResolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "invalid" || strings.HasSuffix(h, ".invalid") {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host+".")
}

// Allowlist is a session's resolved allowlist plus the fixed deny list. It is
// immutable and safe for concurrent use.
type Allowlist struct {
	patterns []Pattern
	strs     []string
	resolver Resolver
}

// newAllowlist parses patterns (duplicates folded, order kept). An empty list
// denies everything. resolver nil means the system resolver
// (net.DefaultResolver). The error names the first bad entry.
func newAllowlist(patterns []string, resolver Resolver) (*Allowlist, error) {
	if resolver == nil {
		resolver = defaultResolver{}
	}
	a := &Allowlist{resolver: resolver}
	seen := make(map[Pattern]bool, len(patterns))
	for _, s := range patterns {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, err
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		a.patterns = append(a.patterns, p)
		a.strs = append(a.strs, p.String())
	}
	return a, nil
}

// Patterns returns the entries in canonical form, in order, without duplicates.
func (a *Allowlist) Patterns() []string {
	if a == nil {
		return nil
	}
	return append([]string(nil), a.strs...)
}

// Decision is the outcome for one (host, port).
//
// Host is the canonical host: lower case, no trailing dot, A-labels, IPv4
// dotted decimal, IPv6 in RFC 5952 form without brackets; "" when the host
// was invalid. Addrs is empty unless Allow. Rule is the canonical String() of
// the matching entry when Allow, else one of the codes "invalid-host",
// "invalid-port", "not-allowed", "port-not-allowed", "private-address",
// "resolve-failed", "deny-list:<what>" (metadata, link-local, unspecified,
// broadcast, multicast, reserved, ipv4-compatible, loopback-name). Reason is
// one printable line (hosts in it are canonical or %q-quoted).
//
// "resolve-failed" is the one !Allow outcome that is not a policy refusal:
// the allowlist admits the destination but its name did not resolve
// (lookupFailed). The proxies answer it like an unreachable upstream (HTTP
// 502, SOCKS5 "host unreachable"), never as a refusal, and report no
// violation for it.
type Decision struct {
	Allow  bool
	Host   string // canonical host
	Port   int
	Addrs  []netip.Addr // when Allow: the checked addresses the proxy must dial (never re-resolve)
	Rule   string       // the allow pattern that matched, or the deny reason code
	Reason string       // one line for the 403 header / SOCKS log / violation, or the 502 body
}

// lookupFailed reports a destination the allowlist admits whose name did not
// resolve (Rule "resolve-failed"): a failure to reach an allowed host, not a
// policy refusal.
func (d Decision) lookupFailed() bool { return !d.Allow && d.Rule == ruleResolveFailed }

func deny(host string, port int, rule, reason string) Decision {
	return Decision{Host: host, Port: port, Rule: rule, Reason: reason}
}

// Decide decides one connection to host:port. host is a host alone: a name,
// an IPv4 literal in any inet_aton spelling, or an IPv6 literal with or
// without brackets; never "host:port". See the file comment for the order of
// checks. A nil *Allowlist denies everything.
func (a *Allowlist) Decide(ctx context.Context, host string, port int) Decision {
	if port < 1 || port > 65535 {
		return deny("", port, ruleInvalidPort, fmt.Sprintf("port %d is not 1-65535", port))
	}
	c, err := canonHost(host)
	if err != nil {
		return deny("", port, ruleInvalidHost, err.Error())
	}
	h := c.String()
	if c.isIP() {
		return a.decideIP(c.addr, port)
	}
	if code, why, ok := deniedName(h); ok {
		return deny(h, port, code, fmt.Sprintf("%s is %s (fixed deny list)", h, why))
	}
	if a == nil {
		return deny(h, port, ruleNotAllowed, fmt.Sprintf("%s is not on the allowlist", h))
	}
	var match *Pattern
	var nameOnly *Pattern
	for i := range a.patterns {
		p := &a.patterns[i]
		if p.kind == kindIP || !p.matchName(h) {
			continue
		}
		if p.portOK(port) {
			match = p
			break
		}
		if nameOnly == nil {
			nameOnly = p
		}
	}
	if match == nil {
		if nameOnly != nil {
			return deny(h, port, rulePortNotAllow, fmt.Sprintf("%s is allowed only on %s; port %d must be named in an entry (%s:%d)",
				h, a.portsFor(h), port, h, port))
		}
		return deny(h, port, ruleNotAllowed, fmt.Sprintf("%s is not on the allowlist", h))
	}

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultResolveTimeout)
		defer cancel()
	}
	addrs, err := a.resolver.LookupNetIP(ctx, h)
	if err != nil {
		return deny(h, port, ruleResolveFailed, fmt.Sprintf("%s did not resolve (%s)", h, lookupErrorText(err)))
	}
	if len(addrs) == 0 {
		return deny(h, port, ruleResolveFailed, fmt.Sprintf("%s did not resolve (no address)", h))
	}
	var ok []netip.Addr
	firstRefusal := ""
	for _, ad := range addrs {
		ad = ad.WithZone("").Unmap()
		if !ad.IsValid() {
			continue
		}
		cls, _, why := classify(ad)
		refuse := false
		switch cls {
		case classDenied:
			refuse = true
		case classNonPublic:
			refuse = !a.literalAllowed(ad, port)
		}
		if refuse {
			if firstRefusal == "" {
				firstRefusal = fmt.Sprintf("%s (%s)", ad, why)
			}
			continue
		}
		if !containsAddr(ok, ad) {
			ok = append(ok, ad)
		}
	}
	if len(ok) == 0 {
		if firstRefusal == "" {
			firstRefusal = "no valid address"
		}
		return deny(h, port, rulePrivate, fmt.Sprintf("%s resolves to a private address: %s", h, firstRefusal))
	}
	return Decision{Allow: true, Host: h, Port: port, Addrs: ok, Rule: match.String(),
		Reason: fmt.Sprintf("%s:%d allowed by %s", h, port, match.String())}
}

func (a *Allowlist) decideIP(ad netip.Addr, port int) Decision {
	h := ad.String()
	cls, code, why := classify(ad)
	if cls == classDenied {
		return deny(h, port, code, fmt.Sprintf("%s is %s (fixed deny list)", h, why))
	}
	if a == nil {
		return deny(h, port, ruleNotAllowed, fmt.Sprintf("%s is not on the allowlist", h))
	}
	hostMatched := false
	for _, p := range a.patterns {
		if p.kind != kindIP || p.addr != ad {
			continue
		}
		hostMatched = true
		if !p.portOK(port) {
			continue
		}
		if cls == classNonPublic && p.port != port {
			continue // unreachable: ParsePattern requires the port; kept as a guard
		}
		return Decision{Allow: true, Host: h, Port: port, Addrs: []netip.Addr{ad}, Rule: p.String(),
			Reason: fmt.Sprintf("%s allowed by %s", joinHostPort(ad, port), p.String())}
	}
	if cls == classNonPublic {
		return deny(h, port, rulePrivate, fmt.Sprintf("%s is %s; only an entry naming %s exactly allows it", h, why, joinHostPort(ad, port)))
	}
	if hostMatched {
		return deny(h, port, rulePortNotAllow, fmt.Sprintf("%s is allowed only on %s; port %d must be named in an entry", h, a.portsFor(h), port))
	}
	return deny(h, port, ruleNotAllowed, fmt.Sprintf("%s is not on the allowlist", h))
}

// literalAllowed: a non-public resolved address is acceptable only when an
// entry names exactly that address with exactly this port.
func (a *Allowlist) literalAllowed(ad netip.Addr, port int) bool {
	for _, p := range a.patterns {
		if p.kind == kindIP && p.addr == ad && p.port != 0 && p.port == port {
			return true
		}
	}
	return false
}

// portsFor lists the ports the entries matching canonical host h allow.
func (a *Allowlist) portsFor(h string) string {
	var ports []string
	add := func(s string) {
		for _, x := range ports {
			if x == s {
				return
			}
		}
		ports = append(ports, s)
	}
	c, _ := canonHost(h)
	for _, p := range a.patterns {
		var m bool
		if p.kind == kindIP {
			m = c.isIP() && p.addr == c.addr
		} else {
			m = !c.isIP() && p.matchName(h)
		}
		if !m {
			continue
		}
		if p.port == 0 {
			add("80")
			add("443")
		} else {
			add(strconv.Itoa(p.port))
		}
	}
	return "ports " + strings.Join(ports, ",")
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

// lookupErrorText says why a lookup failed in a few words. A DNS error's
// full text names the host's DNS server; only its reason is kept.
func lookupErrorText(err error) string {
	var de *net.DNSError
	switch {
	case errors.As(err, &de) && de.IsNotFound:
		return "no such host"
	case errors.As(err, &de) && de.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "lookup timed out"
	case errors.Is(err, context.Canceled):
		return "lookup canceled"
	case errors.As(err, &de) && de.Err != "":
		return printableASCII(de.Err, 120)
	}
	return printableASCII(err.Error(), 120)
}

// ---- the fixed deny list and address classes ----

type addrClass uint8

const (
	classPublic addrClass = iota
	classNonPublic
	classDenied
)

type prefixRule struct {
	prefix netip.Prefix
	code   string // deny-list code (classDenied only)
	why    string
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// deniedPrefixes are never reachable. Order matters: the first match names
// the reason, so the specific metadata addresses come before their ranges.
var deniedPrefixes = []prefixRule{
	{mustPrefix("169.254.169.254/32"), "metadata", "a cloud metadata address"},
	{mustPrefix("169.254.170.2/32"), "metadata", "a cloud credentials address (ECS)"},
	{mustPrefix("169.254.170.23/32"), "metadata", "a cloud credentials address (EKS)"},
	{mustPrefix("fd00:ec2::/32"), "metadata", "a cloud metadata address (AWS IPv6)"},
	{mustPrefix("100.100.100.200/32"), "metadata", "a cloud metadata address (Alibaba)"},
	{mustPrefix("168.63.129.16/32"), "metadata", "a cloud platform address (Azure WireServer)"},
	{mustPrefix("192.0.0.192/32"), "metadata", "a cloud metadata address (Oracle)"},
	{mustPrefix("169.254.0.0/16"), "link-local", "a link-local address"},
	{mustPrefix("fe80::/10"), "link-local", "a link-local address"},
	{mustPrefix("0.0.0.0/8"), "unspecified", "an unspecified (this-network) address"},
	{mustPrefix("::/128"), "unspecified", "the unspecified address"},
	{mustPrefix("255.255.255.255/32"), "broadcast", "the broadcast address"},
	{mustPrefix("224.0.0.0/4"), "multicast", "a multicast address"},
	{mustPrefix("ff00::/8"), "multicast", "a multicast address"},
	{mustPrefix("240.0.0.0/4"), "reserved", "a reserved address"},
}

// nonPublicPrefixes need a literal entry with the port.
var nonPublicPrefixes = []prefixRule{
	{mustPrefix("127.0.0.0/8"), "", "a loopback address"},
	{mustPrefix("::1/128"), "", "a loopback address"},
	{mustPrefix("10.0.0.0/8"), "", "a private address"},
	{mustPrefix("172.16.0.0/12"), "", "a private address"},
	{mustPrefix("192.168.0.0/16"), "", "a private address"},
	{mustPrefix("fc00::/7"), "", "a private (ULA) address"},
	{mustPrefix("100.64.0.0/10"), "", "a carrier-grade NAT address"},
	{mustPrefix("192.0.0.0/24"), "", "a special-purpose address"},
	{mustPrefix("192.0.2.0/24"), "", "a documentation address"},
	{mustPrefix("198.51.100.0/24"), "", "a documentation address"},
	{mustPrefix("203.0.113.0/24"), "", "a documentation address"},
	{mustPrefix("198.18.0.0/15"), "", "a benchmarking address"},
	{mustPrefix("fec0::/10"), "", "a site-local address"},
	{mustPrefix("100::/64"), "", "a discard address"},
	{mustPrefix("2001::/32"), "", "a Teredo address"},
	{mustPrefix("2001:db8::/32"), "", "a documentation address"},
	{mustPrefix("3fff::/20"), "", "a documentation address"},
	{mustPrefix("64:ff9b:1::/48"), "", "a local-use NAT64 address"},
}

var (
	nat64Prefix   = mustPrefix("64:ff9b::/96")
	sixToFour     = mustPrefix("2002::/16")
	v4Compatible  = mustPrefix("::/96")
	loopbackV6    = netip.IPv6Loopback()
	unspecifiedV6 = netip.IPv6Unspecified()
)

// classify returns the class of a (zone-free) address, the deny-list code for
// classDenied, and a short description for reasons.
func classify(a netip.Addr) (cls addrClass, code, why string) {
	a = a.WithZone("").Unmap()
	for _, r := range deniedPrefixes {
		if r.prefix.Contains(a) {
			return classDenied, ruleDenyPrefix + r.code, r.why
		}
	}
	if a.Is6() {
		if v4Compatible.Contains(a) && a != loopbackV6 && a != unspecifiedV6 {
			return classDenied, ruleDenyPrefix + "ipv4-compatible", "a deprecated IPv4-compatible address"
		}
		var v4 netip.Addr
		var form string
		b := a.As16()
		switch {
		case nat64Prefix.Contains(a):
			v4, form = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), "NAT64"
		case sixToFour.Contains(a):
			v4, form = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), "6to4"
		}
		if v4.IsValid() {
			if c, code, why := classify(v4); c != classPublic {
				return c, code, fmt.Sprintf("the %s form of %s, %s", form, v4, why)
			}
		}
	}
	for _, r := range nonPublicPrefixes {
		if r.prefix.Contains(a) {
			return classNonPublic, "", r.why
		}
	}
	return classPublic, "", "a public address"
}

// deniedNames: the names themselves and every subdomain of them.
var deniedNames = []struct{ name, code, why string }{
	{"localhost", "loopback-name", "a loopback name"},
	{"metadata", "metadata", "a cloud metadata name"},
	{"metadata.google.internal", "metadata", "a cloud metadata name (GCP)"},
	{"metadata.goog", "metadata", "a cloud metadata name (GCP)"},
	{"metadata.azure.com", "metadata", "a cloud metadata name (Azure)"},
	{"instance-data", "metadata", "a cloud metadata name (AWS)"},
	{"instance-data.ec2.internal", "metadata", "a cloud metadata name (AWS)"},
	{"metadata.tencentyun.com", "metadata", "a cloud metadata name (Tencent)"},
	{"metadata.platformequinix.com", "metadata", "a cloud metadata name (Equinix)"},
	{"metadata.packet.net", "metadata", "a cloud metadata name (Equinix)"},
}

// deniedName reports whether the canonical name h is on the fixed deny list.
func deniedName(h string) (code, why string, ok bool) {
	for _, d := range deniedNames {
		if h == d.name || strings.HasSuffix(h, "."+d.name) {
			return ruleDenyPrefix + d.code, d.why, true
		}
	}
	return "", "", false
}
