package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/server"
)

// TokenEnv names the environment variable that may hold serve's bearer
// token (a flag value would be visible to every user in ps).
const TokenEnv = "EVENER_MCP_TOKEN"

// runServe is `evener-mcp serve`: MCP over Streamable HTTP at /mcp, one
// sandbox session per MCP session.
func runServe(args []string) int {
	s := cli.NewFlagSet("evener-mcp serve")
	s.Usage = cli.UsageServe
	listen := s.FS.String("listen", "127.0.0.1:8787", "`host:port` to serve MCP on, at /mcp; loopback unless a bearer token is set")
	tokenFile := s.FS.String("token-file", "", "file holding the bearer token clients must send (or set "+TokenEnv+"); required off loopback")
	idle := s.FS.Duration("idle-timeout", server.DefaultIdleTimeout, "end a session after this long with no call in flight")
	maxSess := s.FS.Int("max-sessions", server.DefaultMaxSessions, "refuse new sessions beyond this many live ones")
	persist := s.FS.Bool("persist-sessions", false, "keep each session's record and scratch across a restart; a client presenting its Mcp-Session-Id resumes it, or is refused when this host can no longer enforce its mode")
	drain := s.FS.Duration("drain-timeout", server.DefaultDrainTimeout, "after SIGTERM, refuse new sessions and calls (503) and let calls in flight finish for at most this long; 0 ends them at once")
	metricsListen := s.FS.String("metrics-listen", "", "`host:port` to serve Prometheus metrics on, at /metrics, on a listener of its own (off when empty); loopback unless --metrics-allow-remote")
	metricsRemote := s.FS.Bool("metrics-allow-remote", false, "allow --metrics-listen beyond loopback (the endpoint has no authentication; it shows counts only, never paths, hosts or session ids)")
	lf := logFlags(s)
	if code, ok := parse(s, args); !ok {
		return code
	}
	token := os.Getenv(TokenEnv)
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: --token-file: %v\n", err)
			return cli.ExitUsage
		}
		token = strings.TrimSpace(string(b))
		if fi, err := os.Stat(*tokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(os.Stderr, "evener-mcp: warning: --token-file is readable by other users (mode %v); chmod 600 it\n", fi.Mode().Perm())
		}
	}
	if token != "" && len(token) < 16 {
		fmt.Fprintln(os.Stderr, "evener-mcp: the bearer token is shorter than 16 characters; use a random one (e.g. openssl rand -hex 32)")
		return cli.ExitUsage
	}
	if !server.IsLoopback(*listen) {
		if token == "" {
			fmt.Fprintf(os.Stderr, "evener-mcp: refusing to listen on %s without a bearer token: anyone who can reach it could run commands in the sandbox (set --token-file or %s, or listen on 127.0.0.1)\n", *listen, TokenEnv)
			return cli.ExitUsage
		}
		fmt.Fprintf(os.Stderr, "evener-mcp: warning: listening on %s, beyond loopback: the bearer token and every file the tools return travel in clear text unless a TLS proxy fronts this port\n", *listen)
	}
	o, code := resolve(s, lf, true)
	if code != 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := server.ServeHTTP(ctx, o, server.HTTPOptions{
		Listen: *listen, Token: token, IdleTimeout: *idle, MaxSessions: *maxSess,
		PersistSessions: *persist,
		Ready:           func(a net.Addr) { o.Log.Info("serving MCP at http://"+a.String()+"/mcp", "listen", a.String()) },
		DrainTimeout:    *drain, MetricsListen: *metricsListen, MetricsAllowRemote: *metricsRemote,
		MetricsReady: func(a net.Addr) {
			o.Log.Info("serving metrics at http://"+a.String()+"/metrics", "metrics_listen", a.String())
		},
	})
	if err != nil {
		o.Log.Error(err.Error())
		return 1
	}
	return 0
}
