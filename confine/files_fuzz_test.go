package confine

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCleanModelPath: the lexical layer never panics, never accepts a NUL,
// a leading ~ or invalid UTF-8, always yields a clean absolute path, and
// its display form never claims the workdir for a path outside it (so a
// prefix sibling such as /w/proj-evil is never shown as inside /w/proj).
func FuzzCleanModelPath(f *testing.F) {
	for _, s := range []string{"README", "../x", "/etc/passwd", "a/../../b", ".git//config", "~/.ssh", "a\x00b", "/w/proj-evil/x", "./", "..", "/", "sub/./../.GIT/hooks", "\xff"} {
		f.Add(s)
	}
	const wd = "/w/proj"
	f.Fuzz(func(t *testing.T, p string) {
		abs, display, ok := cleanModelPath(wd, p)
		if !ok {
			return
		}
		if strings.IndexByte(p, 0) >= 0 || strings.HasPrefix(p, "~") || !utf8.ValidString(p) || p == "" {
			t.Fatalf("accepted %q", p)
		}
		if !filepath.IsAbs(abs) || filepath.Clean(abs) != abs {
			t.Fatalf("%q -> %q is not clean and absolute", p, abs)
		}
		inside := abs == wd || strings.HasPrefix(abs, wd+"/")
		if inside != Within(abs, wd) {
			t.Fatalf("Within disagrees for %q", abs)
		}
		if !inside && !filepath.IsAbs(display) && !strings.HasPrefix(display, "..") {
			t.Fatalf("%q lies outside the workdir but displays as %q", abs, display)
		}
		if inside && filepath.Join(wd, display) != abs {
			t.Fatalf("%q displays as %q, which is %q", abs, display, filepath.Join(wd, display))
		}
	})
}

// FuzzIsGitComponent: every spelling git or a case-folding filesystem
// would take for .git is caught.
func FuzzIsGitComponent(f *testing.F) {
	for _, s := range []string{".git", ".GIT", ".Git.", ".git ", "git", ".gitignore", "GIT~1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		got := isGitComponent(c)
		if strings.EqualFold(strings.TrimRight(c, ". "), ".git") && !got {
			t.Fatalf("%q not caught", c)
		}
		if strings.EqualFold(c, ".gitignore") && got {
			t.Fatalf("%q refused", c)
		}
	})
}
