// Command evener-mcp-server is evener-mcp's MCP server: `evener-mcp` with
// no subcommand (and `evener-mcp serve`) execs it. It parses the same
// flags and hands the configuration to server.RunStdio.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
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

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/server"
	"github.com/evener-dev/evener-mcp/tools"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// The hidden egress helpers, for when evener-mcp is not installed
	// beside this binary and the launcher re-executes this one instead.
	if len(args) > 0 {
		switch args[0] {
		case confine.RelaySubcommand:
			return confine.RunRelay(args[1:])
		case confine.ConnectSubcmd:
			return confine.RunConnect(args[1:])
		}
	}
	if len(args) > 0 && args[0] == "serve" {
		fmt.Fprintln(os.Stderr, "evener-mcp: serve (Streamable HTTP) is not built yet; run without a subcommand for stdio")
		return cli.ExitUsage
	}
	return runStdio(args)
}

// runStdio serves MCP over stdin/stdout: what an mcpServers entry runs.
// stderr carries the startup line and warnings, never protocol.
func runStdio(args []string) int {
	s := cli.NewFlagSet("evener-mcp")
	if err := s.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return cli.ExitUsage
	}
	if len(s.FS.Args()) > 0 {
		fmt.Fprintf(os.Stderr, "evener-mcp: unexpected argument %q\n", s.FS.Args()[0])
		return cli.ExitUsage
	}
	cfg, pol, code := s.Resolve(func(*config.Config) confine.ProbeDepth { return confine.ProbeFull })
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
