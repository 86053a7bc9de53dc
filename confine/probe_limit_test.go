package confine

import (
	"strings"
	"testing"
)

// TestProcessLimitLine: the startup line (and the probe) say what bounds a
// session's processes, with the number, and say so when nothing does.
func TestProcessLimitLine(t *testing.T) {
	for _, tt := range []struct {
		host, want string
	}{
		{ProcessLimitSessionRlimit, "; process limit: 60 per session (RLIMIT_NPROC in one user namespace)"},
		{ProcessLimitSessionCgroup, "; process limit: 60 per session (pids cgroup)"},
		{processLimitSandboxRlimit + "nsenter (util-linux) not found", "; process limit: 60 per sandbox, not per session (RLIMIT_NPROC; nsenter (util-linux) not found)"},
		{processLimitNone + "create /sys/fs/cgroup/pids/evener-mcp: permission denied", "; process limit: none (create /sys/fs/cgroup/pids/evener-mcp: permission denied)"},
	} {
		f := newFixture(t)
		h := usableHost
		h.ProcessLimit = tt.host
		spec := f.spec(ModeWorkspaceWrite, NetworkOff)
		spec.Limits = DefaultLimits
		spec.Limits.Procs = 60
		p, err := Resolve(spec, h)
		if err != nil {
			t.Fatal(err)
		}
		if l := p.StartupLine(); !strings.HasSuffix(l, tt.want) {
			t.Errorf("%q: startup line %q, want it to end %q", tt.host, l, tt.want)
		}
		if got := p.ProcessLimit(); "; process limit: "+got != tt.want {
			t.Errorf("%q: ProcessLimit() = %q", tt.host, got)
		}
	}
}
