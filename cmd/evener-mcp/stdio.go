package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/server"
	"github.com/evener-dev/evener-mcp/tools"
)

// runStdio serves MCP over stdin/stdout: what an mcpServers entry runs.
// stderr carries the startup line and warnings, never protocol.
func runStdio(args []string) int {
	s := newFlagSet("evener-mcp")
	if err := s.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return exitUsage
	}
	if len(s.fs.Args()) > 0 {
		fmt.Fprintf(os.Stderr, "evener-mcp: unexpected argument %q\n", s.fs.Args()[0])
		return exitUsage
	}
	cfg, pol, code := s.resolve(func(*config.Config) confine.ProbeDepth { return confine.ProbeFull })
	if code != 0 {
		return code
	}
	fmt.Fprintln(os.Stderr, pol.StartupLine())
	caps := tools.DefaultCaps
	if cfg.ShellTimeout > 0 {
		caps.ShellTimeout = cfg.ShellTimeout
	}
	if path := os.Getenv("EVENER_MCP_CPUPROFILE"); path != "" {
		// A developer's knob: profile the server's own work.
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := server.RunStdio(ctx, server.Options{
		Config: cfg, Policy: pol, Caps: caps,
		Warn: func(w string) { fmt.Fprintf(os.Stderr, "evener-mcp: warning: %s\n", w) },
	}, os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return 1
	}
	return 0
}
