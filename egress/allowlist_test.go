package egress

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Public addresses used by the fake resolvers (GitHub's).
var (
	pub4  = netip.MustParseAddr("140.82.112.3")
	pub4b = netip.MustParseAddr("140.82.112.4")
	pub6  = netip.MustParseAddr("2606:50c0:8000::154")
)

// fakeResolver answers from a map and records every lookup.
type fakeResolver struct {
	mu    sync.Mutex // guards m and calls
	m     map[string][]netip.Addr
	def   []netip.Addr // answer for names not in m (nil: NXDOMAIN)
	calls []string
}

func (f *fakeResolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, host)
	if a, ok := f.m[host]; ok {
		return a, nil
	}
	if f.def != nil {
		return f.def, nil
	}
	return nil, errors.New("no such host")
}

func (f *fakeResolver) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// failResolver fails the test when called: the decision had to be made
// without DNS.
type failResolver struct{ t testing.TB }

func (f failResolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	f.t.Helper()
	f.t.Errorf("unexpected DNS lookup of %q", host)
	return nil, errors.New("lookup refused by test")
}

func mustAllowlist(t testing.TB, patterns []string, r Resolver) *Allowlist {
	t.Helper()
	a, err := newAllowlist(patterns, r)
	if err != nil {
		t.Fatalf("newAllowlist(%q): %v", patterns, err)
	}
	return a
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestWildcards is every case of the wildcard rules (docs/network.md, "The network":
// `*.example.com` every subdomain but not the apex, `api.*.example.com`
// exactly one label), plus the near misses around each.
func TestWildcards(t *testing.T) {
	cases := []struct {
		pattern string
		host    string
		want    bool
	}{
		// exact
		{"example.com", "example.com", true},
		{"example.com", "EXAMPLE.com.", true},
		{"example.com", "a.example.com", false},
		{"example.com", "xexample.com", false},
		{"example.com", "example.co", false},
		{"example.com", "example.com.evil.test", false},
		{"allowed.com", "evilallowed.com", false},
		{"allowed.com", "allowed.com.evil.test", false},
		{"allowed.com", "allowed.comx", false},
		// leading wildcard: every subdomain at any depth, not the apex
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "x.y.z.example.com", true},
		{"*.example.com", "A.Example.COM.", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "aexample.com", false},
		{"*.example.com", "a-example.com", false},
		{"*.example.com", "a.example.com.evil.test", false},
		{"*.example.com", "example.com.a", false},
		{"*.example.com", "a.example.co", false},
		{"*.co.uk.example", "a.co.uk.example", true},
		// middle wildcard: exactly one label
		{"bedrock.*.amazonaws.com", "bedrock.us-east-1.amazonaws.com", true},
		{"bedrock.*.amazonaws.com", "BEDROCK.eu-west-3.amazonaws.com.", true},
		{"bedrock.*.amazonaws.com", "bedrock.evil.attacker.amazonaws.com", false},
		{"bedrock.*.amazonaws.com", "bedrock.amazonaws.com", false},
		{"bedrock.*.amazonaws.com", "bedrock..amazonaws.com", false}, // invalid host
		{"bedrock.*.amazonaws.com", "x.bedrock.us-east-1.amazonaws.com", false},
		{"bedrock.*.amazonaws.com", "xbedrock.us-east-1.amazonaws.com", false},
		{"bedrock.*.amazonaws.com", "bedrock-runtime.us-east-1.amazonaws.com", false},
		{"bedrock.*.amazonaws.com", "bedrock.us-east-1.amazonaws.com.evil.test", false},
		{"bedrock.*.amazonaws.com", "bedrock.us-east-1.xamazonaws.com", false},
		{"bedrock.*.amazonaws.com", "bedrock.us-east-1.amazonaws.co", false},
		{"a.b.*.example.com", "a.b.c.example.com", true},
		{"a.b.*.example.com", "b.c.example.com", false},
		{"a.b.*.example.com", "x.b.c.example.com", false},
		{"1.*.example.com", "1.x.example.com", true},
		// IP literal entries
		{"140.82.112.3", "140.82.112.3", true},
		{"140.82.112.3", "140.82.112.4", false},
		{"140.82.112.3", "0x8c.0x52.0x70.3", true},
		{"140.82.112.3", "[::ffff:140.82.112.3]", true},
		{"2606:50c0:8000::154", "[2606:50c0:8000:0::154]", true},
		{"[2606:50c0:8000::154]", "2606:50c0:8000::154", true},
		// names never match IP entries and vice versa
		{"140.82.112.3", "github.com", false},
		{"*.example.com", "140.82.112.3", false},
	}
	for _, c := range cases {
		r := &fakeResolver{def: []netip.Addr{pub4}}
		a := mustAllowlist(t, []string{c.pattern}, r)
		for _, port := range []int{80, 443} {
			d := a.Decide(context.Background(), c.host, port)
			if d.Allow != c.want {
				t.Errorf("%q: Decide(%q, %d) = %v (%s: %s); want %v", c.pattern, c.host, port, d.Allow, d.Rule, d.Reason, c.want)
			}
			if d.Allow && d.Rule != mustParse(t, c.pattern).String() {
				t.Errorf("%q: Decide(%q) Rule = %q", c.pattern, c.host, d.Rule)
			}
		}
		if !c.want && len(r.Calls()) > 0 {
			t.Errorf("%q: host %q did not match but caused lookups %q", c.pattern, c.host, r.Calls())
		}
	}
}

func mustParse(t testing.TB, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		t.Fatalf("ParsePattern(%q): %v", s, err)
	}
	return p
}

