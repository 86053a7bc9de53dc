//go:build linux

package confine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// forkScript forks up to n children that stay alive until the file
// "release" appears in the working directory (40 s at most), then writes
// "forked-ID" there with what it got: "OK EAGAIN OTHER" (forks that worked,
// that failed with EAGAIN, that failed otherwise). Perl: one process, no
// threads, and fork's errno at hand.
func forkScript(id string, n int) []string {
	return []string{"/usr/bin/perl", "-e", `
my ($id, $n) = @ARGV; my ($ok, $ea, $o) = (0, 0, 0);
for (1..$n) {
	my $p = fork;
	if (!defined $p) { if ($!{EAGAIN}) { $ea++ } else { $o++ } next }
	if ($p == 0) { for (1..400) { last if -e "release"; select(undef, undef, undef, 0.1) } exit 0 }
	$ok++;
}
open(my $f, ">", "forked-$id.tmp") or die "forked: $!"; print $f "$ok $ea $o\n"; close $f;
rename("forked-$id.tmp", "forked-$id") or die "rename: $!";
1 while wait != -1;
print "ok=$ok eagain=$ea other=$o\n";`, id, fmt.Sprint(n)}
}

// TestSessionProcsWhole: procs bounds one session's sandboxes together, not
// each: three concurrent commands of one session (StartSpawner, as a
// server's session) each forking 25 children under procs = 40 hold at most
// 40 processes at once between them; the refused forks fail with EAGAIN;
// every command finishes. A user server's sandboxes share the session's
// user namespace (RLIMIT_NPROC), a root server's its pids cgroup.
func TestSessionProcsWhole(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no /usr/bin/perl")
	}
	const procs, calls, forks = 40, 3, 25
	h := Probe(ProbeFull, os.Environ())
	if h.Unusable() != "" {
		t.Skipf("no sandbox here: %s", h.Unusable())
	}
	if h.ProcessLimit != ProcessLimitSessionRlimit && h.ProcessLimit != ProcessLimitSessionCgroup {
		t.Fatalf("process limit %q: no session bound on this host", h.ProcessLimit)
	}
	f := newFixtureUnder(t, "/var/tmp")
	spec := f.spec(ModeWorkspaceWrite, NetworkOff)
	spec.Limits = DefaultLimits
	spec.Limits.Procs = procs
	p, err := Resolve(spec, h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLauncher(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.StartSpawner()

	type outcome struct {
		out string
		err error
	}
	res := make([]outcome, calls)
	var ended [calls]atomic.Bool
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ended[i].Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var out bytes.Buffer
			_, err := s.Run(ctx, Command{Args: forkScript(fmt.Sprint(i), forks), Stdout: &out, Stderr: &out, Timeout: 80 * time.Second})
			res[i] = outcome{out.String(), err}
		}()
	}
	// Every command that started has forked (its children wait), or
	// failed: the counts are then all alive at once.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	settled := func() bool {
		for i := range calls {
			if _, err := os.Stat(filepath.Join(f.work, fmt.Sprintf("forked-%d", i))); err != nil && !ended[i].Load() {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !settled(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the commands neither forked nor ended within 60 s")
		}
	}
	alive, eagain, other, started := 0, 0, 0, 0
	for i := range calls {
		b, err := os.ReadFile(filepath.Join(f.work, fmt.Sprintf("forked-%d", i)))
		if err != nil {
			continue
		}
		var ok, ea, o int
		if _, err := fmt.Sscanf(string(b), "%d %d %d", &ok, &ea, &o); err != nil {
			t.Fatalf("forked-%d: %q", i, b)
		}
		started++
		alive += 1 + ok // the script and its children
		eagain += ea
		other += o
	}
	if err := os.WriteFile(filepath.Join(f.work, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the commands did not finish")
	}
	for i, r := range res {
		t.Logf("command %d: err=%v out=%q", i, r.err, strings.TrimSpace(r.out))
	}
	t.Logf("root=%v: %d commands forked; %d of their processes alive at once (procs %d), %d forks refused with EAGAIN, %d otherwise",
		os.Geteuid() == 0, started, alive, procs, eagain, other)
	if started == 0 {
		t.Fatal("no command started")
	}
	if alive > procs {
		t.Errorf("one session held %d processes at once under procs = %d", alive, procs)
	}
	if eagain == 0 || other != 0 {
		t.Errorf("refused forks: %d with EAGAIN, %d otherwise; want some, all EAGAIN", eagain, other)
	}
	// The session works again once they are gone.
	var out bytes.Buffer
	if _, err := s.Run(context.Background(), Command{Args: []string{"/bin/echo", "again"}, Stdout: &out, Timeout: 30 * time.Second}); err != nil || !strings.Contains(out.String(), "again") {
		t.Errorf("after the burst: %v %q", err, out.String())
	}
}

const pidsChildEnv = "EVENER_PIDS_CHILD"

// TestPidsParentBeforeDrop: a root server prepares the parent of its pids
// cgroups before it drops CAP_DAC_OVERRIDE, so a cgroupfs root of mode 0555
// (uid 0 writes there only through that capability) still gets one, from
// a state where it does not exist; a session cgroup is then made without
// the capability. Run in a re-executed child (dropping is for the life of
// the process) with a parent name of its own.
func TestPidsParentBeforeDrop(t *testing.T) {
	if os.Getenv(pidsChildEnv) != "" {
		t.Skip("helper process")
	}
	if os.Geteuid() != 0 {
		t.Skip("root servers only (RLIMIT_NPROC binds the others)")
	}
	root := "/sys/fs/cgroup/pids"
	if !isFS(root, unix.CGROUP_SUPER_MAGIC) {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is mode %#o", root, fi.Mode().Perm())
	name := fmt.Sprintf("evener-unit-%d", os.Getpid())
	parent := filepath.Join(root, name)
	if _, err := os.Stat(parent); err == nil {
		t.Fatalf("%s exists already", parent)
	}
	t.Cleanup(func() {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if e.IsDir() {
				removePidsCgroup(filepath.Join(parent, e.Name()))
			}
		}
		removePidsCgroup(parent)
	})
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^TestPidsParentBeforeDropChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), pidsChildEnv+"=1", pidsParentEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "this build uses cgo") {
		t.Skip("this test binary uses cgo; run with CGO_ENABLED=0")
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPidsParentBeforeDropChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func TestPidsParentBeforeDropChild(t *testing.T) {
	if os.Getenv(pidsChildEnv) == "" {
		t.Skip("run by TestPidsParentBeforeDrop")
	}
	if err := DropServerCapabilities(); err != nil {
		t.Fatal(err)
	}
	dir, err := PidsCgroup()
	if err != nil {
		t.Fatalf("after the drop: %v", err)
	}
	if filepath.Base(dir) != os.Getenv(pidsParentEnv) {
		t.Fatalf("parent %s, want the test's", dir)
	}
	h := Probe(ProbeStatic, os.Environ())
	if h.ProcessLimit != ProcessLimitSessionCgroup {
		t.Errorf("probe's process limit %q, want %q", h.ProcessLimit, ProcessLimitSessionCgroup)
	}
	cg, err := newSessionCgroup(7)
	if err != nil {
		t.Fatalf("session cgroup without CAP_DAC_OVERRIDE: %v", err)
	}
	defer removePidsCgroup(cg)
	if b, _ := os.ReadFile(filepath.Join(cg, "pids.max")); strings.TrimSpace(string(b)) != "7" {
		t.Errorf("pids.max = %q", b)
	}
	t.Logf("parent %s, session cgroup %s", dir, cg)
}
