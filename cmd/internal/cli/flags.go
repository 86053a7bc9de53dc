// Package cli holds what the evener-mcp commands share: the flags every
// subcommand takes, and resolving them into a configuration and a policy.
package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// Exit codes of the launcher itself (a command's own code passes through).
const (
	ExitUsage   = 2   // bad flags or configuration
	ExitRefused = 125 // the sandbox cannot be enforced or could not be built
)

// FlagSet holds the flags every subcommand shares.
type FlagSet struct {
	FS *flag.FlagSet
	F  config.Flags
	// Usage is the mode's synopsis and description, printed above its
	// flags by -h.
	Usage string
}

// NewFlagSet declares the shared flags.
func NewFlagSet(name string) *FlagSet {
	s := &FlagSet{FS: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := s.FS
	fs.StringVar(&s.F.Workdir, "workdir", "", "the worktree the session works in (default: current directory)")
	fs.StringVar(&s.F.Sandbox, "sandbox", "", "off, read-only, workspace-write or restricted (default: workspace-write where enforceable, else off with a warning)")
	fs.StringVar(&s.F.SandboxNet, "sandbox-net", "", "on or off (default on)")
	fs.StringVar(&s.F.Backend, "sandbox-backend", "", "auto, native, landlock, none or microvm (default auto: native, else landlock where bubblewrap cannot create a user namespace)")
	fs.Var((*listFlag)(&s.F.AllowDomains), "allow-domain", "allowlist pattern for egress (repeatable)")
	fs.Var((*listFlag)(&s.F.AddDirs), "add-dir", "extra writable root (repeatable)")
	fs.StringVar(&s.F.Tools, "tools", "", "comma list limiting the published tools")
	fs.Var((*listFlag)(&s.F.ConfigFiles), "config", "trusted configuration file (repeatable)")
	fs.Var((*listFlag)(&s.F.MCPConfigs), "mcp-config", `stdio MCP servers to run behind this server, each under the session's sandbox: a {"mcpServers": {...}} JSON file as Claude Code writes it (repeatable)`)
	fs.StringVar(&s.F.StateDir, "state-dir", "", "audit log and session records")
	fs.Var((*listFlag)(&s.F.Protect), "protect", "path never writable in any sandboxed mode, by the file tools or any command (repeatable)")
	fs.Var((*listFlag)(&s.F.StateRW), "state-rw", "runner state directory, writable in every sandboxed mode, read-only included (repeatable)")
	fs.Var((*listFlag)(&s.F.SSHAgent), "ssh-agent", "give each session a brokered SSH agent offering this key (a SHA256 fingerprint or a public-key file) for logins to allowed hosts and commit signing; [ssh_agent] sets the rest (repeatable)")
	fs.BoolVar(&s.F.DisableMemory, "disable-memory", false, "publish no memory tools and no memory guidance")
	fs.IntVar(&s.F.MaxConcurrentCalls, "max-concurrent-calls", 0, "shell calls one session may run at once (default 8); each sandbox is also bound by limits.procs")
	fs.IntVar(&s.F.Terminals.Max, "max-terminals", 0, "terminals one session may have open at once (default 8)")
	fs.IntVar(&s.F.Terminals.Scrollback, "terminal-scrollback", 0, "unread output bytes kept per terminal (default 262144)")
	fs.DurationVar(&s.F.Terminals.Idle, "terminal-idle", 0, "close a terminal unused this long (default 30m)")
	return s
}

// Parse parses args; -h prints the flags.
func (s *FlagSet) Parse(args []string) error {
	s.FS.SetOutput(io.Discard)
	err := s.FS.Parse(args)
	if err == flag.ErrHelp {
		s.PrintHelp(os.Stderr)
	}
	return err
}

// PrintHelp prints the mode's usage and its flags to w.
func (s *FlagSet) PrintHelp(w io.Writer) {
	if s.Usage != "" {
		fmt.Fprint(w, s.Usage)
	}
	fmt.Fprintln(w, "flags:")
	s.FS.SetOutput(w)
	s.FS.PrintDefaults()
	s.FS.SetOutput(io.Discard)
}

// Mode usages, shown by `evener-mcp help` and each mode's -h.
const (
	UsageStdio = "usage: evener-mcp [flags]\n  MCP over stdio: what an mcpServers entry runs.\n"
	UsageServe = "usage: evener-mcp serve [flags]\n  MCP over Streamable HTTP at /mcp (default 127.0.0.1:8787), one sandbox per MCP session.\n"
	UsageExec  = "usage: evener-mcp exec [flags] -- CMD [ARG...]\n  Run one command under the policy; exit with its code (124 on --timeout, 125 when the sandbox was refused).\n"
	UsageProbe = "usage: evener-mcp probe [flags]\n  Print the host report and the resolved policy; exit 0 only when the mode is enforced.\n"
	// UsageGateway: the pins of the gateway's tools (docs/gateway.md, "Pins").
	UsageGateway = "usage: evener-mcp gateway pending [flags]\n       evener-mcp gateway approve [flags] SERVER__TOOL...\n       evener-mcp gateway pins [flags]\n" +
		"  The configured MCP servers' tools in this project (--workdir): pending lists those awaiting approval and what changed,\n" +
		"  approve publishes them (a running session picks it up), pins lists what is approved.\n"
)

// Version is the module version and VCS revision the binary was built
// from, as the Go toolchain recorded them: "(devel)" for a build from a
// checkout, its revision marked -dirty when the tree was modified.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "evener-mcp (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when string
	dirty := false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.time":
			when = st.Value
		case "vcs.modified":
			dirty = st.Value == "true"
		}
	}
	out := "evener-mcp " + v
	if rev != "" {
		if dirty {
			rev += "-dirty"
		}
		out += " revision " + rev
		if when != "" {
			out += " (" + when + ")"
		}
	}
	return out + " " + bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// Resolve loads the configuration layers, probes the host and resolves the
// policy. It prints one legible line and returns a non-zero exit code on
// any failure.
func (s *FlagSet) Resolve(depth func(*config.Config) confine.ProbeDepth) (*config.Config, *confine.Policy, int) {
	env := os.Environ()
	cfg, err := config.Load(s.F, env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: %v\n", err)
		return nil, nil, ExitUsage
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(os.Stderr, "evener-mcp: warning: %s\n", w)
	}
	host := confine.Probe(depth(cfg), env)
	if cfg.Backend != "" {
		if err := host.CheckBackend(cfg.Backend); err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp: refusing to start: %v\n", err)
			return cfg, nil, ExitRefused
		}
	}
	cfg.Spec.Backend = cfg.Backend
	pol, err := confine.Resolve(cfg.Spec, host)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp: refusing to start: %v\n", err)
		return cfg, nil, ExitRefused
	}
	return cfg, pol, 0
}
