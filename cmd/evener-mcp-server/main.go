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
	"runtime"
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
		if code, ok := confine.RunHidden(args[0], args[1:]); ok {
			return code
		}
	}
	// Started by root: the file tools must read no more than the sandbox's
	// kernel uid 0 without capabilities (issue 13), so the file
	// capabilities go before anything is opened.
	if err := confine.DropServerCapabilities(); err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp: refusing to start:", err)
		return cli.ExitRefused
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Println(cli.Version())
		return 0
	}
	if len(args) > 0 && args[0] == "serve" {
		return runServe(args[1:])
	}
	return runStdio(args)
}

// runStdio serves MCP over stdin/stdout: what an mcpServers entry runs.
// stderr carries the startup line and warnings, never protocol.
func runStdio(args []string) int {
	s := cli.NewFlagSet("evener-mcp")
	s.Usage = cli.UsageStdio
	lf := logFlags(s)
	if code, ok := parse(s, args); !ok {
		return code
	}
	o, code := resolve(s, lf, false)
	if code != 0 {
		return code
	}
	if path := os.Getenv("EVENER_MCP_CPUPROFILE"); path != "" {
		// A developer's knob: profile the server's own work.
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// One scheduler slot fewer than CPUs, so a stdio server's idle
		// threads never contend with the client and the MCP servers behind
		// it, every CPU while grep or glob runs (docs/gateway.md, "MCP servers
		// behind evener-mcp", speed).
		o.ComputeProcs = runtime.NumCPU()
		runtime.GOMAXPROCS(stdioProcs(o.ComputeProcs))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	stdin, restore := pollableStdin()
	defer restore()
	err := server.RunStdio(ctx, o, stdin, os.Stdout)
	if err != nil {
		o.Log.Error(err.Error())
		return 1
	}
	return 0
}

// resolve turns the parsed flags into the server's options and prints the
// startup line.
func resolve(s *cli.FlagSet, lf *logOptions, printLine bool) (server.Options, int) {
	log, ok := lf.logger()
	if !ok {
		return server.Options{}, cli.ExitUsage
	}
	cfg, pol, code := s.Resolve(func(*config.Config) confine.ProbeDepth { return confine.ProbeFull })
	if code != 0 {
		return server.Options{}, code
	}
	if printLine {
		fmt.Fprintln(os.Stderr, pol.StartupLine())
	}
	bounds := tools.DefaultBounds
	if cfg.ShellTimeout > 0 {
		bounds.ShellTimeout = cfg.ShellTimeout
	}
	return server.Options{
		Config: cfg, Policy: pol, Bounds: bounds,
		Log:     log,
		Started: func(line string) { fmt.Fprintln(os.Stderr, line) },
	}, 0
}

// parse parses args into s; ok is false when the caller should exit with
// code (0 after -h, ExitUsage for bad flags or a stray argument).
func parse(s *cli.FlagSet, args []string) (code int, ok bool) {
	if err := s.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return cli.ExitUsage, false
	}
	if len(s.FS.Args()) > 0 {
		fmt.Fprintf(os.Stderr, "evener-mcp: unexpected argument %q\n", s.FS.Args()[0])
		return cli.ExitUsage, false
	}
	return 0, true
}

// stdioProcs is a stdio server's GOMAXPROCS on cpus CPUs: one fewer, at
// least one. Every message of a stdio session is a short hand-off between
// the client, this server and (for the gateway) the server behind it; a
// second scheduler slot on a two-CPU machine woke another thread for each
// hand-off, whose spinning took the CPU the downstream needed, and made a
// forwarded call slower, not faster.
func stdioProcs(cpus int) int { return max(1, cpus-1) }
