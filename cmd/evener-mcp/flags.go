package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// flagSet holds the flags every subcommand shares.
type flagSet struct {
	fs *flag.FlagSet
	f  config.Flags
}

func newFlagSet(name string) *flagSet {
	s := &flagSet{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := s.fs
	fs.StringVar(&s.f.Workdir, "workdir", "", "the worktree the session works in (default: current directory)")
	fs.StringVar(&s.f.Sandbox, "sandbox", "", "off, read-only, workspace-write or restricted (default: workspace-write where enforceable, else off with a warning)")
	fs.StringVar(&s.f.SandboxNet, "sandbox-net", "", "on or off (default on)")
	fs.StringVar(&s.f.Backend, "sandbox-backend", "", "native, none or microvm (default native)")
	fs.Var((*listFlag)(&s.f.AllowDomains), "allow-domain", "allowlist pattern for egress (repeatable)")
	fs.Var((*listFlag)(&s.f.AddDirs), "add-dir", "extra writable root (repeatable)")
	fs.StringVar(&s.f.Tools, "tools", "", "comma list limiting the published tools")
	fs.Var((*listFlag)(&s.f.ConfigFiles), "config", "trusted configuration file (repeatable)")
	fs.StringVar(&s.f.StateDir, "state-dir", "", "audit log and session records")
	return s
}

func (s *flagSet) parse(args []string) error {
	s.fs.SetOutput(io.Discard)
	err := s.fs.Parse(args)
	if err == flag.ErrHelp {
		s.fs.SetOutput(os.Stderr)
		s.fs.PrintDefaults()
	}
	return err
}

// resolve loads the configuration layers, probes the host and resolves the
// policy. It prints one legible line and returns a non-zero exit code on
// any failure.
func (s *flagSet) resolve(depth func(*config.Config) confine.ProbeDepth) (*config.Config, *confine.Policy, int) {
	env := os.Environ()
	cfg, err := config.Load(s.f, env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return nil, nil, exitUsage
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(os.Stderr, "evener-mcp: warning: %s\n", w)
	}
	host := confine.Probe(depth(cfg), env)
	if cfg.Backend != "" {
		if err := host.CheckBackend(cfg.Backend); err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: refusing to start: %v\n", err)
			return cfg, nil, exitRefused
		}
	}
	pol, err := confine.Resolve(cfg.Spec, host)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: refusing to start: %v\n", err)
		return cfg, nil, exitRefused
	}
	return cfg, pol, 0
}
