package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/server"
)

// logOptions are the server's --log-format and --log-level (docs/observability.md,
// "Logs").
type logOptions struct {
	format, level string
}

func logFlags(s *cli.FlagSet) *logOptions {
	lf := &logOptions{}
	s.FS.StringVar(&lf.format, "log-format", "text", "diagnostics on stderr: text (coloured on a terminal) or json (one object a line after the startup line)")
	s.FS.StringVar(&lf.level, "log-level", "info", "debug, info, warn or error")
	return lf
}

// logger builds the server's logger on stderr, or says what is wrong.
func (lf *logOptions) logger() (*slog.Logger, bool) {
	level, ok := server.ParseLevel(lf.level)
	if !ok {
		fmt.Fprintf(os.Stderr, "evener-mcp: --log-level %q: want debug, info, warn or error\n", lf.level)
		return nil, false
	}
	if lf.format != "text" && lf.format != "json" {
		fmt.Fprintf(os.Stderr, "evener-mcp: --log-format %q: want text or json\n", lf.format)
		return nil, false
	}
	return server.NewLogger(os.Stderr, lf.format, level, isTerminal(os.Stderr)), true
}