func TestPortRules(t *testing.T) {
	r := &fakeResolver{m: map[string][]netip.Addr{
		"github.com":  {pub4},
		"example.com": {pub4},
		"dev.test":    addrs("127.0.0.1"),
	}}
	a := mustAllowlist(t, []string{
		"github.com", "example.com:8443", "*.svc.example.org:6379", "127.0.0.1:8080",
		"[::1]:3000", "140.82.112.4", "140.82.112.3:9000", "dev.test:8080",
	}, r)
	cases := []struct {
		host string
		port int
		want bool
		rule string
	}{
		{"github.com", 443, true, "github.com"},
		{"github.com", 80, true, "github.com"},
		{"github.com", 22, false, rulePortNotAllow},
		{"github.com", 6379, false, rulePortNotAllow},
		{"github.com", 8080, false, rulePortNotAllow},
		{"example.com", 8443, true, "example.com:8443"},
		{"example.com", 443, false, rulePortNotAllow}, // a port entry allows only its port
		{"example.com", 80, false, rulePortNotAllow},
		{"a.svc.example.org", 6379, false, ruleResolveFailed}, // matched; NXDOMAIN in the fake
		{"a.svc.example.org", 443, false, rulePortNotAllow},
		{"127.0.0.1", 8080, true, "127.0.0.1:8080"},
		{"127.1", 8080, true, "127.0.0.1:8080"},
		{"2130706433", 8080, true, "127.0.0.1:8080"},
		{"[::ffff:127.0.0.1]", 8080, true, "127.0.0.1:8080"},
		{"127.0.0.1", 8081, false, rulePrivate},
		{"127.0.0.1", 80, false, rulePrivate},
		{"127.0.0.1", 443, false, rulePrivate},
		{"127.0.0.2", 8080, false, rulePrivate},
		{"::1", 8080, false, rulePrivate}, // ::1 is not 127.0.0.1
		{"[::1]", 3000, true, "[::1]:3000"},
		{"::1", 3000, true, "[::1]:3000"},
		{"127.0.0.1", 3000, false, rulePrivate},
		{"localhost", 8080, false, "deny-list:loopback-name"}, // name it by address
		{"140.82.112.4", 443, true, "140.82.112.4"},
		{"140.82.112.4", 22, false, rulePortNotAllow},
		{"140.82.112.3", 9000, true, "140.82.112.3:9000"},
		{"140.82.112.3", 443, false, rulePortNotAllow},
		{"dev.test", 8080, true, "dev.test:8080"}, // resolves to 127.0.0.1, named literally with 8080
		{"dev.test", 443, false, rulePortNotAllow},
		{"github.com", 0, false, ruleInvalidPort},
		{"github.com", -1, false, ruleInvalidPort},
		{"github.com", 65536, false, ruleInvalidPort},
	}
	for _, c := range cases {
		d := a.Decide(context.Background(), c.host, c.port)
		if d.Allow != c.want || d.Rule != c.rule {
			t.Errorf("Decide(%q, %d) = %v %q (%s); want %v %q", c.host, c.port, d.Allow, d.Rule, d.Reason, c.want, c.rule)
		}
		if d.Port != c.port {
			t.Errorf("Decide(%q, %d).Port = %d", c.host, c.port, d.Port)
		}
	}
}

