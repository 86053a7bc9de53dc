package session

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/sshagent"
)

// SSHAgent is the session's brokered SSH agent as the trusted configuration
// gives it (config.SSHAgent, field for field; docs/ssh-agent.md).
type SSHAgent struct {
	Keys         []string
	SignKeys     []string
	Namespaces   []string
	Socket       string
	KnownHosts   string
	MaxPerMinute int
}

// ActionSSHAgent is the violation action of a refused agent operation.
const ActionSSHAgent = "ssh-agent"

// agentLog keeps the session's recent agent refusals with their time, so
// that a call's result names the ones met while it ran (NetViolations).
type agentLog struct {
	mu   sync.Mutex // guards list
	list []timedViolation
}

type timedViolation struct {
	at time.Time
	v  Violation
}

func (l *agentLog) add(v Violation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, timedViolation{time.Now(), v})
	if len(l.list) > MaxViolations {
		l.list = l.list[len(l.list)-MaxViolations:]
	}
}

func (l *agentLog) between(from, to time.Time) []Violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Violation
	for _, tv := range l.list {
		if !tv.at.Before(from) && !tv.at.After(to) {
			out = append(out, tv.v)
		}
	}
	return out
}

// openAgent starts the session's agent in dir and has the launcher bind it
// into every sandbox. A login is signed only for a host the session's
// egress allowlist admits; without an outlet (network off, sandbox off)
// for none.
func (s *Session) openAgent(a *SSHAgent, dir string) error {
	p := sshagent.Policy{Keys: a.Keys, SignKeys: a.SignKeys, Namespaces: a.Namespaces, Upstream: a.Socket,
		KnownHosts: a.KnownHosts, MaxPerMinute: a.MaxPerMinute, Record: s.agentEvent}
	if s.Outlet != nil {
		al := s.Outlet.Allowlist
		p.HostAllowed = func(ctx context.Context, host string, port int) (bool, string) {
			d := al.Decide(ctx, host, port)
			return d.Allow, d.Reason
		}
		p.Candidates = literalNames(al.Patterns())
	}
	srv, err := sshagent.Listen(dir, p)
	if err != nil {
		return err
	}
	s.agent = srv
	return s.Launcher.SetAgent(srv.Socket())
}

// literalNames are the allowlist's entries that name one host and a port:
// what a hashed known_hosts entry is tried against.
func literalNames(patterns []string) []sshagent.HostPort {
	var out []sshagent.HostPort
	for _, p := range patterns {
		host, port, err := net.SplitHostPort(p)
		if err != nil || strings.Contains(host, "*") {
			continue
		}
		if n, err := strconv.Atoi(port); err == nil {
			out = append(out, sshagent.HostPort{Host: host, Port: n})
		}
	}
	return out
}

// agentEvent audits one agent operation; a refusal is also a violation.
func (s *Session) agentEvent(e sshagent.Event) {
	decision := "allowed"
	switch {
	case e.Failed:
		decision = "failed"
	case e.Refused():
		decision = "refused"
	}
	rule := e.Op
	if e.Purpose != "" {
		rule += ":" + e.Purpose
	}
	var detail []string
	if e.Namespace != "" {
		detail = append(detail, "namespace "+e.Namespace)
	}
	if e.Host != "" {
		detail = append(detail, "host "+e.Host)
	}
	if e.Reason != "" {
		detail = append(detail, e.Reason)
	}
	s.Audit.Write(Record{Tool: ActionSSHAgent, Decision: "ssh-agent-" + decision, Rule: rule, Path: e.Key,
		Command: Truncate(strings.Join(detail, "; "), 300)})
	if !e.Refused() {
		return
	}
	target := e.Host
	if target == "" {
		target = e.Key
	}
	if target == "" {
		target = e.Op
	}
	v := Violation{Action: ActionSSHAgent, Target: target, Raw: rule + ": " + e.Reason}
	s.agentLog.add(v)
	s.Violations.Add("", v)
}

// AgentPreamble is the line the model reads about the session's agent
// ("" without one): what it signs, so that the model neither hunts for
// keys nor retries a refusal.
func (s *Session) AgentPreamble() string {
	if s.agent == nil {
		return ""
	}
	a := s.o.SSHAgent
	var what []string
	if len(a.SignKeys) > 0 {
		what = append(what, "signs commits (git commit -S with gpg.format=ssh; namespaces "+strings.Join(a.Namespaces, ", ")+")")
	}
	if len(a.Keys) > 0 {
		what = append(what, "authenticates ssh and git over SSH to hosts on the allowlist that known_hosts names")
	}
	return "- SSH agent: $SSH_AUTH_SOCK is this session's own agent; it " + strings.Join(what, " and ") +
		". It refuses everything else (other namespaces, other hosts, adding or removing keys); a refusal is an ssh-agent violation saying why.\n"
}
