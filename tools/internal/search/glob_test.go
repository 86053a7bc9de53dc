package search

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// globTree is the tree most glob tests walk.
var globTree = map[string]string{
	"main.go":                  "",
	"a.go":                     "",
	"b.go":                     "",
	"ab.go":                    "",
	"README.md":                "",
	"notes.txt":                "",
	".env":                     "",
	".github/workflows/ci.yml": "",
	"src/app.go":               "",
	"src/app_test.go":          "",
	"src/util/str.go":          "",
	"src/util/test/fix.go":     "",
	"src/.hidden/h.go":         "",
	"src/test/x.go":            "",
	"cmd/tool/main.go":         "",
	"pkg/lib/lib.go":           "",
	"pkg/lib/doc.md":           "",
	"docs/guide.md":            "",
	"docs/empty/":              "",
	"a-c/z.go":                 "",
	"weird/*star.go":           "",
	"weird/{brace}.go":         "",
}

func TestGlob(t *testing.T) {
	fsys := newMemFS(globTree)
	tests := []struct {
		pattern string
		opts    GlobOptions
		want    []string
	}{
		{"*.go", GlobOptions{}, []string{"a.go", "ab.go", "b.go", "main.go"}},
		{"./*.go", GlobOptions{}, []string{"a.go", "ab.go", "b.go", "main.go"}},
		{"?.go", GlobOptions{}, []string{"a.go", "b.go"}},
		{"[a].go", GlobOptions{}, []string{"a.go"}},
		{"[!a]*.go", GlobOptions{}, []string{"b.go", "main.go"}},
		{"**/*.go", GlobOptions{}, []string{
			"a-c/z.go", "a.go", "ab.go", "b.go", "cmd/tool/main.go", "main.go", "pkg/lib/lib.go",
			"src/app.go", "src/app_test.go", "src/test/x.go", "src/util/str.go", "src/util/test/fix.go",
			"weird/*star.go", "weird/{brace}.go",
		}},
		// ** at the start
		{"**/main.go", GlobOptions{}, []string{"cmd/tool/main.go", "main.go"}},
		// ** in the middle: zero or more directories
		{"src/**/test/*.go", GlobOptions{}, []string{"src/test/x.go", "src/util/test/fix.go"}},
		// ** at the end: everything inside
		{"src/**", GlobOptions{}, []string{"src/app.go", "src/app_test.go", "src/test/x.go", "src/util/str.go", "src/util/test/fix.go"}},
		{"**", GlobOptions{Path: "pkg"}, []string{"pkg/lib/doc.md", "pkg/lib/lib.go"}},
		{"{cmd,pkg}/**/*.go", GlobOptions{}, []string{"cmd/tool/main.go", "pkg/lib/lib.go"}},
		{"**/*.{md,txt}", GlobOptions{}, []string{"README.md", "docs/guide.md", "notes.txt", "pkg/lib/doc.md"}},
		{"src/{app,util/str}.go", GlobOptions{}, []string{"src/app.go", "src/util/str.go"}},
		{"{src/{app,test/x},b}.go", GlobOptions{}, []string{"b.go", "src/app.go", "src/test/x.go"}},
		{"src/*_test.go", GlobOptions{}, []string{"src/app_test.go"}},
		// Hidden files: only a component starting with "." matches them...
		{"*", GlobOptions{}, []string{"README.md", "a.go", "ab.go", "b.go", "main.go", "notes.txt"}},
		{".*", GlobOptions{}, []string{".env"}},
		{"**/.env", GlobOptions{}, []string{".env"}},
		{".github/**", GlobOptions{}, []string{".github/workflows/ci.yml"}},
		{"**/*.yml", GlobOptions{}, nil},
		{"src/**/h.go", GlobOptions{}, nil},
		{"src/.hidden/*.go", GlobOptions{}, []string{"src/.hidden/h.go"}},
		// ... unless Hidden.
		{"*", GlobOptions{Hidden: true}, []string{".env", "README.md", "a.go", "ab.go", "b.go", "main.go", "notes.txt"}},
		{"**/*.yml", GlobOptions{Hidden: true}, []string{".github/workflows/ci.yml"}},
		{"src/**/h.go", GlobOptions{Hidden: true}, []string{"src/.hidden/h.go"}},
		// A trailing slash matches directories only.
		{"*/", GlobOptions{}, []string{"a-c", "cmd", "docs", "pkg", "src", "weird"}},
		{"**/test/", GlobOptions{}, []string{"src/test", "src/util/test"}},
		{"docs/*/", GlobOptions{}, []string{"docs/empty"}},
		// Without one, directories are not returned.
		{"docs/*", GlobOptions{}, []string{"docs/guide.md"}},
		// Escapes.
		{`weird/\**`, GlobOptions{}, []string{"weird/*star.go"}},
		{`weird/\{brace\}.go`, GlobOptions{}, []string{"weird/{brace}.go"}},
		{`weird/[{]*`, GlobOptions{}, []string{"weird/{brace}.go"}},
		// Path: the pattern is relative to it, results to the root.
		{"*.go", GlobOptions{Path: "src"}, []string{"src/app.go", "src/app_test.go"}},
		{"**/*.go", GlobOptions{Path: "./src/util"}, []string{"src/util/str.go", "src/util/test/fix.go"}},
		// Literal paths.
		{"src/app.go", GlobOptions{}, []string{"src/app.go"}},
		{"src/nope.go", GlobOptions{}, nil},
		{"a/./b/../x", GlobOptions{}, nil}, // rejected below; here to keep the table honest
	}
	for _, tt := range tests {
		if strings.Contains(tt.pattern, "..") {
			continue
		}
		t.Run(tt.pattern, func(t *testing.T) {
			res, err := Glob(fsys, tt.pattern, tt.opts)
			if err != nil {
				t.Fatalf("Glob(%q): %v", tt.pattern, err)
			}
			if tt.want == nil {
				tt.want = []string{}
			}
			if !reflect.DeepEqual(res.Paths, tt.want) {
				t.Errorf("Glob(%q, %+v)\n got %q\nwant %q", tt.pattern, tt.opts, res.Paths, tt.want)
			}
			if res.Truncated {
				t.Errorf("Glob(%q) truncated", tt.pattern)
			}
		})
	}
}

