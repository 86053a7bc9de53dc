package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// This file is the host canonicaliser. Everything the decision layer compares
// (allowlist entries, the fixed deny list, the Host header the proxies see) is
// first put into one canonical spelling, so that no two spellings of the same
// destination can get two different answers:
//
//   - names: lower case, no trailing dot, Unicode converted to A-labels with
//     the IDNA2008/UTS 46 lookup profile, then strictly LDH (letters, digits,
//     hyphen; 1-63 bytes a label, 253 bytes in all);
//   - a name whose last label is numeric ("127.1", "2130706433", "0x7f.1",
//     "0177.0.0.1", "1.2.3.4.5") is an IPv4 address read the way inet_aton
//     reads it, or is invalid; it is never a name and never goes to DNS;
//   - IPv6 with or without brackets, printed in RFC 5952 form without
//     brackets; IPv4-mapped addresses (::ffff:a.b.c.d) become plain IPv4;
//   - zone ids ('%'), userinfo ('@'), paths, ports, spaces, control bytes and
//     invalid UTF-8 are refused, never stripped.

// maxRawHost bounds the input before any Unicode processing; a valid host is
// at most 253 bytes after conversion, and no Unicode spelling of one needs
// more than a few times that.
const maxRawHost = 1024

// canonicalHost returns the canonical spelling of host: a lower-case A-label
// name without a trailing dot, a dotted-decimal IPv4 address, or an IPv6
// address in RFC 5952 form WITHOUT brackets. host is a host alone: "[::1]" and
// "::1" are both accepted, "example.com:443" is not (split ports off with
// net.SplitHostPort first).
func canonicalHost(host string) (string, error) {
	h, err := canonHost(host)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// canonical is a canonicalised host: either addr is valid (an IP literal) or
// name holds the canonical name.
type canonical struct {
	name string
	addr netip.Addr
}

func (c canonical) isIP() bool { return c.addr.IsValid() }

func (c canonical) String() string {
	if c.isIP() {
		return c.addr.String()
	}
	return c.name
}

// hostErr is the error for a refused host. It quotes the input with %q so a
// host carrying CR/LF cannot forge a log or header line.
type hostErr struct{ host, why string }

func (e *hostErr) Error() string { return fmt.Sprintf("invalid host %q: %s", truncate(e.host), e.why) }

func hostError(host, why string) error { return &hostErr{host, why} }

// hostWhy returns the reason alone of a hostErr (callers that already name
// the input), or err unchanged.
func hostWhy(err error) error {
	var he *hostErr
	if errors.As(err, &he) {
		return errors.New(he.why)
	}
	return err
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func canonHost(host string) (canonical, error) {
	if host == "" {
		return canonical{}, hostError(host, "empty")
	}
	if len(host) > maxRawHost {
		return canonical{}, hostError(host, "too long")
	}
	if !utf8.ValidString(host) {
		return canonical{}, hostError(host, "not valid UTF-8")
	}
	if why := badHostBytes(host); why != "" {
		return canonical{}, hostError(host, why)
	}
	// Bracketed IPv6.
	if host[0] == '[' {
		if host[len(host)-1] != ']' || len(host) < 3 {
			return canonical{}, hostError(host, "unbalanced brackets")
		}
		inner := host[1 : len(host)-1]
		if !strings.Contains(inner, ":") {
			return canonical{}, hostError(host, "brackets hold only IPv6 addresses")
		}
		return parseIPv6(host, inner)
	}
	if strings.ContainsAny(host, "[]") {
		return canonical{}, hostError(host, "stray bracket")
	}
	if strings.Count(host, ":") == 1 {
		return canonical{}, hostError(host, "contains ':' (not an IPv6 address; pass the host without its port)")
	}
	if strings.Contains(host, ":") {
		return parseIPv6(host, host)
	}
	name := host
	if strings.HasSuffix(name, ".") {
		name = name[:len(name)-1] // one trailing dot: the root; more is an empty label
	}
	if name == "" {
		return canonical{}, hostError(host, "empty")
	}
	ascii, err := toASCIIName(host, name)
	if err != nil {
		return canonical{}, err
	}
	// WHATWG "ends in a number": a host whose last label is numeric is an
	// IPv4 address or nothing. This runs after IDNA mapping so fullwidth
	// digits and ideographic dots ("１２７。０。０。１") are caught too.
	if endsInNumber(ascii) {
		a, ok := parseInetAton(ascii)
		if !ok {
			return canonical{}, hostError(host, "numeric host is not a valid IPv4 address")
		}
		return canonical{addr: a}, nil
	}
	if err := checkLDH(host, ascii); err != nil {
		return canonical{}, err
	}
	return canonical{name: ascii}, nil
}

// badHostBytes names, before any mapping, the bytes that could change what
// a host means to some other parser: controls, whitespace, userinfo, path,
// query, fragment, zone-id, backslash, wildcard. "" if none.
func badHostBytes(host string) string {
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c == 0:
			return "contains NUL"
		case c == '\r' || c == '\n':
			return "contains CR or LF"
		case c < 0x20 || c == 0x7f:
			return "contains a control character"
		case c == ' ':
			return "contains a space"
		case c == '@':
			return "contains '@' (userinfo)"
		case c == '/' || c == '\\':
			return "contains a path separator"
		case c == '%':
			return "contains '%' (zone id or escape)"
		case c == '?' || c == '#':
			return "contains a query or fragment"
		case c == '*':
			return "contains '*'"
		}
	}
	// Unicode spaces and separators (U+00A0, U+2028, ...) likewise.
	for _, r := range host {
		if r >= utf8.RuneSelf && (unicode.IsSpace(r) || unicode.IsControl(r)) {
			return "contains a Unicode space or control character"
		}
	}
	return ""
}

