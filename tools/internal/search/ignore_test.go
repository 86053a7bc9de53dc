package search

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// watchdog panics, naming the input, when the returned func is not called
// within 3 s: a fuzz input that hangs is reported instead of stalling the
// fuzzer.
func watchdog(input string) func() {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			panic("slow fuzz input: " + input)
		}
	}()
	return func() { close(done) }
}

func TestParseIgnoreLine(t *testing.T) {
	tests := []struct {
		line                        string
		wantOK                      bool
		negate, dirOnly, basenameOK bool
	}{
		{"", false, false, false, false},
		{"# comment", false, false, false, false},
		{"   ", false, false, false, false},
		{"!", false, false, false, false},
		{"/", false, false, false, false},
		{"foo", true, false, false, true},
		{"!foo", true, true, false, true},
		{"foo/", true, false, true, true},
		{"/foo", true, false, false, false},
		{"a/b", true, false, false, false},
		{"!a/b/", true, true, true, false},
		{`\#foo`, true, false, false, true},
		{`\!foo`, true, false, false, true},
		{"[abc", false, false, false, false},
		{`foo\`, false, false, false, false},
		{"**", true, false, false, true},
	}
	for _, tt := range tests {
		r, ok := parseIgnoreLine(tt.line)
		if ok != tt.wantOK {
			t.Errorf("parseIgnoreLine(%q) ok = %v, want %v", tt.line, ok, tt.wantOK)
			continue
		}
		if !ok {
			continue
		}
		if r.negate != tt.negate || r.dirOnly != tt.dirOnly || r.basename != tt.basenameOK {
			t.Errorf("parseIgnoreLine(%q) = negate %v dirOnly %v basename %v, want %v %v %v",
				tt.line, r.negate, r.dirOnly, r.basename, tt.negate, tt.dirOnly, tt.basenameOK)
		}
	}
}

func TestTrimTrailingSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"foo":      "foo",
		"foo  ":    "foo",
		`foo\ `:    `foo\ `,
		`foo\  `:   `foo\ `,
		`foo\\  `:  `foo\\`,
		"a b ":     "a b",
		`foo\`:     `foo\`,
		"   ":      "",
		`\ \ \ `:   `\ \ \ `,
		"f\too \t": "f\too \t",
	} {
		if got := trimTrailingSpaces(in); got != want {
			t.Errorf("trimTrailingSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIgnoreRules checks single .gitignore files at the root against
// gitignore(5)'s own examples and the corners of its syntax.
func TestIgnoreRules(t *testing.T) {
	type probe struct {
		path  string
		isDir bool
		want  bool
	}
	f := func(p string, want bool) probe { return probe{p, false, want} }
	d := func(p string, want bool) probe { return probe{p, true, want} }
	tests := []struct {
		name   string
		rules  string
		probes []probe
	}{
		{"basename at any depth", "hello.*", []probe{
			f("hello.txt", true), f("a/b/hello.c", true), f("hello", false), d("hello.d", true), f("ahello.txt", false),
		}},
		{"dir only: foo/", "foo/", []probe{
			d("foo", true), d("a/foo", true), f("foo", false), f("a/foo", false),
		}},
		{"doc/frotz/ anchored by the middle slash", "doc/frotz/", []probe{
			d("doc/frotz", true), d("a/doc/frotz", false), f("doc/frotz", false),
		}},
		{"frotz/ matches at any level", "frotz/", []probe{
			d("frotz", true), d("a/frotz", true), d("a/b/frotz", true),
		}},
		{"leading slash anchors", "/bar", []probe{
			f("bar", true), f("a/bar", false), d("bar", true),
		}},
		{"no slash floats", "bar", []probe{
			f("bar", true), f("a/bar", true), d("a/b/bar", true), f("barx", false),
		}},
		{"negation, last match wins", "*.html\n!foo.html", []probe{
			f("a.html", true), f("foo.html", false), f("x/foo.html", false), f("x/y.html", true),
		}},
		{"negation then re-exclusion", "!foo.html\n*.html", []probe{
			f("foo.html", true),
		}},
		{"gitignore(5): everything but foo/bar", "/*\n!/foo\n/foo/*\n!/foo/bar", []probe{
			f("x", true), d("foo", false), f("foo/x", true), d("foo/bar", false), f("foo/bar/baz", false), d("y", true),
		}},
		{"leading **/ in all directories", "**/foo", []probe{
			f("foo", true), f("a/foo", true), d("a/b/foo", true), f("foox", false),
		}},
		{"**/foo/bar", "**/foo/bar", []probe{
			f("foo/bar", true), f("x/foo/bar", true), f("x/y/foo/bar", true), f("foo/x/bar", false), f("bar", false),
		}},
		{"trailing /** everything inside, not the dir", "abc/**", []probe{
			d("abc", false), f("abc/x", true), f("abc/x/y", true), f("x/abc/y", false),
		}},
		{"/**/ zero or more directories", "a/**/b", []probe{
			f("a/b", true), f("a/x/b", true), f("a/x/y/b", true), f("x/a/b", false), f("a/bb", false),
		}},
		{"** glued to a name is *", "foo**bar", []probe{
			f("foobar", true), f("fooxbar", true), f("x/fooxybar", true),
		}},
		{"a lone ** is *", "**", []probe{
			f("x", true), d("a", true),
		}},
		{"* does not cross /", "doc/*.txt", []probe{
			f("doc/a.txt", true), f("doc/sub/a.txt", false), f("a/doc/a.txt", false),
		}},
		{"? is one character", "?.c", []probe{
			f("a.c", true), f("ab.c", false), f(".c", false), f("x/b.c", true),
		}},
		{"escaped # and !", "\\#file\n\\!important", []probe{
			f("#file", true), f("!important", true), f("file", false), f("important", false),
		}},
		{"comments and blank lines", "# foo\n\n  \nbar", []probe{
			f("# foo", false), f("foo", false), f("bar", true),
		}},
		{"trailing spaces dropped", "foo   ", []probe{
			f("foo", true), f("foo   ", false),
		}},
		{"escaped trailing space kept", "foo\\ ", []probe{
			f("foo ", true), f("foo", false),
		}},
		{"character classes", "[abc].txt\n[!a-y]z\nf[[:digit:]]", []probe{
			f("a.txt", true), f("d.txt", false), f("zz", true), f("bz", false), f("f1", true), f("fx", false),
		}},
		{"class with ] first and range", "[]a-c]x", []probe{
			f("]x", true), f("bx", true), f("dx", false),
		}},
		{"negated class with ^", "[^a]y", []probe{
			f("by", true), f("ay", false),
		}},
		{"dot files are plain names", "*", []probe{
			f(".env", true), d(".config", true),
		}},
		{"CRLF line endings", "foo\r\nbar\r\n", []probe{
			f("foo", true), f("bar", true),
		}},
		{"dir-only negation", "build*\n!build/", []probe{
			d("build", false), f("build", true), f("buildx", true),
		}},
		{"invalid line dropped, others kept", "[oops\nkeep", []probe{
			f("[oops", false), f("keep", true),
		}},
		{"whitelist idiom", "*\n!*/\n!*.go", []probe{
			f("a.go", false), f("a.txt", true), d("sub", false), f("sub/b.go", false), f("sub/b.md", true),
		}},
		{"anchored with wildcard dir", "/src/*/gen", []probe{
			d("src/a/gen", true), d("src/a/b/gen", false),
		}},
		{"case sensitive", "README", []probe{
			f("README", true), f("readme", false),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ig := NewIgnorer(newMemFS(map[string]string{".gitignore": tt.rules}))
			for _, p := range tt.probes {
				if got := ig.Ignored(p.path, p.isDir); got != p.want {
					t.Errorf("rules %q: Ignored(%q, dir=%v) = %v, want %v", tt.rules, p.path, p.isDir, got, p.want)
				}
			}
		})
	}
}

func TestIgnoreParentExcludedCannotBeReincluded(t *testing.T) {
	ig := NewIgnorer(newMemFS(map[string]string{".gitignore": "build/\n!build/keep.txt\n"}))
	if !ig.Ignored("build/keep.txt", false) {
		t.Error("build/keep.txt re-included although its directory is excluded")
	}
	if !ig.Ignored("build/sub/x", false) {
		t.Error("build/sub/x not ignored")
	}
}

func TestIgnoreGitAlwaysIgnored(t *testing.T) {
	ig := NewIgnorer(newMemFS(map[string]string{".gitignore": "!.git\n"}))
	for _, p := range []string{".git", "sub/.git", ".git/config"} {
		if !ig.Ignored(p, true) {
			t.Errorf("Ignored(%q) = false, want true", p)
		}
	}
	if ig.Ignored("", true) || ig.Ignored(".", true) {
		t.Error("the root itself is ignored")
	}
	if ig.Ignored("../x", false) {
		t.Error("an invalid path is ignored")
	}
}

func TestIgnoreNested(t *testing.T) {
	fsys := newMemFS(map[string]string{
		".gitignore":            "*.log\n/local\ntmp/\n",
		"sub/.gitignore":        "!keep.log\n/local\n*.gen\n",
		"sub/deeper/.gitignore": "!*.gen\n",
		"other/x.gen":           "",
	})
	ig := NewIgnorer(fsys)
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"a.log", false, true},
		{"sub/a.log", false, true},
		{"sub/keep.log", false, false},
		{"sub/x/keep.log", false, false}, // the negation floats within sub
		{"keep.log", false, true},        // but does not apply above sub
		{"local", false, true},
		{"sub/local", false, true},
		{"sub/x/local", false, false}, // anchored to sub
		{"other/local", false, false},
		{"sub/a.gen", false, true},
		{"other/x.gen", false, false},
		{"sub/deeper/a.gen", false, false}, // the deeper file wins
		{"sub/tmp", true, true},
		{"sub/tmp", false, false},
	}
	for _, tt := range tests {
		if got := ig.Ignored(tt.path, tt.isDir); got != tt.want {
			t.Errorf("Ignored(%q, dir=%v) = %v, want %v", tt.path, tt.isDir, got, tt.want)
		}
	}
}

func TestIgnoreDotIgnoreAndInfoExclude(t *testing.T) {
	fsys := newMemFS(map[string]string{
		".git/info/exclude": "secret*\n*.bak\n",
		".gitignore":        "!secret-ok\n*.tmp\n",
		".ignore":           "!important.tmp\n",
		"sub/.ignore":       "vendor/\n",
	})
	ig := NewIgnorer(fsys)
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"secret.txt", false, true},     // info/exclude
		{"a/b.bak", false, true},        // info/exclude floats
		{"secret-ok", false, false},     // .gitignore beats info/exclude
		{"x.tmp", false, true},          // .gitignore
		{"important.tmp", false, false}, // .ignore beats .gitignore
		{"sub/vendor", true, true},      // nested .ignore
		{"vendor", true, false},
	}
	for _, tt := range tests {
		if got := ig.Ignored(tt.path, tt.isDir); got != tt.want {
			t.Errorf("Ignored(%q, dir=%v) = %v, want %v", tt.path, tt.isDir, got, tt.want)
		}
	}
}

func TestIgnoreLoadsLazilyAndOnce(t *testing.T) {
	fsys := newMemFS(map[string]string{"a/b/.gitignore": "x\n", "a/b/c/d": ""})
	ig := NewIgnorer(fsys)
	if !ig.Ignored("a/b/c/x", false) {
		t.Fatal("nested rule not applied")
	}
	before := fsys.opens.Load()
	for range 10 {
		ig.Ignored("a/b/c/x", false)
	}
	if got := fsys.opens.Load(); got != before {
		t.Errorf("ignore files re-read: %d opens after the first lookup", got-before)
	}
}

func TestIgnoreFileBOMAndHugeLines(t *testing.T) {
	rules := "\xef\xbb\xbffoo\n" + strings.Repeat("a", maxIgnoreLineBytes+1) + "\nbar\n"
	ig := NewIgnorer(newMemFS(map[string]string{".gitignore": rules}))
	if !ig.Ignored("foo", false) || !ig.Ignored("bar", false) {
		t.Error("BOM or an over-long line broke the other rules")
	}
}

// FuzzIgnorePattern: the gitignore parser never panics, and a parsed rule
// can be matched against any path.
func FuzzIgnorePattern(f *testing.F) {
	for _, s := range []string{
		"*.o", "!keep", "/a/**/b/", "\\#x", "[!a-z]?", "[[:alpha:]]", "a/**", "**/", "[", "\\", "foo\\ ",
		"[]-]", "[z-a]", "**/**/x", "a//b", "/", "[[:nope:]]", "\xff\xfe", "{a,b}",
	} {
		f.Add(s, "a/b/c.o", true)
	}
	f.Fuzz(func(t *testing.T, line, path string, isDir bool) {
		defer watchdog(fmt.Sprintf("line %q path %q dir %v", line, path, isDir))()
		rules := parseIgnore([]byte(line))
		_, base := splitDir(path)
		for i := range rules {
			rules[i].match(path, base, isDir)
		}
		ig := NewIgnorer(newMemFS(map[string]string{".gitignore": line}))
		ig.Ignored(path, isDir)
	})
}
