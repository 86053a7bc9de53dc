package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/server"
	"github.com/evener-dev/evener-mcp/tools"
)

// runExec runs one command under the policy, streams its output and exits
// with its code.
func runExec(args []string) int {
	s := newFlagSet("evener-mcp exec")
	timeout := s.fs.Duration("timeout", 0, "kill the command's whole process tree after this long (0: never)")
	if err := s.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "evener-mcp exec: %v\n", err)
		return exitUsage
	}
	cmdArgs := s.fs.Args()
	if len(cmdArgs) == 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp exec: no command (usage: evener-mcp exec [flags] -- CMD [ARG...])")
		return exitUsage
	}
	// An explicit mode is enforced or refused: the launch itself is the
	// user-namespace probe. Only an unset mode, which may degrade, needs to
	// know beforehand.
	cfg, pol, code := s.resolve(func(c *config.Config) confine.ProbeDepth {
		if c.Spec.ModeExplicit {
			return confine.ProbeStatic
		}
		return confine.ProbeQuick
	})
	if code != 0 {
		return code
	}
	sess, err := confine.NewSession(pol, cfg.EnvPassthrough)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return exitRefused
	}
	defer sess.Close()
	if pol.Mode() != confine.ModeOff && pol.Network() == confine.NetworkOn {
		eg, err := server.StartEgress(cfg, sess, func(v tools.Violation) {
			fmt.Fprintf(os.Stderr, "evener-mcp: egress refused %s: %s\n", v.Target, v.Raw)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: refusing to run: --sandbox-net on: %v\n", err)
			return exitRefused
		}
		defer eg.Close()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := sess.Run(ctx, confine.Command{
		Args: cmdArgs, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Timeout: *timeout,
		// The line is printed once the sandbox exists and before the
		// command runs, so it is never a claim about a sandbox that failed.
		OnStart: func() { fmt.Fprintln(os.Stderr, pol.StartupLine()) },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: refusing to run: --sandbox %s: %v\n", pol.Mode(), err)
		return exitRefused
	}
	if res.TimedOut {
		fmt.Fprintf(os.Stderr, "evener-mcp: timed out after %s; killed the process tree\n", *timeout)
		return 124
	}
	return res.ExitCode
}
