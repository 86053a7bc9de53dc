package egress

import (
	"strings"
	"testing"
)

func TestCanonicalHost(t *testing.T) {
	cases := []struct{ in, want string }{
		// names
		{"example.com", "example.com"},
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"EXAMPLE.COM.", "example.com"},
		{"a-b.example.com", "a-b.example.com"},
		{"1.2.3.example.com", "1.2.3.example.com"},                     // numeric labels are fine if the last is not
		{"127.0.0.1.nip.io", "127.0.0.1.nip.io"},                       // a name (resolving it is checked later)
		{"0x7f.example", "0x7f.example"},                               // last label not numeric
		{"1e", "1e"},                                                   // not hex without 0x
		{"0xg.com", "0xg.com"},                                         // not a number
		{"localhost", "localhost"},                                     // a name; the deny list handles it
		{"асе.com", "xn--80ak9a.com"},                                  // all Cyrillic: a different name, never "ace.com"
		{"XN--80AK9A.COM", "xn--80ak9a.com"},                           // valid A-label, case-folded
		{"r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com"}, // "--" at 3-4 in an ASCII label is real-world
		{"ab--c.com", "ab--c.com"},
		{"bücher.example", "xn--bcher-kva.example"}, // IDN to A-label
		{"BÜCHER.example", "xn--bcher-kva.example"}, // mapped to lower case first
		{"ｇｉｔｈｕｂ.ｃｏｍ", "github.com"},                // fullwidth: UTS 46 maps it to the same DNS name
		{"a\u00adb.com", "ab.com"},                  // soft hyphen is ignored by UTS 46: the same DNS name
		{"日本語.jp", "xn--wgv71a119e.jp"},             // single script
		{"ひらがなabc.jp", "xn--abc-o73b4fvb9j.jp"},     // Latin + Japanese may mix
		{strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com"},

		// IPv4 in every inet_aton spelling
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0X7F.1", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0x7F000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0177.0000.0000.0001", "127.0.0.1"},
		{"0x7f.0x0.0x0.0x1", "127.0.0.1"},
		{"127.000.000.001", "127.0.0.1"},
		{"169.254.169.254", "169.254.169.254"},
		{"2852039166", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"0251.0376.0251.0376", "169.254.169.254"},
		{"0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
		{"169.254.43518", "169.254.169.254"},
		{"169.16689662", "169.254.169.254"},
		{"0", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"１２７。０。０。１", "127.0.0.1"}, // fullwidth digits and ideographic dots
		{"１２７．１", "127.0.0.1"},

		// IPv6
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"[0:0:0:0:0:0:0:1]", "::1"},
		{"[::ffff:127.0.0.1]", "127.0.0.1"},
		{"::ffff:7f00:1", "127.0.0.1"},
		{"[::FFFF:7F00:1]", "127.0.0.1"},
		{"[::ffff:169.254.169.254]", "169.254.169.254"},
		{"[::ffff:a9fe:a9fe]", "169.254.169.254"},
		{"[FD00:EC2::254]", "fd00:ec2::254"},
		{"[2001:DB8:0:0:0:0:0:1]", "2001:db8::1"},
		{"[64:ff9b::7f00:1]", "64:ff9b::7f00:1"},
		{"::", "::"},

		// found by FuzzCanonicalHost
		{"0X00", "0.0.0.0"},
		{"0X0.0X0", "0.0.0.0"},
		{"00.000", "0.0.0.0"},
		{"0XAAA0", "0.0.170.160"},
		{"0XAAAAAAAA", "170.170.170.170"},
		{"２７。２", "27.0.0.2"},
		{strings.Repeat("0", 150), "0.0.0.0"}, // octal zero, however long
		{"0::0", "::"},
		{"1::0", "1::"},
		{"A::1", "a::1"},               // hex, so an IPv6 address
		{"0XAAX", "0xaax"},             // not a number: a name
		{"0.0.0.0.A", "0.0.0.0.a"},     // last label not numeric: a name
		{"Xn--80A.0.A", "xn--80a.0.a"}, // A-label validated and folded
		{"Ο.Ο", "xn--0xa.xn--0xa"},     // Greek capital omicron, mapped to lower case
		{"Ù虙", "xn--qda2049d"},         // Latin with Han is allowed
		{"0----0", "0----0"},
	}
	for _, c := range cases {
		got, err := canonicalHost(c.in)
		if err != nil || got != c.want {
			t.Errorf("canonicalHost(%q) = %q, %v; want %q", c.in, got, err, c.want)
			continue
		}
		again, err := canonicalHost(got)
		if err != nil || again != got {
			t.Errorf("canonicalHost(%q) = %q, %v; not idempotent", got, again, err)
		}
	}
}

