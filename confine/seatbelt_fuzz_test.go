package confine

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzSBString: a path either is refused or becomes one SBPL string
// literal that reads back as exactly the path (no quote or backslash can
// end the literal early); its regex form matches the path and nothing
// longer.
func FuzzSBString(f *testing.F) {
	for _, s := range []string{"/a/b", `/a"b`, `/a\b`, `/a\"b`, "/a b/(c)", "/x\x00y", "/é/ü", `/a"\`, "/.*+?[]{}()|^$", "/tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := sbString(s)
		if err != nil {
			return
		}
		if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
			t.Fatalf("%q quoted as %s", s, q)
		}
		body := q[1 : len(q)-1]
		var back strings.Builder
		for i := 0; i < len(body); i++ {
			switch body[i] {
			case '\\':
				if i+1 >= len(body) || (body[i+1] != '\\' && body[i+1] != '"') {
					t.Fatalf("%q: dangling escape in %s", s, q)
				}
				i++
				back.WriteByte(body[i])
			case '"':
				t.Fatalf("%q: an unescaped quote ends %s early", s, q)
			default:
				back.WriteByte(body[i])
			}
		}
		if back.String() != s {
			t.Fatalf("%q reads back as %q", s, back.String())
		}
		r, err := sbRegexQuote(s)
		if err != nil {
			t.Fatalf("%q: regex quote refused what the string quote took: %v", s, err)
		}
		re, err := regexp.Compile("^" + r + "$")
		if err != nil {
			t.Fatalf("%q: regex %q does not compile: %v", s, r, err)
		}
		if !re.MatchString(s) || re.MatchString(s+"x") || (len(s) > 0 && re.MatchString(s[:len(s)-1])) {
			t.Fatalf("%q: regex %q matches more or less than the path", s, r)
		}
	})
}