func parseIPv6(host, s string) (canonical, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return canonical{}, hostError(host, "not a valid IPv6 address")
	}
	if a.Zone() != "" {
		return canonical{}, hostError(host, "zone ids are not allowed")
	}
	return canonical{addr: a.Unmap()}, nil
}

// toASCIIName converts a name (no trailing dot) to its lower-case A-label form.
func toASCIIName(host, name string) (string, error) {
	if isPlainLDH(name) {
		// Fast path, and no xn-- label to validate.
		return strings.ToLower(name), nil
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "", hostError(host, "not a valid internationalised name")
	}
	ascii = strings.ToLower(ascii)
	// The mapping can itself produce a trailing dot (U+3002 ...) or drop
	// characters; anything but a plain LDH result is refused by checkLDH.
	if err := checkScripts(host, ascii); err != nil {
		return "", err
	}
	return ascii, nil
}

// isPlainLDH reports whether s is ASCII letters, digits, hyphens and dots
// only, with no "xn--" label (which IDNA must validate).
func isPlainLDH(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) >= 4 && strings.EqualFold(l[:4], "xn--") {
			return false
		}
	}
	return true
}

// checkLDH enforces the DNS hostname syntax on a lower-case ASCII name.
func checkLDH(host, name string) error {
	if len(name) > 253 {
		return hostError(host, "longer than 253 bytes")
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" {
			return hostError(host, "empty label")
		}
		if len(l) > 63 {
			return hostError(host, "label longer than 63 bytes")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return hostError(host, "label starts or ends with '-'")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return hostError(host, "not a letter-digit-hyphen name")
			}
		}
	}
	return nil
}

// checkScripts refuses a label that mixes letters from scripts which are not
// normally written together (Latin with Cyrillic or Greek, say): the cheap
// half of the usual IDN lookalike defence. Han, Hiragana, Katakana, Bopomofo
// and Hangul may mix with each other and with Latin. A label written wholly
// in one non-Latin script is accepted: it is a different A-label, so it never
// matches an ASCII entry however alike the two look.
func checkScripts(host, ascii string) error {
	for _, l := range strings.Split(ascii, ".") {
		if !strings.HasPrefix(l, "xn--") {
			continue
		}
		u, err := idna.Punycode.ToUnicode(l)
		if err != nil {
			return hostError(host, "not a valid internationalised name")
		}
		var first *unicode.RangeTable
		cjkOrLatin := true
		mixed := false
		for _, r := range u {
			s := scriptOf(r)
			if s == nil {
				continue
			}
			if !cjkCompatible(s) {
				cjkOrLatin = false
			}
			if first == nil {
				first = s
			} else if s != first {
				mixed = true
			}
		}
		if mixed && !cjkOrLatin {
			return hostError(host, "label mixes scripts (possible lookalike)")
		}
	}
	return nil
}

var commonScripts = []*unicode.RangeTable{
	unicode.Latin, unicode.Cyrillic, unicode.Greek, unicode.Han, unicode.Hiragana,
	unicode.Katakana, unicode.Hangul, unicode.Bopomofo, unicode.Arabic, unicode.Hebrew,
	unicode.Armenian, unicode.Georgian, unicode.Cherokee, unicode.Thai, unicode.Devanagari,
}

// scriptOf returns the script table of a letter, or nil for Common/Inherited
// characters (digits, hyphen, combining marks), which mix with anything.
func scriptOf(r rune) *unicode.RangeTable {
	if r < utf8.RuneSelf {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return unicode.Latin
		}
		return nil
	}
	if unicode.Is(unicode.Common, r) || unicode.Is(unicode.Inherited, r) {
		return nil
	}
	for _, t := range commonScripts {
		if unicode.Is(t, r) {
			return t
		}
	}
	for _, t := range unicode.Scripts {
		if t != unicode.Common && t != unicode.Inherited && unicode.Is(t, r) {
			return t
		}
	}
	return nil
}

func cjkCompatible(t *unicode.RangeTable) bool {
	switch t {
	case unicode.Latin, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Bopomofo, unicode.Hangul:
		return true
	}
	return false
}

// endsInNumber reports whether the last label of name is numeric in the
// WHATWG URL sense: all decimal digits, or "0x"/"0X" followed by hex digits.
func endsInNumber(name string) bool {
	last := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		last = name[i+1:]
	}
	if last == "" {
		return false
	}
	if allDigits(last, 10) {
		return true
	}
	return len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') && allDigits(last[2:], 16)
}

func allDigits(s string, base int) bool {
	for i := 0; i < len(s); i++ {
		if digitVal(s[i]) >= base {
			return false
		}
	}
	return true
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

var errNotIPv4 = errors.New("not an IPv4 address")

// parseInetAton reads s the way inet_aton(3) does: one to four parts, each
// decimal, octal (leading 0) or hexadecimal (leading 0x); the last part fills
// the remaining bytes. "0x" with no digits is refused.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals [4]uint64
	for i, p := range parts {
		v, err := parseAtonPart(p)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(parts)
	for i := 0; i < n-1; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, false
		}
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	var v uint32
	for i := 0; i < n-1; i++ {
		v |= uint32(vals[i]) << (24 - 8*i)
	}
	v |= uint32(vals[n-1])
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseAtonPart(p string) (uint64, error) {
	if p == "" {
		return 0, errNotIPv4
	}
	base := 10
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, errNotIPv4
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		d := digitVal(p[i])
		if d >= base {
			return 0, errNotIPv4
		}
		v = v*uint64(base) + uint64(d)
		if v > 0xffffffff {
			return 0, errNotIPv4
		}
	}
	return v, nil
}