// Every loopback and metadata spelling we know of, with broad wildcards
// present, on the web ports and a dev port: refused, and without DNS.
func TestLoopbackAndMetadataSpellingsRefused(t *testing.T) {
	a := mustAllowlist(t, []string{
		"*.example.com", "*.google.internal", "*.ec2.internal", "*.nip.io", "*.amazonaws.com",
		"*.tencentyun.com", "*.azure.com", "*.packet.net", "*.platformequinix.com",
		"github.com", "github.com:8080", "140.82.112.3",
	}, failResolver{t})
	hosts := []string{
		// loopback
		"127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f.1", "0X7F.1", "0x7f000001", "017700000001",
		"0177.0.0.1", "0177.0.0.01", "127.0.0.1.", "127.000.000.001", "0x7f.0.0.1", "127.255.255.254",
		"[::ffff:127.0.0.1]", "::ffff:127.0.0.1", "::ffff:7f00:1", "[::ffff:7f00:1]",
		"[0:0:0:0:0:ffff:7f00:1]", "::1", "[::1]", "[0:0:0:0:0:0:0:1]", "[::127.0.0.1]",
		"[64:ff9b::7f00:1]", "[64:ff9b::127.0.0.1]", "[2002:7f00:1::]",
		"localhost", "localhost.", "LOCALHOST", "LocalHost.", "a.localhost", "ｌｏｃａｌｈｏｓｔ",
		"１２７。０。０。１", "１２７．１",
		// unspecified (0.0.0.0 reaches the local host on Linux)
		"0.0.0.0", "0", "0x0", "00", "0.0.0.0.", "[::]", "::", "[::ffff:0.0.0.0]",
		// metadata, every spelling
		"169.254.169.254", "169.254.169.254.", "2852039166", "0xa9fea9fe", "0XA9FEA9FE",
		"0251.0376.0251.0376", "0xa9.0xfe.0xa9.0xfe", "169.254.43518", "169.16689662",
		"025177524776", "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "::ffff:a9fe:a9fe",
		"[64:ff9b::a9fe:a9fe]", "[64:ff9b::169.254.169.254]", "[2002:a9fe:a9fe::1]",
		"[::169.254.169.254]", "[fd00:ec2::254]", "fd00:ec2::254", "[FD00:EC2:0::254]",
		"[fd00:ec2::23]", "169.254.170.2", "169.254.170.23", "100.100.100.200", "[::ffff:100.100.100.200]",
		"168.63.129.16", "192.0.0.192",
		"metadata.google.internal", "metadata.google.internal.", "METADATA.GOOGLE.INTERNAL",
		"Metadata.Google.Internal.", "ｍｅｔａｄａｔａ.google.internal", "metadata", "metadata.",
		"metadata.goog", "instance-data", "instance-data.ec2.internal", "metadata.azure.com",
		"metadata.tencentyun.com", "metadata.packet.net", "metadata.platformequinix.com",
		"x.metadata.google.internal",
		// the rest of link-local and the other fixed denials
		"169.254.0.1", "169.254.255.255", "[fe80::1]", "fe80::1", "[fe80::a9fe:a9fe]", "[febf::1]",
		"224.0.0.1", "239.255.255.250", "[ff02::1]", "255.255.255.255", "4294967295", "240.0.0.1",
		// private and CGNAT without a literal entry
		"10.0.0.1", "012.0.0.1", "167772161", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"[fc00::1]", "[fd12:3456::1]", "100.64.0.1", "100.127.255.255", "[::ffff:10.0.0.1]",
		"[64:ff9b::a00:1]", "[fec0::1]",
	}
	for _, h := range hosts {
		for _, port := range []int{80, 443, 8080} {
			d := a.Decide(context.Background(), h, port)
			if d.Allow {
				t.Errorf("Decide(%q, %d) allowed (%s)", h, port, d.Rule)
			}
			if len(d.Addrs) != 0 {
				t.Errorf("Decide(%q, %d) denied with Addrs %v", h, port, d.Addrs)
			}
			if strings.ContainsAny(d.Reason, "\x00\r\n") {
				t.Errorf("Decide(%q, %d) reason not one line: %q", h, port, d.Reason)
			}
		}
	}
	// The reason codes name the deny list.
	for h, rule := range map[string]string{
		"169.254.169.254":          "deny-list:metadata",
		"0xa9fea9fe":               "deny-list:metadata",
		"[::ffff:a9fe:a9fe]":       "deny-list:metadata",
		"[64:ff9b::a9fe:a9fe]":     "deny-list:metadata",
		"[fd00:ec2::254]":          "deny-list:metadata",
		"100.100.100.200":          "deny-list:metadata",
		"metadata.google.internal": "deny-list:metadata",
		"instance-data":            "deny-list:metadata",
		"169.254.1.1":              "deny-list:link-local",
		"fe80::1":                  "deny-list:link-local",
		"0.0.0.0":                  "deny-list:unspecified",
		"::":                       "deny-list:unspecified",
		"[::127.0.0.1]":            "deny-list:ipv4-compatible",
		"224.0.0.1":                "deny-list:multicast",
		"ff02::1":                  "deny-list:multicast",
		"255.255.255.255":          "deny-list:broadcast",
		"240.0.0.1":                "deny-list:reserved",
		"localhost.":               "deny-list:loopback-name",
		"127.1":                    rulePrivate,
		"[::1]":                    rulePrivate,
		"100.64.0.1":               rulePrivate,
	} {
		if d := a.Decide(context.Background(), h, 443); d.Rule != rule {
			t.Errorf("Decide(%q).Rule = %q (%s), want %q", h, d.Rule, d.Reason, rule)
		}
	}
}

