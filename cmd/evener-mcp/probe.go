package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/session"
)

// runProbe prints the host report and the resolved policy; it exits 0 only
// when the resolved mode is enforced (or off was asked for).
//
// With the network on, the plan shown is the one a command would get: the
// session's egress (proxies and bridge) is started as `exec` starts it, the
// command prepared, and the egress closed again before anything is printed;
// what every session makes anew (the bridge's socket directory, the proxies'
// credentials) is shown as confine.PerSession. Starting them, rather than
// rendering a plan without them, keeps one code path for the plan (the
// launcher refuses a sandbox whose bridge is missing) and means a probe that
// exits 0 has seen this host open the proxies and the bridge.
func runProbe(args []string) int {
	s := cli.NewFlagSet("evener-mcp probe")
	s.Usage = cli.UsageProbe
	asJSON := s.FS.Bool("json", false, "print the report as JSON")
	if err := s.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "evener-mcp probe: %v\n", err)
		return cli.ExitUsage
	}
	cfg, pol, code := s.Resolve(func(*config.Config) confine.ProbeDepth { return confine.ProbeFull })
	if code != 0 {
		return code
	}
	fmt.Fprintln(os.Stderr, pol.StartupLine())
	var plan confine.MountPlan
	var argv []string
	var eplan *confine.EgressPlan
	var allowlist []string
	if pol.Mode() != confine.ModeOff {
		pr, patterns, ep, err := prepareProbe(pol, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
			return cli.ExitRefused
		}
		plan, argv, eplan, allowlist = pr.Plan, pr.Args, ep, patterns
	}
	report := map[string]any{
		"host": pol.Host(),
		"policy": map[string]any{
			"mode": pol.Mode(), "network": pol.Network(), "backend": pol.Backend(),
			"workdir": pol.Workdir(), "write_roots": pol.WriteRoots(), "cache": pol.Cache(),
			"denylist": pol.Denylist(), "global_git_config": pol.GlobalGitConfig(),
			"limits": pol.Limits(), "degraded": pol.Degraded(), "config_sources": cfg.Sources,
			"tools": cfg.Tools, "allow_domains": cfg.AllowDomains,
			"protected_paths": pol.Protected(), "runner_state_dirs": pol.StateRW(),
		},
		"mount_plan":     plan,
		"bwrap_argv":     argv,
		"seccomp_denied": confine.SeccompDenied(),
	}
	if sl := pol.SecondLayer(); sl != "" {
		report["second_layer"] = map[string]any{"summary": sl, "holds": pol.SecondLayerDetail()}
	}
	guarantees := confine.BackendGuarantees(pol.Host())
	if len(guarantees) > 0 {
		unusable := map[confine.Backend]string{}
		for b := range guarantees {
			if why := confine.BackendUnusable(pol.Host(), b); why != "" {
				unusable[b] = why
			}
		}
		report["backends"] = map[string]any{"guarantees": guarantees, "unusable": unusable}
	}
	if gaps := pol.LandlockGaps(); len(gaps) > 0 {
		report["backend_not_given"] = gaps
		report["backend_chosen_because"] = pol.FellBack()
	}
	if eplan != nil {
		report["egress"] = map[string]any{
			"relay": eplan.Relay, "http_proxy": eplan.HTTPProxy, "socks_proxy": eplan.SOCKSProxy,
			"mounts": eplan.Mounts, "env": eplan.Env, "allowlist": allowlist,
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	} else {
		h := pol.Host()
		fmt.Printf("host:     %s/%s kernel %s\n", h.OS, h.Arch, h.Kernel)
		fmt.Printf("bwrap:    %s %s (user namespaces: %v%s; overlay: %v)\n", h.Bwrap, h.BwrapVersion, h.UserNS, paren(h.UserNSError), h.Overlay)
		pl := pol.ProcessLimit()
		if pl == "" {
			pl = h.ProcessLimit
		}
		fmt.Printf("landlock: ABI %d   seccomp: %v   running as root: %v   process limit: %s\n", h.Landlock, h.Seccomp, h.RunAsRoot, pl)
		if sl := pol.SecondLayer(); sl != "" {
			fmt.Printf("second layer: %s\n", sl)
			for _, d := range pol.SecondLayerDetail() {
				fmt.Printf("  %s\n", d)
			}
		}
		printGuarantees(pol, guarantees)
		fmt.Printf("policy:   %s, network %s, cache %s, backend %s\n", pol.Mode(), pol.Network(), pol.Cache(), pol.Backend())
		fmt.Printf("workdir:  %s\n", pol.Workdir())
		fmt.Printf("writable: %s\n", strings.Join(pol.WriteRoots(), ", "))
		fmt.Printf("denylist: %d paths\n", len(pol.Denylist()))
		fmt.Printf("protected: %s\n", listOrNone(pol.Protected()))
		fmt.Printf("runner state: %s\n", listOrNone(pol.StateRW()))
		if eplan != nil {
			printEgress(eplan, allowlist)
		}
		if len(plan) > 0 {
			fmt.Printf("mount plan (for a command in the workdir):\n%s", plan)
		}
	}
	if pol.Degraded() != "" {
		return 1
	}
	return 0
}

