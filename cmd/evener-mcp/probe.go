package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
)

// runProbe prints the host report and the resolved policy; it exits 0 only
// when the resolved mode is enforced (or off was asked for).
func runProbe(args []string) int {
	s := cli.NewFlagSet("evener-mcp probe")
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
	sess, err := confine.NewSession(pol, cfg.EnvPassthrough)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return cli.ExitRefused
	}
	defer sess.Close()
	var plan confine.MountPlan
	var argv []string
	if pol.Mode() != confine.ModeOff {
		pr, err := sess.Prepare(confine.Command{Args: []string{"true"}})
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
			return cli.ExitRefused
		}
		plan, argv = pr.Plan, pr.Args
	}
	report := map[string]any{
		"host": pol.Host(),
		"policy": map[string]any{
			"mode": pol.Mode(), "network": pol.Network(), "backend": pol.Backend(),
			"workdir": pol.Workdir(), "write_roots": pol.WriteRoots(), "cache": pol.Cache(),
			"denylist": pol.Denylist(), "global_git_config": pol.GlobalGitConfig(),
			"limits": pol.Limits(), "degraded": pol.Degraded(), "config_sources": cfg.Sources,
			"tools": cfg.Tools, "allow_domains": cfg.AllowDomains,
		},
		"mount_plan":     plan,
		"bwrap_argv":     argv,
		"seccomp_denied": confine.SeccompDenied(),
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	} else {
		h := pol.Host()
		fmt.Printf("host:     %s/%s kernel %s\n", h.OS, h.Arch, h.Kernel)
		fmt.Printf("bwrap:    %s %s (user namespaces: %v%s; overlay: %v)\n", h.Bwrap, h.BwrapVersion, h.UserNS, paren(h.UserNSError), h.Overlay)
		fmt.Printf("landlock: ABI %d   seccomp: %v   running as root: %v   process limit: %s\n", h.Landlock, h.Seccomp, h.RunAsRoot, h.ProcessLimit)
		fmt.Printf("policy:   %s, network %s, cache %s\n", pol.Mode(), pol.Network(), pol.Cache())
		fmt.Printf("workdir:  %s\n", pol.Workdir())
		fmt.Printf("writable: %s\n", strings.Join(pol.WriteRoots(), ", "))
		fmt.Printf("denylist: %d paths\n", len(pol.Denylist()))
		if len(plan) > 0 {
			fmt.Printf("mount plan (for a command in the workdir):\n%s", plan)
		}
	}
	if pol.Degraded() != "" {
		return 1
	}
	return 0
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