// The fixed deny list beats even a literal entry naming a nearby address, and
// cannot itself be named.
func TestDenyListWinsOverLiteral(t *testing.T) {
	for _, p := range []string{
		"169.254.169.254:80", "169.254.169.254", "[fd00:ec2::254]:80", "100.100.100.200:80",
		"169.254.1.1:8080", "[fe80::1]:8080", "0.0.0.0:8080", "[::]:8080", "224.0.0.1:5353",
		"metadata.google.internal", "metadata.google.internal:80", "metadata", "instance-data:80",
		"localhost", "localhost:8080", "a.localhost:8080", "*.metadata.google.internal",
		"[::ffff:169.254.169.254]:80", "[64:ff9b::a9fe:a9fe]:80", "2852039166:80",
	} {
		if _, err := ParsePattern(p); err == nil || !strings.Contains(err.Error(), "deny list") {
			t.Errorf("ParsePattern(%q) = %v, want a fixed-deny-list error", p, err)
		}
	}
}

func TestDNSRebinding(t *testing.T) {
	r := &fakeResolver{m: map[string][]netip.Addr{
		"lo.example.com":      addrs("127.0.0.1"),
		"lo2.example.com":     addrs("127.0.0.2"),
		"ten.example.com":     addrs("10.0.0.1"),
		"meta.example.com":    addrs("169.254.169.254"),
		"lo6.example.com":     addrs("::1"),
		"mapped.example.com":  addrs("::ffff:127.0.0.1"),
		"mapmeta.example.com": addrs("::ffff:169.254.169.254"),
		"nat64.example.com":   addrs("64:ff9b::7f00:1"),
		"cgnat.example.com":   addrs("100.64.0.1"),
		"zero.example.com":    addrs("0.0.0.0"),
		"ll.example.com":      addrs("fe80::1%eth0"),
		"ula.example.com":     addrs("fd00::1"),
		"awsv6.example.com":   addrs("fd00:ec2::254"),
		"mix.example.com":     addrs("127.0.0.1", "140.82.112.3", "::1", "169.254.169.254", "2606:50c0:8000::154", "10.0.0.1"),
		"dup.example.com":     addrs("140.82.112.3", "::ffff:140.82.112.3", "140.82.112.3"),
		"pubmap.example.com":  addrs("::ffff:140.82.112.4"),
		"empty.example.com":   {},
		"devbox.example.com":  addrs("127.0.0.1", "10.0.0.1"),
	}}
	a := mustAllowlist(t, []string{"*.example.com", "*.example.com:8080", "127.0.0.1:8080"}, r)
	for _, h := range []string{"lo", "lo2", "ten", "meta", "lo6", "mapped", "mapmeta", "nat64", "cgnat", "zero", "ll", "ula", "awsv6"} {
		host := h + ".example.com"
		d := a.Decide(context.Background(), host, 443)
		if d.Allow || d.Rule != rulePrivate || !strings.Contains(d.Reason, "resolves to a private address") {
			t.Errorf("Decide(%q) = %+v; want a private-address denial", host, d)
		}
	}
	check := func(host string, port int, want []netip.Addr) {
		t.Helper()
		d := a.Decide(context.Background(), host, port)
		if !d.Allow || !reflect.DeepEqual(d.Addrs, want) {
			t.Errorf("Decide(%q, %d) = %+v; want allowed with %v", host, port, d, want)
		}
	}
	check("mix.example.com", 443, addrs("140.82.112.3", "2606:50c0:8000::154"))
	check("dup.example.com", 443, addrs("140.82.112.3"))
	check("pubmap.example.com", 443, addrs("140.82.112.4"))
	// The literal entry 127.0.0.1:8080 admits 127.0.0.1 on 8080 only.
	check("lo.example.com", 8080, addrs("127.0.0.1"))
	check("mapped.example.com", 8080, addrs("127.0.0.1"))
	check("mix.example.com", 8080, addrs("127.0.0.1", "140.82.112.3", "2606:50c0:8000::154"))
	check("devbox.example.com", 8080, addrs("127.0.0.1"))
	for _, c := range []struct {
		host string
		port int
	}{{"lo2.example.com", 8080}, {"lo6.example.com", 8080}, {"nat64.example.com", 8080}, {"meta.example.com", 8080}} {
		if d := a.Decide(context.Background(), c.host, c.port); d.Allow {
			t.Errorf("Decide(%q, %d) allowed %v", c.host, c.port, d.Addrs)
		}
	}
	if d := a.Decide(context.Background(), "empty.example.com", 443); d.Allow || d.Rule != ruleResolveFailed {
		t.Errorf("empty answer: %+v", d)
	}
	if d := a.Decide(context.Background(), "nx.example.com", 443); d.Allow || d.Rule != ruleResolveFailed {
		t.Errorf("NXDOMAIN: %+v", d)
	}
	// The resolver is given the canonical name.
	a.Decide(context.Background(), "MIX.Example.COM.", 443)
	if c := r.Calls(); c[len(c)-1] != "mix.example.com" {
		t.Errorf("resolver got %q", c[len(c)-1])
	}
}

