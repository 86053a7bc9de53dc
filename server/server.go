// Package server wires the tools to MCP: one sandbox session per MCP
// session, the capability preamble as instructions and as a resource, the
// audit log, and the transports (stdio here).
//
// # Sessions
//
// A Session owns the confine.Session (launcher and scratch), the file
// layer and the audit stream. Closing it kills whatever it still runs and
// removes its scratch.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"slices"
	"time"

	"github.com/evener-dev/evener-mcp/config"
	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/egress"
	"github.com/evener-dev/evener-mcp/tools"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// sessionEndBudget bounds the SessionEnd hooks of a closing session.
const sessionEndBudget = 10 * time.Second

// Version is reported to clients.
var Version = "0.1.0-dev"

// PreambleURI is the resource holding the capability preamble.
const PreambleURI = "evener://sandbox/preamble"

// Options configure a server.
type Options struct {
	Config *config.Config
	Policy *confine.Policy
	Caps   tools.Caps
	// Warn receives one-line warnings meant for the person running the
	// server (stderr), never for the model.
	Warn func(string)
}

// Session is one sandbox session.
type Session struct {
	ID       string
	Policy   *confine.Policy
	Launcher *confine.Session
	Files    *confine.FileAccess
	Audit    *Audit
	Egress   *egress.Session // nil unless sandboxed with the network on
	Tools    []string
	// DegradedShell is set when the delegate floor could not be enforced
	// for the shell (no backend): the file tools keep the read-only rules.
	DegradedShell string

	hooks *sessionHooks
}

// NewSession builds a session from the server's policy, narrowed by the
// tool scope: a session whose tools include no mutation tool runs its shell
// read-only (spec 000, the implicit delegate floor).
func NewSession(o Options) (*Session, error) {
	id := newID()
	pol := o.Policy
	toolset := o.Config.Tools
	if toolset == nil {
		toolset = tools.Names
	}
	s := &Session{ID: id, Tools: toolset}
	if !slices.ContainsFunc(toolset, func(t string) bool { return slices.Contains(tools.MutationTools, t) }) &&
		pol.Mode() != confine.ModeReadOnly && pol.Mode() != confine.ModeRestricted {
		narrowed, err := pol.Narrow(confine.ModeReadOnly, "", nil)
		switch {
		case err == nil:
			pol = narrowed
		case errors.Is(err, confine.ErrUnenforceable):
			s.DegradedShell = "no tool here may change files, but no sandbox backend can enforce a read-only shell on this host: the shell is unconfined"
		default:
			return nil, err
		}
	}
	s.Policy = pol
	var err error
	if s.Launcher, err = confine.NewSession(pol, o.Config.EnvPassthrough); err != nil {
		return nil, err
	}
	filesPolicy := pol
	if s.DegradedShell != "" {
		// The file tools keep the write boundary even where the shell
		// cannot: they are checked in this process.
		filesPolicy = pol.FileToolsReadOnly()
	}
	if s.Files, err = confine.NewFileAccess(filesPolicy, s.Launcher.Scratch()); err != nil {
		s.Launcher.Close()
		return nil, err
	}
	if s.Audit, err = OpenAudit(o.Config.StateDir, id, pol.Mode()); err != nil {
		s.Close()
		return nil, err
	}
	s.hooks = newSessionHooks(o, s)
	if pol.Mode() != confine.ModeOff && pol.Network() == confine.NetworkOn {
		s.Egress, err = egress.StartSession(o.Config.AllowDomains, os.Getenv(egress.HostsEnv), os.TempDir(), s.Audit.Network)
		if err == nil {
			err = s.Launcher.SetEgress(confine.EgressBridge(s.Egress.Bridge()))
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close kills the session's processes and removes its scratch.
func (s *Session) Close() error {
	var errs []error
	if s.hooks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sessionEndBudget)
		s.hooks.end(ctx)
		cancel()
	}
	if s.Egress != nil {
		errs = append(errs, s.Egress.Close())
	}
	if s.Files != nil {
		errs = append(errs, s.Files.Close())
	}
	if s.Launcher != nil {
		errs = append(errs, s.Launcher.Close())
	}
	errs = append(errs, s.Audit.Close())
	return errors.Join(errs...)
}

// Build returns the MCP server for a session: its tools (filtered by the
// scope), the preamble as instructions and as a readable resource.
func Build(s *Session, o Options, preamble string) *mcpserver.MCPServer {
	srv := mcpserver.NewMCPServer("evener-mcp", Version,
		mcpserver.WithInstructions(preamble),
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithResourceCapabilities(false, false),
		mcpserver.WithInputSchemaValidation(),
		mcpserver.WithOutputSchemaValidation(),
		mcpserver.WithRecovery(),
		mcpserver.WithToolHandlerMiddleware(s.hooks.middleware),
	)
	deps := tools.Deps{Policy: s.Policy, Session: s.Launcher, Files: s.Files, Audit: s.Audit, Caps: o.Caps,
		NetViolations: func(from, to time.Time) []tools.Violation {
			var out []tools.Violation
			for _, v := range s.Egress.Between(from, to) {
				out = append(out, tools.Violation(v))
			}
			return out
		}}
	for _, t := range tools.All(deps) {
		if slices.Contains(s.Tools, t.Tool.Name) {
			srv.AddTool(t.Tool, t.Handler)
		}
	}
	srv.AddResource(mcp.NewResource(PreambleURI, "sandbox preamble",
		mcp.WithResourceDescription("What this session's sandbox enforces, as the model is told at start."),
		mcp.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: PreambleURI, MIMEType: "text/plain", Text: preamble}}, nil
		})
	return srv
}

// RunStdio serves one session over stdin/stdout until stdin closes or ctx
// ends.
func RunStdio(ctx context.Context, o Options, stdin io.Reader, stdout io.Writer) error {
	s, err := NewSession(o)
	if err != nil {
		return err
	}
	defer s.Close()
	if s.DegradedShell != "" && o.Warn != nil {
		o.Warn(s.DegradedShell)
	}
	preamble := Preamble(ctx, s.Launcher, o.Config.AllowDomains, s.DegradedShell)
	if warning, extra := s.hooks.start(ctx); warning != "" || extra != "" {
		if warning != "" && o.Warn != nil {
			o.Warn(warning)
		}
		preamble += extra
	}
	srv := Build(s, o, preamble)
	out := &syncWriter{w: stdout}
	stdio := mcpserver.NewStdioServer(srv)
	err = stdio.Listen(ctx, newGuardedReader(stdin, out), out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
