package confine

import "testing"

// TestPlanAgent: a session's SSH agent socket is bound read-only at
// AgentSocket, after the private /tmp that holds it, in every mode; a plan
// without one binds nothing there.
func TestPlanAgent(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range Plan(c.p, c.l) {
				if m.Dst == AgentSocket {
					t.Fatalf("a plan without an agent binds %v", m)
				}
			}
			l := c.l
			l.Agent = "/srv/evs-1/evener-agent-1/agent.sock"
			tmp, bind := -1, -1
			for i, m := range Plan(c.p, l) {
				if m.Kind == MountTmpfs && m.Dst == "/tmp" {
					tmp = i
				}
				if m.Dst == AgentSocket {
					if m.Kind != MountROBind || m.Src != l.Agent {
						t.Errorf("agent mount %v", m)
					}
					bind = i
				}
			}
			if bind < 0 || bind < tmp {
				t.Errorf("agent bound at %d, private /tmp at %d", bind, tmp)
			}
		})
	}
}
