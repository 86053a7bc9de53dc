package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
)

func TestViolationsRingBound(t *testing.T) {
	var r Violations
	if got := r.List(); got == nil || len(got) != 0 {
		t.Fatalf("empty ring lists %v, want an empty (non-nil) list", got)
	}
	const n = MaxViolations + 44
	for i := 0; i < n; i++ {
		r.Add("shell", Violation{Action: "network-outbound", Target: fmt.Sprintf("h%d:443", i), Raw: "x"})
	}
	got := r.List()
	if len(got) != MaxViolations {
		t.Fatalf("%d kept, want the bound %d", len(got), MaxViolations)
	}
	for i, v := range got {
		if want := fmt.Sprintf("h%d:443", n-MaxViolations+i); v.Target != want {
			t.Fatalf("entry %d is %q, want %q (oldest first, newest last)", i, v.Target, want)
		}
	}
	if got[0].Tool != "shell" || got[0].Time == "" {
		t.Errorf("entry lacks tool or time: %+v", got[0])
	}
	// Exactly the bound, then one more.
	var e Violations
	for i := 0; i < MaxViolations; i++ {
		e.Add("", Violation{Target: fmt.Sprint(i)})
	}
	if l := e.List(); len(l) != MaxViolations || l[0].Target != "0" || l[MaxViolations-1].Target != fmt.Sprint(MaxViolations-1) {
		t.Fatalf("at the bound: len %d first %q", len(l), l[0].Target)
	}
	e.Add("", Violation{Target: "last"})
	if l := e.List(); len(l) != MaxViolations || l[0].Target != "1" || l[MaxViolations-1].Target != "last" {
		t.Fatalf("past the bound: len %d first %q last %q", len(l), l[0].Target, l[len(l)-1].Target)
	}
}

func TestViolationsConcurrentAndObserved(t *testing.T) {
	var r Violations
	var mu sync.Mutex // guards seen
	seen := 0
	r.Observe(func() {
		mu.Lock()
		seen++
		mu.Unlock()
		_ = r.List() // the observer runs outside the ring's lock
	})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r.Add("t", Violation{Action: "a"})
			}
		}()
	}
	wg.Wait()
	if len(r.List()) != MaxViolations || seen != 800 {
		t.Fatalf("len %d, observed %d", len(r.List()), seen)
	}
	r.Add("t") // nothing added: not observed
	if seen != 800 {
		t.Fatalf("an empty Add was observed")
	}
	var nilRing *Violations
	nilRing.Add("t", Violation{}) // a nil ring records nothing, without panicking
	if len(nilRing.List()) != 0 {
		t.Fatal("nil ring listed something")
	}
}

func TestViolationsRedacted(t *testing.T) {
	var r Violations
	r.Add("shell",
		Violation{Action: "file-access", Target: "/home/alice/.ssh/id_rsa", Raw: "cat: /home/alice/.ssh/id_rsa: Permission denied"},
		Violation{Action: "file-write", Target: "src/x", Raw: "mv: cannot move '/srv/a/b' to \"/srv/c\": Device or resource busy"},
		Violation{Action: "network-outbound", Target: "example.test:443", Raw: "http CONNECT: not allowed"},
		Violation{Action: "x", Target: strings.Repeat("t", 1000), Raw: strings.Repeat("r", 1000)},
	)
	got := r.List()
	if got[0].Target != "id_rsa" || got[0].Raw != "cat: id_rsa: Permission denied" {
		t.Errorf("absolute path kept: %+v", got[0])
	}
	if got[1].Target != "src/x" || got[1].Raw != "mv: cannot move 'b' to \"c\": Device or resource busy" {
		t.Errorf("raw paths: %+v", got[1])
	}
	if got[2].Target != "example.test:443" || got[2].Raw != "http CONNECT: not allowed" {
		t.Errorf("egress changed: %+v", got[2])
	}
	if len(got[3].Target) > 310 || len(got[3].Raw) > 310 {
		t.Errorf("not bounded: %d %d", len(got[3].Target), len(got[3].Raw))
	}
	b, _ := json.Marshal(got[0])
	for _, k := range []string{`"action"`, `"target"`, `"raw"`, `"time"`, `"tool":"shell"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON %s lacks %s", b, k)
		}
	}
}

func TestRecorderDenied(t *testing.T) {
	r := Recorder{Violations: &Violations{}} // no audit: records only the violation
	r.Denied("read_file", &confine.Denial{Op: "read", Path: "/home/alice/.ssh/id_rsa", Base: "id_rsa", Rule: confine.RuleDenylist, Mode: confine.ModeWorkspaceWrite})
	r.Denied("write_file", &confine.Denial{Op: "rename", Path: ".git/config", Base: "config", Rule: confine.RuleGitMetadata, Mode: confine.ModeWorkspaceWrite})
	got := r.Violations.List()
	if len(got) != 2 || got[0].Action != ActionFileRead || got[0].Target != "id_rsa" || got[0].Tool != "read_file" ||
		got[1].Action != ActionFileWrite || got[1].Target != "config" {
		t.Fatalf("got %+v", got)
	}
	if strings.Contains(got[0].Raw, "/home") {
		t.Errorf("raw names a host path: %q", got[0].Raw)
	}
}
