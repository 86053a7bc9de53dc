//go:build linux

package confine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCloseWhileHeld: a launcher closed while a sandbox is held (started,
// not yet released to run its command; a server's SIGTERM can land there)
// leaves no process of that sandbox behind, and the command never runs.
// Close cannot know the sandbox's init yet and kills bubblewrap; an init
// still waiting for bubblewrap's go-ahead would otherwise wait forever.
func TestCloseWhileHeld(t *testing.T) {
	p, _ := livePolicy(t, ModeWorkspaceWrite)
	for i := range 10 {
		s, err := NewLauncher(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf("evener-held-%d-%d", os.Getpid(), i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = s.Run(ctx, Command{Args: []string{"/bin/sh", "-c", "echo " + marker + " > ran; sleep 30"}, Timeout: 20 * time.Second,
			OnStart: func() { _ = s.Close() }})
		cancel()
		if err == nil {
			t.Errorf("run %d: a command started after its launcher closed", i)
		}
		deadline := time.Now().Add(3 * time.Second)
		var left []string
		for {
			left = procsMatching(marker)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Fatalf("run %d: processes of the closed launcher's sandbox survive: %v", i, left)
		}
	}
}

// procsMatching lists "pid cmdline" of the processes whose command line
// holds marker.
func procsMatching(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || e.Name() == fmt.Sprint(os.Getpid()) {
			continue
		}
		if c := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(c, marker) {
			out = append(out, e.Name()+" "+c[:min(len(c), 80)])
		}
	}
	return out
}