func TestDeniedNamesCauseNoLookup(t *testing.T) {
	a := mustAllowlist(t, []string{"allowed.com", "*.svc.allowed.com", "github.com", "bedrock.*.amazonaws.com"}, failResolver{t})
	for _, c := range []struct {
		host string
		port int
	}{
		{"evil.test", 443}, {"allowed.com.evil.test", 443}, {"evilallowed.com", 443},
		{"allowed.com@evil.test", 443}, {"xallowed.com", 443}, {"allowed.co", 443},
		{"svc.allowed.com", 443}, {"a.allowed.com", 443}, {"secret-data.evil.test", 443},
		{"aGVsbG8gd29ybGQ.exfil.evil.test", 80}, {"bedrock.a.b.amazonaws.com", 443},
		{"github.com", 22}, {"github.com", 6379}, {"allowed.com", 53}, {"x.svc.allowed.com", 8443},
		{"metadata.google.internal", 80}, {"localhost", 80}, {"1.2.3.4.5", 443}, {"", 443},
		{"allowed.com\x00", 443}, {"allowed.com\r\n", 443},
	} {
		if d := a.Decide(context.Background(), c.host, c.port); d.Allow {
			t.Errorf("Decide(%q, %d) allowed", c.host, c.port)
		}
	}
}

func TestInvalidHostsRefused(t *testing.T) {
	a := mustAllowlist(t, []string{"allowed.com", "*.allowed.com"}, failResolver{t})
	for _, h := range []string{
		"allowed.com\x00", "\x00allowed.com", "allowed.com\x00.evil.test", "allowed.com\r\nHost: evil.test",
		"allowed.com\n", "a.allowed.com\r", "fe80::1%eth0", "[fe80::1%25eth0]", "[fe80::1%eth0]", "::1%lo",
		"", " ", "allowed.com ", "allowed. com", "allowed.com:443", "[allowed.com]", "allowed.com/x",
		"allowed.com@evil.test", "evil.test@allowed.com", "user:pass@allowed.com", "allowed.com\\x",
		"a..allowed.com", ".allowed.com", "allowed.com..", strings.Repeat("a", 64) + ".allowed.com",
		strings.Repeat("a.", 125) + "allowed.com", "a_b.allowed.com", "\xffallowed.com",
		"раypal.allowed.com", "*.allowed.com", "%61llowed.com", "allowed.com#",
	} {
		d := a.Decide(context.Background(), h, 443)
		if d.Allow || d.Rule != ruleInvalidHost || d.Host != "" {
			t.Errorf("Decide(%q) = %+v; want invalid-host", h, d)
		}
		if strings.ContainsAny(d.Reason, "\x00\r\n") {
			t.Errorf("Decide(%q) reason not one line: %q", h, d.Reason)
		}
	}
}

