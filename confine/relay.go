package confine

import (
	"net/url"
	"strconv"
)

// With the network on, a sandbox still gets its own network namespace: its
// only way out is two Unix sockets bind-mounted into its private /tmp,
// leading to the session's proxies. Inside, evener-mcp itself, re-executed
// as a hidden helper (RunRelay), listens on the namespace's loopback and
// relays to those sockets, then runs the command as its child. No socat,
// no polling: the listeners exist before the command starts.

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
	httpURL := (&url.URL{Scheme: "http", User: url.UserPassword(b.HTTPUser, b.HTTPPassword), Host: "127.0.0.1:" + strconv.Itoa(RelayHTTPPort)}).String()
	socksURL := (&url.URL{Scheme: "socks5h", User: url.UserPassword(b.SOCKSUser, b.SOCKSPassword), Host: "127.0.0.1:" + strconv.Itoa(RelaySOCKSPort)}).String()
	return map[string]string{
		"HTTP_PROXY": httpURL, "http_proxy": httpURL,
		"HTTPS_PROXY": httpURL, "https_proxy": httpURL,
		"ALL_PROXY": socksURL, "all_proxy": socksURL,
		"NO_PROXY": "", "no_proxy": "",
		"GIT_SSH_COMMAND": "ssh -o ProxyCommand='" + relayExe + " " + ConnectSubcmd + " %h %p'",
	}
}