func TestGlobErrors(t *testing.T) {
	fsys := newMemFS(globTree)
	tests := []struct {
		pattern string
		opts    GlobOptions
		wantErr error
	}{
		{"", GlobOptions{}, ErrBadPattern},
		{"/etc/*", GlobOptions{}, ErrBadPath},
		{"../*", GlobOptions{}, ErrBadPath},
		{"src/../../x", GlobOptions{}, ErrBadPath},
		{"{..,src}/*", GlobOptions{}, ErrBadPath},
		{"{/etc,src}/*", GlobOptions{}, ErrBadPath},
		{"a\x00b", GlobOptions{}, ErrBadPath},
		{"{a,b", GlobOptions{}, ErrBadPattern},
		{"[abc", GlobOptions{}, ErrBadPattern},
		{"[[:nope:]]", GlobOptions{}, ErrBadPattern},
		{`a\`, GlobOptions{}, ErrBadPattern},
		{".", GlobOptions{}, ErrBadPattern},
		{"./", GlobOptions{}, ErrBadPattern},
		{strings.Repeat("{a,b}", 9), GlobOptions{}, ErrBadPattern}, // 512 alternatives
		{strings.Repeat("a", maxGlobLen+1), GlobOptions{}, ErrBadPattern},
		{"*", GlobOptions{Path: "../x"}, ErrBadPath},
		{"*", GlobOptions{Path: "/abs"}, ErrBadPath},
		{"*", GlobOptions{Limit: -1}, ErrBadOption},
	}
	for _, tt := range tests {
		_, err := Glob(fsys, tt.pattern, tt.opts)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Glob(%q, %+v) error = %v, want %v", clipForError(tt.pattern), tt.opts, err, tt.wantErr)
		}
	}
	if _, err := Glob(fsys, "*", GlobOptions{Path: "nope"}); err == nil {
		t.Error("Glob under a missing path: no error")
	}
	if _, err := Glob(fsys, "*", GlobOptions{Path: "main.go"}); err == nil {
		t.Error("Glob under a file: no error")
	}
	// Exactly 256 alternatives are fine.
	if _, err := Glob(fsys, strings.Repeat("{a,b}", 8), GlobOptions{}); err != nil {
		t.Errorf("256 alternatives: %v", err)
	}
}

func TestGlobIgnoreRules(t *testing.T) {
	fsys := newMemFS(map[string]string{
		".gitignore":        "build/\n*.gen.go\n!keep.gen.go\n",
		"main.go":           "",
		"x.gen.go":          "",
		"keep.gen.go":       "",
		"build/out.go":      "",
		"sub/.gitignore":    "local.go\n",
		"sub/local.go":      "",
		"sub/ok.go":         "",
		".git/config":       "",
		".git/hooks/pre.go": "",
		"node/.git":         "gitdir: x", // a submodule's .git file
		"node/index.go":     "",
		".git/info/exclude": "excluded.go\n",
		"excluded.go":       "",
	})
	res, err := Glob(fsys, "**/*.go", GlobOptions{Hidden: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"keep.gen.go", "main.go", "node/index.go", "sub/ok.go"}
	if !reflect.DeepEqual(res.Paths, want) {
		t.Errorf("with ignore rules: got %q, want %q", res.Paths, want)
	}
	res, err = Glob(fsys, "**/*.go", GlobOptions{Hidden: true, NoIgnore: true})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{".git/hooks/pre.go", "build/out.go", "excluded.go", "keep.gen.go", "main.go", "node/index.go", "sub/local.go", "sub/ok.go", "x.gen.go"}
	if !reflect.DeepEqual(res.Paths, want) {
		t.Errorf("NoIgnore: got %q, want %q", res.Paths, want)
	}
	// .git is skipped even when named, unless NoIgnore.
	res, _ = Glob(fsys, ".git/*", GlobOptions{})
	if len(res.Paths) != 0 {
		t.Errorf(".git/* = %q, want nothing", res.Paths)
	}
	// An ignored directory is never read.
	fsys.readDirs.Store(0)
	if _, err := Glob(fsys, "**/*.go", GlobOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := fsys.readDirs.Load(); n != 3 { // root, node, sub
		t.Errorf("read %d directories, want 3 (build and .git pruned)", n)
	}
}

func TestGlobPrunes(t *testing.T) {
	files := map[string]string{"src/a/b/c.go": ""}
	for i := range 50 {
		files[fmt.Sprintf("other%d/deep/x.go", i)] = ""
	}
	fsys := newMemFS(files)
	res, err := Glob(fsys, "src/*/b/*.go", GlobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Paths, []string{"src/a/b/c.go"}) {
		t.Errorf("got %q", res.Paths)
	}
	if n := fsys.readDirs.Load(); n != 4 { // root, src, src/a, src/a/b
		t.Errorf("read %d directories, want 4: the walk did not prune", n)
	}
}

func TestGlobOrderAndLimit(t *testing.T) {
	fsys := newMemFS(map[string]string{
		"a/b": "", "a-c": "", "a.x": "", "b": "", "a/a": "", "A": "", "a/c/d": "",
	})
	res, err := Glob(fsys, "**", GlobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Tree order: a directory's contents come right after it, so "a/..."
	// sorts before "a-c" although '-' < '/'.
	want := []string{"A", "a/a", "a/b", "a/c/d", "a-c", "a.x", "b"}
	if !reflect.DeepEqual(res.Paths, want) {
		t.Fatalf("got %q, want %q", res.Paths, want)
	}
	for limit := 1; limit <= len(want)+1; limit++ {
		res, err := Glob(fsys, "**", GlobOptions{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		n := min(limit, len(want))
		if !reflect.DeepEqual(res.Paths, want[:n]) {
			t.Errorf("Limit %d: got %q, want %q", limit, res.Paths, want[:n])
		}
		if wantTrunc := limit < len(want); res.Truncated != wantTrunc {
			t.Errorf("Limit %d: Truncated = %v, want %v", limit, res.Truncated, wantTrunc)
		}
	}
}

func TestGlobDefaultLimit(t *testing.T) {
	files := map[string]string{}
	for i := range DefaultGlobLimit + 5 {
		files[fmt.Sprintf("f%05d", i)] = ""
	}
	res, err := Glob(newMemFS(files), "*", GlobOptions{MaxEntries: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Paths) != DefaultGlobLimit || !res.Truncated {
		t.Errorf("got %d paths, truncated %v; want %d, true", len(res.Paths), res.Truncated, DefaultGlobLimit)
	}
}

func TestGlobCaps(t *testing.T) {
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("d%02d/f", i)] = ""
		files[fmt.Sprintf("g%02d", i)] = ""
	}
	fsys := newMemFS(files)

	res, err := Glob(fsys, "**", GlobOptions{MaxDirs: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Paths) != 4 { // root + d00..d03
		t.Errorf("MaxDirs 5: %d paths, truncated %v; want 4, true", len(res.Paths), res.Truncated)
	}

	res, err = Glob(fsys, "*", GlobOptions{MaxEntries: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.Skipped != 1 || len(res.Paths) > 10 {
		t.Errorf("MaxEntries 10: %d paths, truncated %v, skipped %d", len(res.Paths), res.Truncated, res.Skipped)
	}
}

// TestGlobHugeTreeTerminates: a tree far larger than the caps ends quickly
// with the truncation flag.
func TestGlobHugeTreeTerminates(t *testing.T) {
	fsys := wideFS{fanout: 50}
	start := time.Now()
	res, err := Glob(fsys, "**/nothing", GlobOptions{MaxDirs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated {
		t.Error("not truncated")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// wideFS is an infinite tree: every directory has fanout subdirectories.
type wideFS struct{ fanout int }

func (w wideFS) ReadDir(rel string, max int) ([]Entry, bool, error) {
	var out []Entry
	for i := range w.fanout {
		if len(out) == max {
			return out, true, nil
		}
		out = append(out, Entry{Name: fmt.Sprintf("d%d", i), Kind: Dir})
	}
	return out, false, nil
}

func (wideFS) Open(string) (r io.ReadCloser, err error) { return nil, os.ErrNotExist }

// badFS lists names a broken FS should never return.
type badFS struct{ memFS *memFS }

func (b badFS) ReadDir(rel string, max int) ([]Entry, bool, error) {
	ents, trunc, err := b.memFS.ReadDir(rel, max)
	if rel == "" {
		ents = append(ents, Entry{Name: "..", Kind: Dir}, Entry{Name: "a/b", Kind: File},
			Entry{Name: "", Kind: File}, Entry{Name: ".", Kind: Dir}, Entry{Name: "x\x00", Kind: File},
			Entry{Name: "dup.go", Kind: File}, Entry{Name: "dup.go", Kind: File})
	}
	return ents, trunc, err
}

func (b badFS) Open(rel string) (io.ReadCloser, error) { return b.memFS.Open(rel) }

func TestGlobDropsInvalidNames(t *testing.T) {
	res, err := Glob(badFS{newMemFS(map[string]string{"ok.go": ""})}, "**", GlobOptions{Hidden: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dup.go", "ok.go"}
	if !reflect.DeepEqual(res.Paths, want) {
		t.Errorf("got %q, want %q", res.Paths, want)
	}
}

// mkTree builds a real tree under t.TempDir().
func mkTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

func TestGlobSymlinks(t *testing.T) {
	outside := mkTree(t, map[string]string{"secret/key.go": "", "secret/deep/k2.go": ""})
	root := mkTree(t, map[string]string{"real/a.go": "", "real/sub/b.go": ""})
	symlink(t, outside, filepath.Join(root, "escape"))                     // a symlink to a directory outside
	symlink(t, "real", filepath.Join(root, "inner"))                       // a symlink to a directory inside
	symlink(t, "..", filepath.Join(root, "real", "up"))                    // a loop
	symlink(t, filepath.Join(root, "loop2"), filepath.Join(root, "loop1")) // a loop of two links
	symlink(t, filepath.Join(root, "loop1"), filepath.Join(root, "loop2"))
	symlink(t, "real/a.go", filepath.Join(root, "link.go")) // a symlink to a file

	fsys := NewOSFS(root)
	done := make(chan struct{})
	var res GlobResult
	var err error
	go func() {
		defer close(done)
		res, err = Glob(fsys, "**", GlobOptions{Hidden: true})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Glob did not terminate")
	}
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"escape", "inner", "link.go", "loop1", "loop2", "real/a.go", "real/sub/b.go", "real/up"}
	if !reflect.DeepEqual(res.Paths, want) {
		t.Errorf("got %q\nwant %q (symlinks are leaves)", res.Paths, want)
	}
	res, err = Glob(fsys, "**/*.go", GlobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"link.go", "real/a.go", "real/sub/b.go"}
	if !reflect.DeepEqual(res.Paths, want) {
		t.Errorf("got %q, want %q", res.Paths, want)
	}
	// A symlinked directory is not a directory: "*/" does not list it, and
	// a pattern through it finds nothing.
	res, _ = Glob(fsys, "*/", GlobOptions{})
	if !reflect.DeepEqual(res.Paths, []string{"real"}) {
		t.Errorf("*/ = %q, want [real]", res.Paths)
	}
	res, _ = Glob(fsys, "escape/**", GlobOptions{})
	if len(res.Paths) != 0 {
		t.Errorf("escape/** = %q, want nothing", res.Paths)
	}
	if _, err := Glob(fsys, "*", GlobOptions{Path: "escape"}); err == nil {
		t.Error("Glob with a symlinked Path: no error")
	}
}

func TestMatcherMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"*.go", "a.go", true},
		{"*.go", "a/b.go", false},
		{"**/*.go", "a/b/c.go", true},
		{"**/*.go", "c.go", true},
		{"a/**", "a", false},
		{"a/**", "a/b", true},
		{"a/**/b", "a/b", true},
		{"a/**/**/b", "a/x/y/b", true},
		{"{a,b}/c", "b/c", true},
		{"{a,b/{c,d}}/e", "b/d/e", true},
		{"x{,y}z", "xz", true},
		{"x{,y}z", "xyz", true},
		{"x{}z", "xz", true},
		{"[a-c]", "b", true},
		{"[c-a]", "b", false},
		{"[!]]", "]", false},
		{"[]]", "]", true},
		{"[[:upper:]]*", "Makefile", true},
		{"*", "", false},
		{"?", "é", true},
		{"\xff*", "\xffx", true},
		{"a\xff?", "a\xffb", true},
	}
	for _, tt := range tests {
		m, err := compileGlob(tt.pattern, true)
		if err != nil {
			t.Errorf("compileGlob(%q): %v", tt.pattern, err)
			continue
		}
		if got := m.matchPath(tt.path, false); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// FuzzGlobMatch: compiling and matching never panic and stay fast.
func FuzzGlobMatch(f *testing.F) {
	for _, s := range []string{
		"**/*.go", "{a,b}/**/c?", "[!a-z]*", "\\*", "{{a,b},{c,d}}", "[[:alpha:]]", "a/**/b/", "{", "[",
		"{a,[}]}", "**/**", "./x", "{,}", strings.Repeat("{a,b}", 8), "\xff[\xff-\xfe]",
	} {
		f.Add(s, "a/b/c.go", false)
	}
	f.Fuzz(func(t *testing.T, pattern, path string, hidden bool) {
		defer watchdog(fmt.Sprintf("pattern %q path %q", pattern, path))()
		start := time.Now()
		m, err := compileGlob(pattern, hidden)
		if err != nil {
			return
		}
		m.matchPath(path, false)
		m.matchPath(path, true)
		s := m.start()
		for _, c := range strings.Split(path, "/") {
			if s = m.step(s, c); s == nil {
				break
			}
			m.live(s)
			m.acceptsResult(s, true)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("pattern %q path %q took %v", pattern, path, d)
		}
	})
}
