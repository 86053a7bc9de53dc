package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// HostsEnv names a hosts file (lines "ADDRESS NAME...") the proxies
// consult before DNS: a trusted input of the server's own environment, for
// pinning names (a local mirror, a test server).
const HostsEnv = "EVENER_MCP_HOSTS"

// Outlet is one sandbox session's egress: the allowlist, the proxies, the
// bridge the launcher binds into every sandbox, and the refusals recorded.
type Outlet struct {
	Allowlist *Allowlist
	proxies   *proxyPair
	bridge    *socketBridge

	mu         sync.Mutex // guards violations
	violations []timedViolation
}

type timedViolation struct {
	at time.Time
	v  Violation
}

const maxViolations = 1000

// BridgeInfo is what the launcher needs to reach the proxies: the host
// paths of the bridge's sockets and the credentials tools must present.
// Its fields match confine.EgressBridge, so one converts to the other.
type BridgeInfo struct {
	HTTPSocket, SOCKSSocket  string
	HTTPUser, HTTPPassword   string
	SOCKSUser, SOCKSPassword string
}

// OpenOutlet starts a session's proxies behind an allowlist made of the
// embedded baseline plus allow, and a bridge under socketParent. hostsFile,
// if set, pins names before DNS (lines "ADDRESS NAME..."). onDeny, if set,
// also receives every refusal.
func OpenOutlet(allow []string, hostsFile, socketParent string, onDeny func(Violation)) (*Outlet, error) {
	var res Resolver
	if hostsFile != "" {
		hr, err := loadHosts(hostsFile)
		if err != nil {
			return nil, err
		}
		res = hr
	}
	al, err := newAllowlist(append(append([]string{}, baseline...), allow...), res)
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	s := &Outlet{Allowlist: al}
	s.proxies, err = startProxies(proxyOptions{Decider: al, OnViolation: func(v Violation) {
		s.record(v)
		if onDeny != nil {
			onDeny(v)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("egress proxies: %w", err)
	}
	s.bridge, err = newBridge(socketParent, s.proxies.HTTPAddr(), s.proxies.SOCKSAddr())
	if err != nil {
		s.proxies.Close()
		return nil, err
	}
	return s, nil
}

// Bridge returns what the launcher binds and sets.
func (s *Outlet) Bridge() BridgeInfo {
	return BridgeInfo{
		HTTPSocket: s.bridge.HTTPSocket, SOCKSSocket: s.bridge.SOCKSSocket,
		HTTPUser: s.proxies.HTTPUser(), HTTPPassword: s.proxies.HTTPPassword(),
		SOCKSUser: s.proxies.SOCKSUser(), SOCKSPassword: s.proxies.SOCKSPassword(),
	}
}

func (s *Outlet) record(v Violation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, timedViolation{time.Now(), v})
	if len(s.violations) > maxViolations {
		s.violations = s.violations[len(s.violations)-maxViolations:]
	}
}

// Between returns the refusals recorded in [from, to]: the network
// violations of the command that ran then (best-effort attribution when
// commands overlap). A nil Outlet has none.
func (s *Outlet) Between(from, to time.Time) []Violation {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Violation
	for _, tv := range s.violations {
		if !tv.at.Before(from) && !tv.at.After(to) {
			out = append(out, tv.v)
		}
	}
	return out
}

// Close closes the bridge and the proxies (and every open tunnel).
func (s *Outlet) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	if s.bridge != nil {
		errs = append(errs, s.bridge.Close())
	}
	if s.proxies != nil {
		errs = append(errs, s.proxies.Close())
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
		return nil, fmt.Errorf("hosts file: %w", err)
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
