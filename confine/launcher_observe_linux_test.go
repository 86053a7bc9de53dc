//go:build linux

package confine

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// TestStartObserver: a sandboxed spawn reports its start latency once, a
// positive duration that holds none of the command's own time; the launcher knows nothing
// of what the observer does with it (the server's metrics).
func TestStartObserver(t *testing.T) {
	p, _ := livePolicy(t, ModeWorkspaceWrite)
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex // guards got
	var got []time.Duration
	s.SetStartObserver(func(d time.Duration) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	})
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Run(ctx, Command{Args: []string{"/bin/sh", "-c", "sleep 1"}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("observed %d starts, want 1", len(got))
	}
	// The latency ends when the command is let run: it holds none of
	// the command's second.
	if got[0] <= 0 || got[0] >= res.Duration || got[0] >= time.Second {
		t.Errorf("start latency %s for a run of %s", got[0], res.Duration)
	}
}
