//go:build linux

package confine

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fxWalk visits every directory under d, descending only into real
// directories, and records what it saw.
func fxWalk(d *Dir, depth int, seen map[string]DirEntry) error {
	if depth > 64 {
		return fmt.Errorf("fxWalk too deep at %s", d.Display())
	}
	ents, _, err := d.Entries(0)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(d.Display(), e.Name)
		seen[p] = e
		if e.Kind != PathDir {
			continue
		}
		c, err := d.OpenDir(e.Name)
		if err != nil {
			var den *Denial
			if errors.As(err, &den) {
				continue
			}
			return err
		}
		err = fxWalk(c, depth+1, seen)
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func TestDirWalk(t *testing.T) {
	f := newFileFixture(t)
	fxSymlink(t, "..", filepath.Join(f.wt, "sub", "up"))
	fxSymlink(t, ".", filepath.Join(f.wt, "sub", "self"))
	fxSymlink(t, f.home, filepath.Join(f.wt, "to-home"))
	for _, mode := range modeCols {
		fa := f.access(t, mode)
		d, err := fa.OpenDir(".")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]DirEntry{}
		done := make(chan error, 1)
		go func() { done <- fxWalk(d, 0, seen) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: walk: %v", mode, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: fxWalk did not terminate", mode)
		}
		d.Close()
		for name, want := range map[string]PathKind{"sub/up": PathSymlink, "sub/self": PathSymlink, "linkdir": PathSymlink, "fifo": PathOther, "sub/a.txt": PathFile, ".git": PathDir} {
			if e, ok := seen[name]; !ok || e.Kind != want {
				t.Errorf("%s: %s = %+v, want kind %v", mode, name, e, want)
			}
		}
		if seen["linkdir"].Target != f.outside {
			t.Errorf("%s: linkdir target %q", mode, seen["linkdir"].Target)
		}
		for p := range seen {
			if strings.HasPrefix(p, "linkdir/") || strings.HasPrefix(p, "to-home/") || strings.HasPrefix(p, "sub/up/") {
				t.Errorf("%s: fxWalk followed a symlink: %s", mode, p)
			}
		}
		// A hard link to a secret is omitted from listings in every
		// sandboxed mode.
		if _, ok := seen["hl-secret"]; ok != (mode == ModeOff) {
			t.Errorf("%s: hl-secret listed = %v", mode, ok)
		}

		d, err = fa.OpenDir("sub")
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.OpenDir("up")
		fxCheck(t, string(mode)+" OpenDir(symlink)", err, RuleSymlink)
		_, err = d.OpenFile("self")
		fxCheck(t, string(mode)+" OpenFile(symlink)", err, RuleSymlink)
		_, err = d.OpenDir("..")
		fxCheck(t, string(mode)+" OpenDir(..)", err, RuleInvalidPath)
		_, err = d.OpenFile("../file.txt")
		fxCheck(t, string(mode)+" OpenFile(../x)", err, RuleInvalidPath)
		file, err := d.OpenFile("a.txt")
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(file); string(b) != "a" {
			t.Fatalf("read %q", b)
		}
		file.Close()
		if d.Display() != "sub" {
			t.Errorf("display %q", d.Display())
		}
		d.Close()
		top, _ := fa.OpenDir(".")
		_, err = top.OpenFile("fifo")
		fxCheck(t, string(mode)+" OpenFile(fifo)", err, RuleNotRegular)
		_, err = top.OpenFile("hl-secret")
		fxCheck(t, string(mode)+" OpenFile(hl-secret)", err, [4]string{wantOK, RuleDenylist, RuleDenylist, RuleDenylist}[modeIndex(modeCols, mode)])
		ents, trunc, err := top.Entries(3)
		if err != nil || len(ents) != 3 || !trunc {
			t.Errorf("%s: Entries(3) = %d entries, truncated %v, %v", mode, len(ents), trunc, err)
		}
		top.Close()

		_, err = fa.OpenDir("..")
		fxCheck(t, string(mode)+" OpenDir(..)", err, [4]string{wantOK, wantOK, wantOK, RuleOutside}[modeIndex(modeCols, mode)])
		_, err = fa.OpenDir("linkdir")
		fxCheck(t, string(mode)+" OpenDir(linkdir)", err, [4]string{wantOK, wantOK, wantOK, RuleOutside}[modeIndex(modeCols, mode)])
	}
}

func modeIndex(ms [4]Mode, m Mode) int {
	for i, x := range ms {
		if x == m {
			return i
		}
	}
	return -1
}

func TestDirOmitsDenylisted(t *testing.T) {
	f := newFileFixture(t)
	// ~/.aws reached through a symlink: masked at its real location too.
	realAws := filepath.Join(f.root, "dotfiles", "aws")
	fxWrite(t, filepath.Join(realAws, "credentials"), "SECRET-AWS")
	fxSymlink(t, realAws, filepath.Join(f.home, ".aws"))
	for _, mode := range []Mode{ModeOff, ModeReadOnly, ModeWorkspaceWrite} {
		fa := f.access(t, mode)
		d, err := fa.OpenDir(f.home)
		if err != nil {
			t.Fatal(err)
		}
		ents, _, err := d.Entries(0)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, e := range ents {
			names[e.Name] = true
		}
		masked := mode != ModeOff
		for _, n := range []string{".ssh", ".netrc", ".aws"} {
			if names[n] == masked {
				t.Errorf("%s: %s listed = %v", mode, n, names[n])
			}
		}
		if !names["notes.txt"] {
			t.Errorf("%s: notes.txt missing", mode)
		}
		_, err = d.OpenDir(".ssh")
		fxCheck(t, string(mode)+" child .ssh", err, map[bool]string{true: RuleDenylist, false: wantOK}[masked])
		d.Close()
		_, err = fa.OpenDir(filepath.Join(f.home, ".ssh"))
		fxCheck(t, string(mode)+" ~/.ssh", err, map[bool]string{true: RuleDenylist, false: wantOK}[masked])
		_, _, err = fa.OpenRead(filepath.Join(realAws, "credentials"))
		fxCheck(t, string(mode)+" real aws", err, map[bool]string{true: RuleDenylist, false: wantOK}[masked])
		dd, err := fa.OpenDir(filepath.Join(f.root, "dotfiles"))
		if err != nil {
			t.Fatal(err)
		}
		ents, _, _ = dd.Entries(0)
		if (len(ents) == 0) != masked {
			t.Errorf("%s: dotfiles entries %v", mode, ents)
		}
		dd.Close()
	}
}
