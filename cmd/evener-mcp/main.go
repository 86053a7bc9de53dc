// Command evener-mcp is an MCP server whose file and shell tools cannot step
// outside one documented confinement boundary.
//
// main only parses flags, loads the configuration and hands it to one run
// function per subcommand.
//
// The two go:debug lines turn off the runtime's cgroup-aware GOMAXPROCS:
// reading the cgroup files and the mount table at every start costs a
// one-shot `exec` more than it could ever gain, and the server's work is
// waiting on sandboxes, not computing.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"fmt"
	"os"

	"github.com/evener-dev/evener-mcp/cmd/internal/cli"
	"github.com/evener-dev/evener-mcp/confine"
)

func main() {
	confine.Phase("main")
	code := run(os.Args[1:])
	confine.Phase("exit")
	confine.FlushPhases()
	os.Exit(code)
}

func run(args []string) int {
	sub := ""
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		sub, args = args[0], args[1:]
	}
	if code, ok := runHidden(sub, args); ok {
		return code
	}
	if sub == "version" || (sub == "" && len(args) > 0 && (args[0] == "--version" || args[0] == "-version")) {
		fmt.Println(cli.Version())
		return 0
	}
	if sub == "" || sub == "serve" {
		// The MCP server is a binary of its own beside this one; it
		// takes over this process (same pid, same stdio) and drops the
		// file capabilities for itself, which this process, started by
		// root, prepares (docs/security.md).
		env, err := confine.DropBeforeExec()
		if err != nil {
			fmt.Fprintln(os.Stderr, "evener-mcp: refusing to start:", err)
			return cli.ExitRefused
		}
		if sub == "serve" {
			args = append([]string{"serve"}, args...)
		}
		return execServer(args, env)
	}
	// Started by root: give up the file capabilities first (docs/security.md).
	if err := confine.DropServerCapabilities(); err != nil {
		fmt.Fprintln(os.Stderr, "evener-mcp: refusing to start:", err)
		return cli.ExitRefused
	}
	confine.Phase("caps-dropped")
	switch sub {
	case "exec":
		return runExec(args)
	case "probe":
		return runProbe(args)
	case "gateway":
		return runGateway(args)
	case "help", "-h", "--help":
		usage()
		return 0
	}
	fmt.Fprintf(os.Stderr, "evener-mcp: unknown subcommand %q\n", sub)
	usage()
	return cli.ExitUsage
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  evener-mcp [flags]                        MCP over stdio (what an mcpServers entry runs)
  evener-mcp serve [flags]                  MCP over Streamable HTTP at /mcp (default 127.0.0.1:8787)
  evener-mcp exec [flags] -- CMD [ARG...]   run one command under the policy; exit with its code
  evener-mcp probe [flags]                  print the host report and the resolved policy
  evener-mcp gateway pending|pins [flags]   MCP servers' tools awaiting approval in this project, or approved
  evener-mcp gateway approve [flags] NAME.. approve tools (SERVER__TOOL) awaiting approval
  evener-mcp version                        print the version and VCS revision (also --version)
  evener-mcp help                           this text; MODE -h prints a mode's own flags
        (evener-mcp -h, serve -h, exec -h, probe -h, gateway -h)
flags every mode takes:
`)
	fs := cli.NewFlagSet("evener-mcp").FS
	fs.SetOutput(os.Stderr)
	fs.PrintDefaults()
}
