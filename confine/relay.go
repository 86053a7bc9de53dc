package confine

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// With the network on, a sandbox still gets its own network namespace: its
// only way out is two Unix sockets bind-mounted into its private /tmp,
// leading to the session's proxies. Inside, evener-mcp itself, re-executed
// as a hidden helper (RunRelay), listens on the namespace's loopback and
// relays to those sockets, then runs the command as its child. No socat,
// no polling: the listeners exist before the command starts.

// AgentSocket is where a session's brokered SSH agent appears inside the
// sandbox (Launcher.SetAgent), in its private /tmp.
const AgentSocket = "/tmp/.evener-ssh-agent/agent.sock"

// RelayDir is where the bridge appears inside the sandbox.
const RelayDir = "/tmp/.evener-egress"

// The loopback ports the relay listens on inside the sandbox.
const (
	RelayHTTPPort  = 3128
	RelaySOCKSPort = 1080
)

// Relay paths inside the sandbox.
const (
	relayExe        = RelayDir + "/evener-mcp"
	relayHTTPSock   = RelayDir + "/http.sock"
	relaySOCKSSock  = RelayDir + "/socks.sock"
	RelaySubcommand = "__egress-relay"
	ConnectSubcmd   = "__egress-connect"
	// LoopbackSubcommand holds a session's loopback (loopback_linux.go).
	LoopbackSubcommand = "__loopback-hold"
)

// EgressBridge is what the session's proxies hand the launcher: the host
// paths of the Unix sockets leading to them, and the credentials the
// command's tools must present.
type EgressBridge struct {
	HTTPSocket, SOCKSSocket  string
	HTTPUser, HTTPPassword   string
	SOCKSUser, SOCKSPassword string
}

// egressEnv points every common tool at the relay. NO_PROXY is emptied so
// nothing, loopback included, is reached around the proxies.
func egressEnv(b EgressBridge) map[string]string {
	return egressEnvAt(b, RelayHTTPPort, RelaySOCKSPort, relayExe)
}

// egressEnvAt is egressEnv for proxies on the given loopback ports, with
// connectExe as the ProxyCommand program. A program path ssh would not
// take literally (a quote, a % escape) leaves GIT_SSH_COMMAND unset: git
// over SSH then fails to connect, as everything else off the proxies does.
func egressEnvAt(b EgressBridge, httpPort, socksPort int, connectExe string) map[string]string {
	httpURL := (&url.URL{Scheme: "http", User: url.UserPassword(b.HTTPUser, b.HTTPPassword), Host: "127.0.0.1:" + strconv.Itoa(httpPort)}).String()
	socksURL := (&url.URL{Scheme: "socks5h", User: url.UserPassword(b.SOCKSUser, b.SOCKSPassword), Host: "127.0.0.1:" + strconv.Itoa(socksPort)}).String()
	env := map[string]string{
		"HTTP_PROXY": httpURL, "http_proxy": httpURL,
		"HTTPS_PROXY": httpURL, "https_proxy": httpURL,
		"ALL_PROXY": socksURL, "all_proxy": socksURL,
		"NO_PROXY": "", "no_proxy": "",
	}
	if connectExe != "" && !strings.ContainsAny(connectExe, "'%\"\\\n") {
		env["GIT_SSH_COMMAND"] = "ssh -o ProxyCommand='" + connectExe + " " + ConnectSubcmd + " %h %p'"
	}
	return env
}

// InsideBinaryName is the program built to carry the helpers that run
// inside a sandbox and nothing else (cmd/evener-mcp-inside): it links only
// this package, so each slot of a session sandbox, each relay and each
// Landlock helper starts faster than from evener-mcp (docs/speed.md).
const InsideBinaryName = "evener-mcp-inside"

// RelayBinaryName is the program that carries the same helpers when
// evener-mcp-inside is not installed: evener-mcp, the small binary (the MCP
// server beside it links libraries whose initialisation would add
// milliseconds to every sandboxed command).
const RelayBinaryName = "evener-mcp"

// relayBinary finds the program that runs the helpers inside a sandbox (the
// egress relay, the session sandbox's spawner and slots, the Landlock
// helper): evener-mcp-inside beside this binary, else evener-mcp beside it
// (or this binary, when it is evener-mcp), else this binary itself, which
// carries the same hidden helpers.
func relayBinary() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("locate this binary for the egress relay: %w", err)
	}
	for _, name := range []string{InsideBinaryName, RelayBinaryName} {
		sib := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(sib); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if r, err := filepath.EvalSymlinks(sib); err == nil {
				return r, nil
			}
		}
	}
	return exe, nil
}

// RunHidden runs one of the hidden helpers the launcher re-executes this
// project's binaries as (like runc's init): the egress relay, the SOCKS
// connect helper for git over SSH, the loopback holder. They load no
// configuration. ok is false when sub names none of them.
func RunHidden(sub string, args []string) (code int, ok bool) {
	switch sub {
	case RelaySubcommand:
		return RunRelay(args), true
	case ConnectSubcmd:
		return RunConnect(args), true
	case LoopbackSubcommand:
		return RunLoopbackHold(args), true
	case LandlockSubcommand:
		return RunLandlock(args), true
	case SpawnerSubcommand:
		return RunSessionSpawner(args), true
	case SlotSubcommand:
		return RunSessionSlot(args), true
	}
	return 0, false
}
