package egress

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

var fuzzHostSeeds = []string{
	"example.com", "EXAMPLE.COM.", "a.b.example.com", "bedrock.us-east-1.amazonaws.com",
	"bedrock.evil.attacker.amazonaws.com", "127.1", "2130706433", "0x7f.1", "0177.0.0.1",
	"127.0.0.1.", "[::ffff:127.0.0.1]", "::ffff:7f00:1", "0x7f000001", "017700000001",
	"localhost.", "169.254.169.254", "0xa9fea9fe", "[fd00:ec2::254]", "metadata.google.internal",
	"allowed.com.evil.test", "evilallowed.com", "allowed.com@evil.test", "a\x00b", "a\r\nb",
	"[fe80::1%25eth0]", "аpple.com", "xn--pple-43d.com", "bücher.example", "１２７。０。０。１",
	"ｇｉｔｈｕｂ.ｃｏｍ", "a..b", "1.2.3.4.5", "0x", "[64:ff9b::7f00:1]", "[2002:a9fe:a9fe::]",
	"r3---sn-abc.googlevideo.com", "a\u00adb.com", "xn--80ak9a.com", "[::]", "0",
}

func FuzzCanonicalHost(f *testing.F) {
	for _, s := range fuzzHostSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := canonicalHost(s)
		if err != nil {
			if c != "" {
				t.Fatalf("canonicalHost(%q) returned %q with error %v", s, c, err)
			}
			if strings.ContainsAny(err.Error(), "\x00\r\n") {
				t.Fatalf("canonicalHost(%q) error is not one line: %q", s, err)
			}
			return
		}
		if strings.ContainsAny(c, "\x00\r\n @/\\%[]*?#\t") {
			t.Fatalf("canonicalHost(%q) = %q contains a forbidden byte", s, c)
		}
		if c == "" || len(c) > 253 {
			t.Fatalf("canonicalHost(%q) = %q: bad length", s, c)
		}
		for i := 0; i < len(c); i++ {
			if b := c[i]; b >= 0x80 || b >= 'A' && b <= 'Z' {
				t.Fatalf("canonicalHost(%q) = %q is not lower-case ASCII", s, c)
			}
		}
		again, err := canonicalHost(c)
		if err != nil || again != c {
			t.Fatalf("not idempotent: canonicalHost(%q) = %q, canonicalHost(%q) = %q, %v", s, c, c, again, err)
		}
		// An address's canonical form is netip's; a name never looks like one.
		if a, err := netip.ParseAddr(c); err == nil {
			if a.String() != c || a.Is4In6() || a.Zone() != "" {
				t.Fatalf("canonicalHost(%q) = %q is not a canonical address", s, c)
			}
		} else if endsInNumber(c) || strings.Contains(c, ":") {
			t.Fatalf("canonicalHost(%q) = %q is a numeric-looking name", s, c)
		}
		// Bracketing an IPv6 result, or adding one trailing dot to a name,
		// changes nothing.
		if strings.Contains(c, ":") {
			if b, err := canonicalHost("[" + c + "]"); err != nil || b != c {
				t.Fatalf("canonicalHost([%s]) = %q, %v", c, b, err)
			}
		} else if d, err := canonicalHost(c + "."); err != nil || d != c {
			t.Fatalf("canonicalHost(%q.) = %q, %v", c, d, err)
		}
	})
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{
		"example.com", "*.example.com", "bedrock.*.amazonaws.com", "github.com:22", "127.0.0.1:8080",
		"[::1]:3000", "2606:50c0:8000::154", "[2606:50c0:8000::154]:443", "*", "*.com", "*.co.uk",
		"a*b.com", "**", "https://x", "x/y", "u@x.com", "x .com", "x\x00.com", "*.example.com:8443",
		"127.1:8080", "0x7f.1:80", "169.254.169.254:80", "bücher.example", "1.*.example.com",
		"a.b.*.example.com", "*.githubusercontent.com", "example.com:080", "[::1]", ":80", "[]:80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			if p != (Pattern{}) {
				t.Fatalf("ParsePattern(%q) returned %v with error %v", s, p, err)
			}
			if strings.ContainsAny(err.Error(), "\x00\r\n") {
				t.Fatalf("ParsePattern(%q) error is not one line: %q", s, err)
			}
			return
		}
		str := p.String()
		if str == "" || strings.ContainsAny(str, "\x00\r\n @/\\%?#\t") {
			t.Fatalf("ParsePattern(%q).String() = %q", s, str)
		}
		q, err := ParsePattern(str)
		if err != nil {
			t.Fatalf("ParsePattern(%q).String() = %q does not re-parse: %v", s, str, err)
		}
		if q != p || q.String() != str {
			t.Fatalf("ParsePattern(%q) = %#v, re-parsed %q = %#v", s, p, str, q)
		}
		// Structural promises.
		if strings.Count(str, "*") > 1 {
			t.Fatalf("%q: more than one '*'", str)
		}
		if p.kind == kindLeading || p.kind == kindMiddle {
			if strings.Count(p.suffix, ".") < 1 {
				t.Fatalf("%q: fewer than two fixed labels after '*'", str)
			}
		}
		if p.kind == kindIP {
			cls, _, _ := classify(p.addr)
			if cls == classDenied || cls == classNonPublic && p.port == 0 {
				t.Fatalf("%q: accepted a %v address", str, cls)
			}
		}
		if p.kind == kindExact {
			if _, _, denied := deniedName(p.name); denied {
				t.Fatalf("%q: accepted a deny-listed name", str)
			}
		}
	})
}

