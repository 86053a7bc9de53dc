package server

import (
	"runtime"
	"sync"
	"testing"
)

// TestProcs: GOMAXPROCS is raised while any computing call runs, restored
// when the last ends, and left alone when there is nothing to raise.
func TestProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(was)
	p := newProcs(3)
	a := p.hold()
	b := p.hold()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("GOMAXPROCS %d while two compute, want 3", got)
	}
	a()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("GOMAXPROCS %d while one computes, want 3", got)
	}
	b()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after, want 1", got)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.hold()()
		}()
	}
	wg.Wait()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after 50 concurrent calls, want 1", got)
	}
	newProcs(1).hold()()
	newProcs(0).hold()()
	var none *procs
	none.hold()()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d changed by a procs with nothing to raise", got)
	}
}