func TestCanonicalHostRefuses(t *testing.T) {
	cases := []struct{ in, why string }{
		{"", "empty"},
		{".", "empty"},
		{"..", "empty label"},
		{"a..b", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"exa\x00mple.com", "NUL"},
		{"example.com\x00.evil.test", "NUL"},
		{"example.com\r\nX-Injected: 1", "CR or LF"},
		{"example.com\n", "CR or LF"},
		{"example.com\r", "CR or LF"},
		{"exa\tmple.com", "control"},
		{"\x7fexample.com", "control"},
		{"example .com", "space"},
		{" example.com", "space"},
		{"example.com\u00a0", "Unicode space"},
		{"example\u2028.com", "Unicode space"},
		{"example\u0085.com", "Unicode space"},
		{"allowed.com@evil.test", "userinfo"},
		{"user@allowed.com", "userinfo"},
		{"allowed.com/evil", "path"},
		{"allowed.com\\evil", "path"},
		{"http://allowed.com", "path"},
		{"http:allowed.com", "without its port"},
		{"allowed.com:443", "without its port"},
		{"127.0.0.1:8080", "without its port"},
		{"a:b:c", "IPv6"},
		{"allowed.com?x", "query"},
		{"allowed.com#x", "query"},
		{"allowed%2ecom", "zone id or escape"},
		{"fe80::1%eth0", "zone id"},
		{"[fe80::1%25eth0]", "zone id"},
		{"[fe80::1%eth0]", "zone id"},
		{"*.example.com", "'*'"},
		{"[::1", "unbalanced"},
		{"::1]", "stray bracket"},
		{"[127.0.0.1]", "only IPv6"},
		{"[example.com]", "only IPv6"},
		{"[]", "unbalanced"},
		{"a[b].com", "stray bracket"},
		{"1:2:3", "IPv6"},
		{":::", "IPv6"},
		{"a_b.com", "internationalised"},
		{"-a.com", "'-'"},
		{"a-.com", "'-'"},
		{"bücher.ab--c.com", "internationalised"}, // IDNA refuses "--" at 3-4 beside a U-label
		{"аpple.com", "mixes scripts"},            // Cyrillic а + Latin
		{"xn--pple-43d.com", "mixes scripts"},     // the same as an A-label
		{"xn--a.com", "internationalised"},        // invalid punycode
		{"xn--abc-.com", "internationalised"},
		{strings.Repeat("a", 64) + ".com", "63"},
		{strings.Repeat("a.", 127) + "com", "253"},
		{strings.Repeat("a", 2000), "too long"},
		{"\xff.com", "UTF-8"},
		{"раypal.com", "mixes scripts"}, // Cyrillic р, а with Latin
		{"gοοgle.com", "mixes scripts"}, // Greek omicrons
		{"a。", "empty label"},           // U+3002 maps to a dot: "a." after mapping
		{"ex\u200dample.com", "internationalised"},
		// numeric last label: IPv4 or nothing, never a name
		{"1.2.3.4.5", "IPv4"},
		{"256.0.0.1", "IPv4"},
		{"1.256.0.1", "IPv4"},
		{"1.2.65536", "IPv4"},
		{"4294967296", "IPv4"},
		{"08.0.0.1", "IPv4"},
		{"0x", "IPv4"},
		{"0x.0x.0x.0x", "IPv4"},
		{"0xfffffffff", "IPv4"},
		{"99999999999999999999999999", "IPv4"},
		{"example.123", "IPv4"},
		{"example.0x1f", "IPv4"},
	}
	for _, c := range cases {
		got, err := canonicalHost(c.in)
		if err == nil {
			t.Errorf("canonicalHost(%q) = %q, want an error (%s)", c.in, got, c.why)
			continue
		}
		if !strings.Contains(err.Error(), c.why) {
			t.Errorf("canonicalHost(%q) error %q, want it to mention %q", c.in, err, c.why)
		}
		if strings.ContainsAny(err.Error(), "\x00\r\n") {
			t.Errorf("canonicalHost(%q) error %q is not one line", c.in, err)
		}
	}
}
