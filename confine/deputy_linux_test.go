//go:build linux

package confine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// raceSpawns is how many spawns the surface race runs against its flipper.
const raceSpawns = 2000

// TestSurfaceRaceNeverWritesOutside: a command in a sandbox flips every git
// surface of a git dir it made (.git/modules/evil, writable by design)
// between absent and a symbolic link to a file outside every root, while
// another sandbox of the same policy is spawned raceSpawns times; each
// spawn's inspection pre-creates absent surfaces. The file outside keeps
// its bytes and the dangling targets are never created: the server creates
// surfaces relative to a held directory, exclusively, never through a link
// (docs/security.md, "What is enforced", "The server itself"). A spawn may be refused
// (ErrUnsafeLayout, ErrSandboxSetup) while a link is there; any other
// failure fails.
func TestSurfaceRaceNeverWritesOutside(t *testing.T) {
	p, f := livePolicy(t, ModeWorkspaceWrite)
	for _, d := range []string{".git/objects", ".git/refs/heads", ".git/hooks", ".git/modules"} {
		mustMkdir(t, filepath.Join(f.work, d))
	}
	writeFileT(t, filepath.Join(f.work, ".git/HEAD"), "ref: refs/heads/main\n")
	writeFileT(t, filepath.Join(f.work, ".git/config"), "[core]\n")
	outside := filepath.Join(f.root, "outside")
	mustMkdir(t, outside)
	victim := filepath.Join(outside, "victim")
	const keep = "the user's own bytes\n"
	writeFileT(t, victim, keep)
	names := []string{"config", "config.worktree", "gitdir", "commondir"}
	var targets []string
	for i, n := range names {
		tg := victim
		if i%2 == 1 {
			tg = filepath.Join(outside, "planted-"+n) // dangling: must never appear
		}
		targets = append(targets, tg)
	}

	flip, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer flip.Close()
	var script strings.Builder
	script.WriteString(`my $d = ".git/modules/evil"; my $end = time + 600;` + "\n")
	script.WriteString(`my %t = (`)
	for i, n := range names {
		fmt.Fprintf(&script, "%q => %q, ", n, targets[i])
	}
	script.WriteString(");\n")
	script.WriteString(`print "flipping\n"; $| = 1;
while (time < $end && ! -e "stop") {
  mkdir $d; mkdir "$d/objects"; mkdir "$d/refs";
  if (! -e "$d/HEAD") { open(my $h, ">", "$d/HEAD"); print $h "ref: refs/heads/main\n"; close $h; }
  for my $n (keys %t) { unlink "$d/$n"; }
  for my $i (1..50) { }
  for my $n (keys %t) { symlink($t{$n}, "$d/$n"); }
  for my $i (1..50) { }
}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuf
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = flip.Run(ctx, Command{Args: []string{"/usr/bin/perl", "-e", script.String()}, Stdout: &out, Stderr: &out})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "flipping") {
		if time.Now().After(deadline) {
			t.Fatalf("the flipper did not start: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := raceSpawns
	if testing.Short() {
		n = 200
	}
	refused := 0
	for i := range n {
		_, err := s.Run(context.Background(), Command{Args: []string{"/bin/true"}, Timeout: 20 * time.Second})
		switch {
		case err == nil:
		case errors.Is(err, ErrUnsafeLayout), errors.Is(err, ErrSandboxSetup):
			// Refused at inspection, or by bubblewrap when a surface became
			// a link after it (a read-only bind through it only makes
			// something else read-only, inside that sandbox).
			refused++
		default:
			t.Fatalf("spawn %d: %v", i, err)
		}
		if b, err := os.ReadFile(victim); err != nil || string(b) != keep {
			t.Fatalf("spawn %d: the file outside every root changed: %q %v", i, b, err)
		}
		for _, tg := range targets {
			if tg == victim {
				continue
			}
			if _, err := os.Lstat(tg); err == nil {
				t.Fatalf("spawn %d: the server created %s outside every root", i, filepath.Base(tg))
			}
		}
	}
	writeFileT(t, filepath.Join(f.work, "stop"), "")
	cancel()
	wg.Wait()
	t.Logf("%d spawns, %d refused while a surface was a link", n, refused)
	if refused == 0 {
		t.Errorf("no spawn met a planted link: the race never ran")
	}
}

// syncBuf is a bytes.Buffer safe for one writer and one reader.
type syncBuf struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeFileT(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
