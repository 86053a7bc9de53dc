package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/egress"
	"github.com/evener-dev/evener-mcp/tools"
)

// HostsEnv names a hosts file (lines "ADDRESS NAME...") the proxies
// consult before DNS: a trusted input, read once at start, for pinning
// names (a local mirror, a test server).
const HostsEnv = "EVENER_MCP_HOSTS"

// Egress is one session's egress: the allowlist, the proxies, the bridge
// the launcher binds into every sandbox, and the refusals they recorded.
type Egress struct {
	Allowlist *egress.Allowlist
	proxies   *egress.Proxies
	bridge    *egress.Bridge

	mu         sync.Mutex
	violations []timedViolation
}

type timedViolation struct {
	at time.Time
	v  tools.Violation
}

const maxViolations = 1000

// StartEgress starts a session's proxies and hands the launcher the
// bridge. onDeny, if set, also receives every refusal (exec prints them).
func StartEgress(cfg *config.Config, launcher *confine.Session, onDeny func(tools.Violation)) (*Egress, error) {
	var res egress.Resolver
	if path := os.Getenv(HostsEnv); path != "" {
		hr, err := loadHosts(path)
		if err != nil {
			return nil, err
		}
		res = hr
	}
	patterns := append(append([]string{}, egress.Baseline...), cfg.AllowDomains...)
	al, err := egress.NewAllowlist(patterns, res)
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	e := &Egress{Allowlist: al}
	e.proxies, err = egress.Start(egress.Options{Decider: al, OnViolation: func(v egress.Violation) {
		tv := tools.Violation{Action: v.Action, Target: v.Target, Raw: v.Raw}
		e.record(tv)
		if onDeny != nil {
			onDeny(tv)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("egress proxies: %w", err)
	}
	e.bridge, err = egress.NewBridge(os.TempDir(), e.proxies.HTTPAddr(), e.proxies.SOCKSAddr())
	if err != nil {
		e.proxies.Close()
		return nil, err
	}
	err = launcher.SetEgress(confine.EgressBridge{
		HTTPSocket: e.bridge.HTTPSocket, SOCKSSocket: e.bridge.SOCKSSocket,
		HTTPUser: e.proxies.HTTPUser(), HTTPPassword: e.proxies.HTTPPassword(),
		SOCKSUser: e.proxies.SOCKSUser(), SOCKSPassword: e.proxies.SOCKSPassword(),
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Egress) record(v tools.Violation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.violations = append(e.violations, timedViolation{time.Now(), v})
	if len(e.violations) > maxViolations {
		e.violations = e.violations[len(e.violations)-maxViolations:]
	}
}

// Between returns the refusals recorded in [from, to]: the network
// violations of the shell call that ran then (best-effort attribution when
// calls overlap).
func (e *Egress) Between(from, to time.Time) []tools.Violation {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []tools.Violation
	for _, tv := range e.violations {
		if !tv.at.Before(from) && !tv.at.After(to) {
			out = append(out, tv.v)
		}
	}
	return out
}

// Close closes the proxies (and every open tunnel) and the bridge.
func (e *Egress) Close() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.bridge != nil {
		errs = append(errs, e.bridge.Close())
	}
	if e.proxies != nil {
		errs = append(errs, e.proxies.Close())
	}
	return errors.Join(errs...)
}

// hostsResolver answers from a hosts file first, then DNS.
type hostsResolver struct {
	names map[string][]netip.Addr
}

func loadHosts(path string) (*hostsResolver, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", HostsEnv, err)
	}
	defer f.Close()
	h := &hostsResolver{names: map[string][]netip.Addr{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		for _, name := range fields[1:] {
			name = strings.ToLower(strings.TrimSuffix(name, "."))
			h.names[name] = append(h.names[name], addr)
		}
	}
	return h, sc.Err()
}

func (h *hostsResolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, ok := h.names[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return defaultResolver{}.LookupNetIP(ctx, host)
}

type defaultResolver struct{}

func (defaultResolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
