package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/session"
)

// runExec runs one command under the policy, streams its output and exits
// with its code.
func runExec(args []string) int {
	s := cli.NewFlagSet("evener-mcp exec")
	s.Usage = cli.UsageExec
	timeout := s.FS.Duration("timeout", 0, "kill the command's whole process tree after this long (0: never)")
	if err := s.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "evener-mcp exec: %v\n", err)
		return cli.ExitUsage
	}
	cmdArgs := s.FS.Args()
	if len(cmdArgs) == 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp exec: no command (usage: evener-mcp exec [flags] -- CMD [ARG...])")
		return cli.ExitUsage
	}
	// An explicit mode on an explicit backend is enforced or refused: the
	// launch itself is the user-namespace probe. An unset mode, which may
	// degrade, and the default backend (auto), which falls back to the
	// landlock backend where bubblewrap cannot create a user namespace,
	// need to know beforehand (one trivial child in a new user namespace,
	// about a millisecond: docs/speed.md).
	cfg, pol, code := s.Resolve(func(c *config.Config) confine.ProbeDepth {
		if c.Spec.ModeExplicit && c.Backend != "" && c.Backend != confine.BackendAuto {
			return confine.ProbeStatic
		}
		return confine.ProbeQuick
	})
	if code != 0 {
		return code
	}
	confine.Phase("resolved")
	// A session of its own, for one command: no file layer, no audit, the
	// egress outlet when the network is on (package session).
	sess, err := session.Open(pol, true, session.Request{}, session.Options{
		EnvPassthrough: cfg.EnvPassthrough,
		AllowDomains:   cfg.AllowDomains,
		SSHAgent:       (*session.SSHAgent)(cfg.SSHAgent),
		OnRefusal: func(v session.Violation) {
			fmt.Fprintf(os.Stderr, "evener-mcp: egress refused %s: %s\n", v.Target, v.Raw)
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: refusing to run: %v\n", err)
		return cli.ExitRefused
	}
	defer sess.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := sess.Launcher.Run(ctx, confine.Command{
		Args: cmdArgs, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Timeout: *timeout,
		// The line is printed once the sandbox exists and before the
		// command runs, so it is never a claim about a sandbox that failed.
		OnStart: func() { fmt.Fprintln(os.Stderr, pol.StartupLine()) },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: refusing to run: --sandbox %s: %v\n", pol.Mode(), err)
		return cli.ExitRefused
	}
	for _, q := range res.Quarantined {
		fmt.Fprintf(os.Stderr, "evener-mcp: git: %s\n", q)
	}
	for _, g := range res.GitProtected {
		fmt.Fprintf(os.Stderr, "evener-mcp: git: protected %s: %s\n", g.Path, g.What)
	}
	confine.Phase("ran")
	if res.TimedOut {
		fmt.Fprintf(os.Stderr, "evener-mcp: timed out after %s; killed the process tree\n", *timeout)
		return 124
	}
	return res.ExitCode
}