func TestIDN(t *testing.T) {
	r := &fakeResolver{def: []netip.Addr{pub4}}
	a := mustAllowlist(t, []string{"apple.com", "ace.com", "github.com", "bücher.example", "*.münchen.example"}, r)
	cases := []struct {
		host string
		want bool
	}{
		{"аpple.com", false},        // Cyrillic а + Latin: refused (mixed scripts)
		{"xn--pple-43d.com", false}, // its A-label, likewise
		{"асе.com", false},          // wholly Cyrillic: xn--80ak9a.com, not ace.com
		{"аррlе.com", false},        // mixed Cyrillic/Latin: refused outright
		{"ɡithub.com", false},       // U+0261 LATIN SMALL LETTER SCRIPT G: another name
		{"github.com", true},
		{"ｇｉｔｈｕｂ.ｃｏｍ", true}, // fullwidth maps to the same DNS name (that is what gets resolved)
		{"bücher.example", true},
		{"BÜCHER.example.", true},
		{"xn--bcher-kva.example", true},
		{"bucher.example", false},
		{"a.münchen.example", true},
		{"a.xn--mnchen-3ya.example", true},
		{"a.munchen.example", false},
	}
	for _, c := range cases {
		d := a.Decide(context.Background(), c.host, 443)
		if d.Allow != c.want {
			t.Errorf("Decide(%q) = %v (%s: %s), want %v", c.host, d.Allow, d.Rule, d.Reason, c.want)
		}
	}
	if got := a.Patterns(); !slices.Equal(got, []string{"apple.com", "ace.com", "github.com", "xn--bcher-kva.example", "*.xn--mnchen-3ya.example"}) {
		t.Errorf("Patterns() = %q", got)
	}
}

func TestParsePattern(t *testing.T) {
	good := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"example.com:443", "example.com:443"},
		{"example.com:22", "example.com:22"},
		{"*.example.com", "*.example.com"},
		{"*.EXAMPLE.com.", "*.example.com"},
		{"*.example.com:8443", "*.example.com:8443"},
		{"*.githubusercontent.com", "*.githubusercontent.com"}, // a private (non-ICANN) suffix
		{"*.example.co.uk", "*.example.co.uk"},
		{"bedrock.*.amazonaws.com", "bedrock.*.amazonaws.com"},
		{"bedrock-runtime.*.amazonaws.com:443", "bedrock-runtime.*.amazonaws.com:443"},
		{"a.b.*.example.com", "a.b.*.example.com"},
		{"single", "single"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"140.82.112.3", "140.82.112.3"},
		{"140.82.112.3:22", "140.82.112.3:22"},
		{"0x8c.0x52.0x70.3", "140.82.112.3"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"127.1:8080", "127.0.0.1:8080"},
		{"2130706433:8080", "127.0.0.1:8080"},
		{"[::ffff:127.0.0.1]:8080", "127.0.0.1:8080"},
		{"[::1]:3000", "[::1]:3000"},
		{"10.0.0.5:5432", "10.0.0.5:5432"},
		{"192.168.1.10:8000", "192.168.1.10:8000"},
		{"[fd12::1]:8080", "[fd12::1]:8080"},
		{"100.64.1.1:80", "100.64.1.1:80"},
		{"2606:50c0:8000::154", "2606:50c0:8000::154"},
		{"[2606:50C0:8000::154]", "2606:50c0:8000::154"},
		{"[2606:50c0:8000::154]:443", "[2606:50c0:8000::154]:443"},
		{"example.com:65535", "example.com:65535"},
		{"example.com:1", "example.com:1"},
		// found by FuzzParsePattern
		{"21020007", "1.64.189.103"},
		{"0X1.10", "1.0.0.10"},
		{"10::0", "10::"},
		{"A.0.*.A.A", "a.0.*.a.a"}, // numeric labels before '*' stay labels
		{"*.0.100A", "*.0.100a"},
		{"0X0A0X", "0x0a0x"}, // not a number: a name
	}
	for _, c := range good {
		p, err := ParsePattern(c.in)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", c.in, err)
			continue
		}
		if p.String() != c.want {
			t.Errorf("ParsePattern(%q).String() = %q, want %q", c.in, p.String(), c.want)
		}
		if q, err := ParsePattern(p.String()); err != nil || q != p {
			t.Errorf("ParsePattern(%q) does not round-trip: %v %v", p.String(), q, err)
		}
	}
	bad := []struct{ in, why string }{
		{"", "empty"},
		{"*", "bare '*'"},
		{"*.", "bare '*'"},
		{"*:443", "bare '*'"},
		{"**", "at most one"},
		{"*.*.example.com", "at most one"},
		{"**.example.com", "at most one"},
		{"*.com", "too broad"},
		{"*.co", "too broad"},
		{"*.localhost", "too broad"},
		{"*.co.uk", "public suffix"},
		{"*.com.au", "public suffix"},
		{"bedrock.*.com", "too broad"},
		{"bedrock.*.co.uk", "public suffix"},
		{"a*b.com", "whole label"},
		{"*a.example.com", "whole label"},
		{"a.*b.example.com", "whole label"},
		{"example.*", "last label"},
		{"example.com.*", "last label"},
		{"*.1.2.3", "IP address"},
		{"*.example.123", "IPv4"},
		{"1.2.*.4", "IP address"},
		{"[::1]*", "only \":port\""},
		{"::*", "IP address"},
		{"a..b.com", "empty label"},
		{".example.com", "empty label"},
		{"*..example.com", "empty label"},
		{"example.com..", "empty label"},
		{"https://example.com", "scheme"},
		{"example.com/path", "path"},
		{"user@example.com", "userinfo"},
		{"example.com @evil", "space"},
		{" example.com", "space"},
		{"example.com\x00", "NUL"},
		{"example.com\r\n", "CR or LF"},
		{"example.com\t", "control"},
		{"example.com?x", "query"},
		{"example.com:", "port"},
		{"example.com:0", "port"},
		{"example.com:65536", "port"},
		{"example.com:080", "port"},
		{"example.com:+80", "port"},
		{"example.com:8o", "port"},
		{"example.com:443:443", "IPv6"},
		{"[::1]:", "port"},
		{"[::1]x", "only \":port\""},
		{"[::1", "unbalanced"},
		{"[fe80::1%eth0]:80", "zone"},
		{"[127.0.0.1]:80", "only IPv6"},
		{"a_b.com", "internationalised"},
		{"-a.com", "'-'"},
		{"раypal.com", "mixes scripts"},
		{"\xff.com", "UTF-8"},
		{"1.2.3.4.5", "IPv4"},
		{"127.0.0.1", "with its port"},
		{"127.1", "with its port"},
		{"::1", "with its port"},
		{"[::1]", "with its port"},
		{"10.0.0.1", "with its port"},
		{"192.168.0.1", "with its port"},
		{"[fd00::1]", "with its port"},
		{"100.64.0.1", "with its port"},
		{"::1:8080", "deny list"}, // an unbracketed IPv6 never carries a port: ::1:8080 is IPv4-compatible
		{"169.254.169.254:80", "deny list"},
		{"[fe80::1]:8080", "deny list"},
		{"metadata.google.internal", "deny list"},
		{"localhost:8080", "deny list"},
	}
	for _, c := range bad {
		p, err := ParsePattern(c.in)
		if err == nil {
			t.Errorf("ParsePattern(%q) = %q, want an error mentioning %q", c.in, p, c.why)
			continue
		}
		if !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParsePattern(%q) error %q, want it to mention %q", c.in, err, c.why)
		}
		if strings.ContainsAny(err.Error(), "\x00\r\n") {
			t.Errorf("ParsePattern(%q) error not one line: %q", c.in, err)
		}
	}
}