// printGuarantees prints, per Linux backend, which guarantee holds here
// and by which mechanism, and what the chosen landlock backend does not
// give (docs/security.md, "The landlock backend").
func printGuarantees(pol *confine.Policy, g map[confine.Backend][]confine.Guarantee) {
	for _, b := range []confine.Backend{confine.BackendNative, confine.BackendLandlock} {
		rows, ok := g[b]
		if !ok {
			continue
		}
		if why := confine.BackendUnusable(pol.Host(), b); why != "" {
			fmt.Printf("backend %s: unusable here: %s\n", b, why)
		} else {
			fmt.Printf("backend %s:\n", b)
		}
		for _, r := range rows {
			if r.Mechanism != "" {
				fmt.Printf("  holds    %-62s by %s\n", r.What, r.Mechanism)
			} else {
				fmt.Printf("  NOT HELD %-62s (%s)\n", r.What, r.Why)
			}
		}
	}
	if gaps := pol.LandlockGaps(); len(gaps) > 0 {
		if why := pol.FellBack(); why != "" {
			fmt.Printf("backend:  landlock, chosen because %s\n", why)
		}
		fmt.Printf("not given by the landlock backend:\n")
		for _, gp := range gaps {
			fmt.Printf("  %s\n", gp)
		}
	}
}

// prepareProbe prepares a trivial command as a real one would be prepared,
// in a session opened as exec opens one (with the network on, its egress
// outlet runs), closed before this returns; the result is redacted
// (confine.RedactEgress) and comes with the egress plan and the allowlist
// in force.
func prepareProbe(pol *confine.Policy, cfg *config.Config) (*confine.Prepared, []string, *confine.EgressPlan, error) {
	s, err := session.Open(pol, true, session.Request{}, session.Options{EnvPassthrough: cfg.EnvPassthrough, AllowDomains: cfg.AllowDomains})
	if err != nil {
		return nil, nil, nil, err
	}
	defer s.Close()
	pr, err := s.Launcher.Prepare(confine.Command{Args: []string{"true"}})
	if err != nil || s.Outlet == nil {
		return pr, nil, nil, err
	}
	red, ep := confine.RedactEgress(pr, confine.EgressBridge(s.Outlet.Bridge()))
	return red, s.Outlet.Allowlist.Patterns(), &ep, nil
}

// printEgress prints the egress part of the plan, for people.
func printEgress(ep *confine.EgressPlan, allowlist []string) {
	fmt.Printf("egress:   through the session's allowlist proxies (%d patterns): HTTP %s, SOCKS5 %s as the command sees them\n",
		len(allowlist), ep.HTTPProxy, ep.SOCKSProxy)
	if len(ep.Relay) > 0 {
		fmt.Printf("  relay:  %s CMD...\n", strings.Join(ep.Relay, " "))
	}
	for _, m := range ep.Mounts {
		fmt.Printf("  bridge: %s <- %s  # %s\n", m.Dst, m.Src, m.Why)
	}
	keys := make([]string, 0, len(ep.Env))
	for k := range ep.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  env:    %s=%s\n", k, ep.Env[k])
	}
	fmt.Printf("          (%s: the bridge directory and the credentials each session makes anew)\n", confine.PerSession)
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// listOrNone joins paths with ", ", or says "none".
func listOrNone(paths []string) string {
	if len(paths) == 0 {
		return "none"
	}
	return strings.Join(paths, ", ")
}