// oracleMatch is an independent, label-by-label reading of a canonical
// pattern string against a canonical host (ports ignored).
func oracleMatch(pattern, host string) bool {
	hp := pattern
	if strings.HasPrefix(hp, "[") {
		hp = hp[1:strings.IndexByte(hp, ']')]
	} else if strings.Count(hp, ":") == 1 {
		hp = hp[:strings.IndexByte(hp, ':')]
	}
	if pa, err := netip.ParseAddr(hp); err == nil {
		ha, err := netip.ParseAddr(host)
		return err == nil && ha == pa
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	pl, hl := strings.Split(hp, "."), strings.Split(host, ".")
	star := -1
	for i, l := range pl {
		if l == "*" {
			star = i
		}
	}
	switch {
	case star < 0:
		return hp == host
	case star == 0:
		if len(hl) <= len(pl)-1 {
			return false
		}
		off := len(hl) - (len(pl) - 1)
		for i := 1; i < len(pl); i++ {
			if pl[i] != hl[off+i-1] {
				return false
			}
		}
		return true
	default:
		if len(hl) != len(pl) {
			return false
		}
		for i := range pl {
			if i != star && pl[i] != hl[i] {
				return false
			}
		}
		return hl[star] != ""
	}
}

// oraclePort reads the port off a canonical pattern string: "[v6]:p",
// "name:p" or "v4:p"; an unbracketed IPv6 or a plain host has none.
func oraclePort(pattern string, port int) bool {
	ps := ""
	if strings.HasPrefix(pattern, "[") {
		ps = pattern[strings.IndexByte(pattern, ']')+1:]
		ps = strings.TrimPrefix(ps, ":")
	} else if strings.Count(pattern, ":") == 1 {
		ps = pattern[strings.IndexByte(pattern, ':')+1:]
	}
	if ps == "" {
		return port == 80 || port == 443
	}
	n, err := strconv.Atoi(ps)
	return err == nil && port == n
}

var fuzzPatterns = []string{
	"example.com", "*.example.com", "bedrock.*.amazonaws.com", "github.com", "github.com:22",
	"*.svc.example.org:6379", "127.0.0.1:8080", "[::1]:3000", "10.0.0.5:5432", "140.82.112.3",
	"[2606:50c0:8000::154]:8443", "a.b.*.example.net",
}

func FuzzDecide(f *testing.F) {
	for i, s := range fuzzHostSeeds {
		f.Add(s, 443, "", []byte{127, 0, 0, 1})
		f.Add(s, 8080, fuzzPatterns[i%len(fuzzPatterns)], []byte{140, 82, 112, 9})
	}
	f.Add("x.example.com", 8080, "", []byte{127, 0, 0, 1})
	f.Add("x.example.com", 443, "", []byte{0xfd, 0, 0xec, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x54})
	f.Fuzz(func(t *testing.T, host string, port int, extra string, raw []byte) {
		patterns := fuzzPatterns
		if _, err := ParsePattern(extra); err == nil {
			patterns = append(append([]string(nil), fuzzPatterns...), extra)
		}
		var canonPatterns []string
		answer := addrs("140.82.112.3", "127.0.0.1", "10.0.0.5", "169.254.169.254", "::1",
			"::ffff:127.0.0.1", "2606:50c0:8000::154", "64:ff9b::a00:5", "fe80::1")
		if a, ok := netip.AddrFromSlice(raw); ok {
			answer = append(answer, a)
		}
		res := resolverFunc(func(ctx context.Context, h string) ([]netip.Addr, error) {
			ok := false
			for _, p := range canonPatterns {
				if oracleMatch(p, h) && oraclePort(p, port) {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("lookup of %q (port %d) which no entry allows: %q", h, port, canonPatterns)
			}
			return answer, nil
		})
		a, err := newAllowlist(patterns, res)
		if err != nil {
			t.Fatal(err)
		}
		canonPatterns = a.Patterns()
		d := a.Decide(context.Background(), host, port)
		if strings.ContainsAny(d.Reason, "\x00\r\n") || d.Reason == "" {
			t.Fatalf("Decide(%q, %d) reason %q", host, port, d.Reason)
		}
		if !d.Allow {
			if len(d.Addrs) != 0 {
				t.Fatalf("denied with Addrs: %+v", d)
			}
			return
		}
		if port < 1 || port > 65535 || d.Port != port {
			t.Fatalf("allowed port %d: %+v", port, d)
		}
		if c, err := canonicalHost(host); err != nil || c != d.Host {
			t.Fatalf("Decide(%q).Host = %q, canonicalHost = %q, %v", host, d.Host, c, err)
		}
		if len(d.Addrs) == 0 {
			t.Fatalf("allowed without addresses: %+v", d)
		}
		matched := false
		for _, p := range canonPatterns {
			if p == d.Rule {
				matched = oracleMatch(p, d.Host) && oraclePort(p, port)
			}
		}
		if !matched {
			t.Fatalf("Decide(%q, %d) allowed by %q, which the oracle says does not match (%q)", host, port, d.Rule, canonPatterns)
		}
		for _, ad := range d.Addrs {
			if ad.Zone() != "" || ad.Is4In6() {
				t.Fatalf("non-canonical address %v in %+v", ad, d)
			}
			cls, _, why := classify(ad)
			switch cls {
			case classDenied:
				t.Fatalf("Decide(%q, %d) allowed deny-listed %v (%s)", host, port, ad, why)
			case classNonPublic:
				lit := false
				for _, p := range canonPatterns {
					if p == joinHostPort(ad, port) {
						lit = true
					}
				}
				if !lit {
					t.Fatalf("Decide(%q, %d) allowed %v (%s) with no literal entry", host, port, ad, why)
				}
			}
		}
	})
}