func TestNewAllowlist(t *testing.T) {
	_, err := newAllowlist([]string{"github.com", "*.com", "gitlab.com"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"*.com"`) {
		t.Errorf("newAllowlist error %v should name the entry", err)
	}
	a := mustAllowlist(t, []string{"GitHub.com", "github.com.", "github.com", "*.Example.com", "127.1:8080", "127.0.0.1:8080"}, nil)
	if got, want := a.Patterns(), []string{"github.com", "*.example.com", "127.0.0.1:8080"}; !slices.Equal(got, want) {
		t.Errorf("Patterns() = %q, want %q", got, want)
	}
	a.Patterns()[0] = "mutated"
	if a.Patterns()[0] != "github.com" {
		t.Error("Patterns() exposes internal state")
	}

	// An empty list (networkEnabled: false) and a nil *Allowlist deny everything, without DNS.
	empty := mustAllowlist(t, nil, failResolver{t})
	var nilList *Allowlist
	for _, al := range []*Allowlist{empty, nilList} {
		for _, h := range []string{"github.com", "140.82.112.3", "127.0.0.1", "169.254.169.254"} {
			if d := al.Decide(context.Background(), h, 443); d.Allow {
				t.Errorf("empty allowlist allowed %q", h)
			}
		}
	}
	if nilList.Patterns() != nil {
		t.Error("nil Patterns")
	}
}

func TestDecisionFields(t *testing.T) {
	r := &fakeResolver{m: map[string][]netip.Addr{"api.github.com": {pub4, pub6}}}
	a := mustAllowlist(t, []string{"api.github.com", "2606:50c0:8000::154"}, r)
	d := a.Decide(context.Background(), "API.GitHub.com.", 443)
	want := Decision{Allow: true, Host: "api.github.com", Port: 443, Addrs: []netip.Addr{pub4, pub6},
		Rule: "api.github.com", Reason: "api.github.com:443 allowed by api.github.com"}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("got %+v\nwant %+v", d, want)
	}
	for _, h := range []string{"[2606:50c0:8000::154]", "2606:50c0:8000::154", "[2606:50C0:8000:0:0:0:0:154]"} {
		d = a.Decide(context.Background(), h, 443)
		if !d.Allow || d.Host != "2606:50c0:8000::154" || !reflect.DeepEqual(d.Addrs, []netip.Addr{pub6}) {
			t.Errorf("Decide(%q) = %+v", h, d)
		}
	}
	d = a.Decide(context.Background(), "evil.test", 443)
	if d.Allow || d.Host != "evil.test" || d.Rule != ruleNotAllowed || d.Addrs != nil || d.Reason != "evil.test is not on the allowlist" {
		t.Errorf("denial = %+v", d)
	}
}

// Decide bounds the lookup by the caller's context.
func TestResolveHonoursContext(t *testing.T) {
	block := resolverFunc(func(ctx context.Context, host string) ([]netip.Addr, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a := mustAllowlist(t, []string{"slow.example.com"}, block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	d := a.Decide(ctx, "slow.example.com", 443)
	if d.Allow || d.Rule != ruleResolveFailed {
		t.Errorf("got %+v", d)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("lookup not bounded by ctx")
	}
	// Without a deadline Decide applies its own.
	var sawDeadline bool
	a = mustAllowlist(t, []string{"x.example.com"}, resolverFunc(func(ctx context.Context, host string) ([]netip.Addr, error) {
		_, sawDeadline = ctx.Deadline()
		return []netip.Addr{pub4}, nil
	}))
	if d := a.Decide(context.Background(), "x.example.com", 443); !d.Allow || !sawDeadline {
		t.Errorf("got %+v, deadline %v", d, sawDeadline)
	}
}

type resolverFunc func(ctx context.Context, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return f(ctx, host)
}

func TestBaselineParses(t *testing.T) {
	a, err := newAllowlist(baseline, failResolver{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Patterns()) != len(baseline) {
		t.Errorf("baseline has duplicates or non-canonical entries: %q", a.Patterns())
	}
	for i, s := range baseline {
		if p := mustParse(t, s); p.String() != s {
			t.Errorf("baseline[%d] = %q is not canonical (%q)", i, s, p.String())
		}
	}
}

// The baseline names no package registry, and no baseline wildcard reaches
// one. (The registry hosts live here, in a test, not in baseline.go.)
func TestBaselineHasNoRegistry(t *testing.T) {
	a := mustAllowlist(t, baseline, failResolver{t})
	for _, h := range []string{
		"registry.npmjs.org", "npmjs.org", "registry.yarnpkg.com", "pypi.org", "files.pythonhosted.org",
		"upload.pypi.org", "crates.io", "index.crates.io", "static.crates.io", "proxy.golang.org",
		"sum.golang.org", "goproxy.io", "repo1.maven.org", "repo.maven.apache.org", "plugins.gradle.org",
		"rubygems.org", "index.rubygems.org", "registry-1.docker.io", "auth.docker.io", "docker.io",
		"production.cloudflare.docker.com", "ghcr.io", "quay.io", "gcr.io", "public.ecr.aws",
		"npm.pkg.github.com", "maven.pkg.github.com", "nuget.pkg.github.com", "rubygems.pkg.github.com",
		"api.nuget.org", "packagist.org", "repo.packagist.org", "hackage.haskell.org", "cdn.jsdelivr.net",
		"unpkg.com", "conda.anaconda.org", "repo.anaconda.com", "cran.r-project.org", "pub.dev",
		"registry.gitlab.com", "pkgs.dev.azure.com", "deb.debian.org", "archive.ubuntu.com",
		"dl-cdn.alpinelinux.org", "huggingface.co", "cdn-lfs.huggingface.co",
		"ecr.us-east-1.amazonaws.com", "codeartifact.us-east-1.amazonaws.com",
	} {
		if d := a.Decide(context.Background(), h, 443); d.Allow || d.Rule != ruleNotAllowed {
			t.Errorf("baseline reaches registry host %q (%s)", h, d.Rule)
		}
	}
}
