package egress

// This file is what the two proxies share: the Decider they consult, the
// Violation they report, the session's pair (proxyPair) with its credentials,
// the connection table Close empties, dialing a checked address, and the
// byte pump of an established tunnel.
//
// # The rule both proxies follow
//
// Every connection a client asks for is decided on its own, by the name or
// address the client gave and the port; nothing is resolved here. A refused
// target is never dialed and never looked up. An allowed one is dialed at one
// of the addresses the Decider checked (Decision.Addrs), never by its name, so
// a DNS answer that changes between check and dial (rebinding) cannot steer the
// connection.
//
// # Refused, or unreachable
//
// Only a policy decision is a refusal: HTTP 403 (the reason in deniedHeader),
// SOCKS5 reply 2 "connection not allowed by ruleset", and a Violation. An
// allowed destination the proxy cannot reach is a gateway failure, answered
// as such and never reported as a violation (it breaks no rule; the client
// gets the reason in the answer):
//
//	the allowed name did not resolve       HTTP 502   SOCKS5 4 "host unreachable"
//	the connection was refused or failed   HTTP 502   SOCKS5 5 "connection refused"
//	                                                  (3 "network unreachable" and
//	                                                  4 "host unreachable" when the
//	                                                  kernel said exactly that)
//	the connection timed out               HTTP 504   SOCKS5 6 "TTL expired", the
//	                                                  only RFC 1928 code for a timeout
//
// The HTTP status line carries the reason after the standard phrase, so a
// client that shows only the status line (pip, git) still shows why.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Decider decides one outbound connection. *Allowlist is the production
// Decider; tests substitute their own.
type Decider interface {
	// Decide must not look up a name it refuses. When it allows, Addrs are
	// the checked addresses the proxy may dial (with Decision.Port).
	Decide(ctx context.Context, host string, port int) Decision
}

// actionNetworkOutbound is Violation.Action for every refusal here.
const actionNetworkOutbound = "network-outbound"

// Violation is one refusal attributed to a call (docs/observability.md, "Violations"):
// the refused action, its target and the raw line it was read from. It is
// the one violation type: egress, the lowest package that reports one,
// owns it, and session re-exports it (session.Violation) for the packages
// above, which the package map keeps from importing egress. The JSON names
// are what a shell result and the violations resource show.
//
// A refused connection reports one here: Action is always
// actionNetworkOutbound, Target host:port as the client asked (control
// bytes escaped), Raw the reason line "<proxy> <verb>: <reason>".
type Violation struct {
	Action string `json:"action"`
	Target string `json:"target"`
	Raw    string `json:"raw"`
}

// proxyOptions configures one session's pair of proxies.
type proxyOptions struct {
	Decider Decider
	// OnViolation is called for every policy refusal (may be nil), never
	// for an allowed destination that could not be reached, on the
	// connection's goroutine before the client is answered, so a refusal
	// is recorded by the time the client can see it. It must not block for
	// long and must not call Close.
	OnViolation func(Violation)
	// DialTimeout bounds a decision, and separately a dial (all checked
	// addresses together); default 10s.
	DialTimeout time.Duration
	// Dial opens a connection to a checked address ("192.0.2.1:443",
	// "[2001:db8::1]:443"); it is never handed a name. Default: net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

const (
	defaultDialTimeout = 10 * time.Second
	// A Decision naming more addresses than this is tried only this far.
	maxDialAddrs = 8
	// Credentials are this many random bytes, hex-encoded.
	credentialBytes = 16
)

// errProxiesClosed is returned for work that arrives after Close.
var errProxiesClosed = errors.New("egress: proxies closed")

// proxyPair is one session's pair: an HTTP proxy (CONNECT and plain HTTP) and a
// SOCKS5 proxy, each on 127.0.0.1 with a random port, each requiring its own
// random credentials. Close ends both and every connection through them.
type proxyPair struct {
	decider     Decider
	onViolation func(Violation)
	dialTimeout time.Duration
	dialFn      func(ctx context.Context, network, addr string) (net.Conn, error)

	httpLn, socksLn          net.Listener
	httpUser, httpPassword   string
	socksUser, socksPassword string

	// upstream forwards plain-HTTP requests; it dials only address literals
	// (dialLiteral), so its connection pool is keyed by checked address.
	upstream *http.Transport

	ctx    context.Context // canceled by Close: pending decisions, dials and round trips end
	cancel context.CancelFunc

	mu     sync.Mutex            // guards conns and closed
	conns  map[net.Conn]struct{} // every open client and upstream connection
	closed bool

	wg        sync.WaitGroup // every goroutine this package started
	closeOnce sync.Once
	closeErr  error
}

// startProxies opens a session's two proxies on 127.0.0.1 and serves them until
// Close.
func startProxies(o proxyOptions) (*proxyPair, error) {
	if o.Decider == nil {
		return nil, errors.New("egress: proxyOptions.Decider is required")
	}
	p := &proxyPair{
		decider:     o.Decider,
		onViolation: o.OnViolation,
		dialTimeout: o.DialTimeout,
		dialFn:      o.Dial,
		conns:       map[net.Conn]struct{}{},
	}
	if p.dialTimeout <= 0 {
		p.dialTimeout = defaultDialTimeout
	}
	if p.dialFn == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		p.dialFn = d.DialContext
	}
	for _, s := range []*string{&p.httpUser, &p.httpPassword, &p.socksUser, &p.socksPassword} {
		v, err := randomCredential()
		if err != nil {
			return nil, err
		}
		*s = v
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.upstream = p.newUpstreamTransport()

	var lc net.ListenConfig
	var err error
	if p.httpLn, err = lc.Listen(p.ctx, "tcp4", "127.0.0.1:0"); err != nil {
		p.cancel()
		return nil, fmt.Errorf("egress: http proxy: %w", err)
	}
	if p.socksLn, err = lc.Listen(p.ctx, "tcp4", "127.0.0.1:0"); err != nil {
		p.httpLn.Close()
		p.cancel()
		return nil, fmt.Errorf("egress: socks proxy: %w", err)
	}
	p.wg.Go(func() { p.acceptLoop(p.httpLn, p.serveHTTPConn) })
	p.wg.Go(func() { p.acceptLoop(p.socksLn, p.serveSOCKSConn) })
	return p, nil
}

func randomCredential() (string, error) {
	b := make([]byte, credentialBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("egress: credentials: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// HTTPAddr is the HTTP proxy's address, "127.0.0.1:port".
func (p *proxyPair) HTTPAddr() string { return p.httpLn.Addr().String() }

// SOCKSAddr is the SOCKS5 proxy's address, "127.0.0.1:port".
func (p *proxyPair) SOCKSAddr() string { return p.socksLn.Addr().String() }

// HTTPUser is the user name the HTTP proxy requires (Proxy-Authorization: Basic).
func (p *proxyPair) HTTPUser() string { return p.httpUser }

// HTTPPassword is the password the HTTP proxy requires.
func (p *proxyPair) HTTPPassword() string { return p.httpPassword }

// SOCKSUser is the user name the SOCKS5 proxy requires (RFC 1929).
func (p *proxyPair) SOCKSUser() string { return p.socksUser }

// SOCKSPassword is the password the SOCKS5 proxy requires.
func (p *proxyPair) SOCKSPassword() string { return p.socksPassword }

// Close stops both listeners, cuts every open connection and tunnel, and
// waits for every goroutine the proxies started. It is idempotent.
func (p *proxyPair) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		open := make([]net.Conn, 0, len(p.conns))
		for c := range p.conns {
			open = append(open, c)
		}
		p.mu.Unlock()

		p.cancel()
		var errs []error
		for _, ln := range []net.Listener{p.httpLn, p.socksLn} {
			if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
		for _, c := range open {
			c.Close()
		}
		p.upstream.CloseIdleConnections()
		p.wg.Wait()
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// track records c as open; false means the proxies are closed and the caller
// must close c itself.
func (p *proxyPair) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxyPair) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// acceptLoop serves ln until it is closed, one tracked goroutine per
// connection.
func (p *proxyPair) acceptLoop(ln net.Listener, serve func(net.Conn)) {
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: wait and retry rather than
			// spin or give up the session's only way out.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() {
			defer p.untrack(c)
			defer c.Close()
			serve(c)
		})
	}
}

// decide asks the Decider, bounded by the dial timeout and by Close.
func (p *proxyPair) decide(ctx context.Context, host string, port int) Decision {
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	return p.decider.Decide(ctx, host, port)
}

// refused reports a refusal and returns the reason line it reported.
// via names the proxy and verb ("http CONNECT", "socks5 BIND").
func (p *proxyPair) refused(via, host string, port int, reason string) Violation {
	if reason == "" {
		reason = "not allowed"
	}
	v := Violation{
		Action: actionNetworkOutbound,
		Target: printableASCII(net.JoinHostPort(host, strconv.Itoa(port)), 300),
		Raw:    printableASCII(via+": "+reason, 500),
	}
	if p.onViolation != nil {
		p.onViolation(v)
	}
	return v
}

// dialDecision connects to one of an allowed Decision's checked addresses,
// in order, sharing the dial timeout among them. The connection is tracked;
// the caller closes and untracks it.
func (p *proxyPair) dialDecision(ctx context.Context, d Decision, askedPort int) (net.Conn, error) {
	port := d.Port
	if port == 0 {
		port = askedPort
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("egress: invalid port %d", port)
	}
	addrs := d.Addrs
	if len(addrs) == 0 {
		return nil, errors.New("egress: the decision named no address to dial")
	}
	if len(addrs) > maxDialAddrs {
		addrs = addrs[:maxDialAddrs]
	}
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var errs []error
	for i, a := range addrs {
		if !a.IsValid() {
			errs = append(errs, errors.New("egress: invalid address in decision"))
			continue
		}
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		// Like net.Dialer with several addresses: each attempt gets an even
		// share of what is left, so one black hole cannot eat the budget.
		share := time.Until(deadline) / time.Duration(len(addrs)-i)
		actx, acancel := context.WithTimeout(ctx, share)
		c, err := p.dialFn(actx, "tcp", ap.String())
		acancel()
		if err == nil {
			if !p.track(c) {
				c.Close()
				return nil, errProxiesClosed
			}
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// upstreamFailure is how the proxies answer an allowed destination they
// could not reach (see the file comment).
type upstreamFailure struct {
	status int    // http.StatusBadGateway or http.StatusGatewayTimeout
	socks  byte   // the SOCKS5 reply code
	why    string // a few words: "connection refused", "no such host"
}

// lookupFailure is the answer to an allowed name that did not resolve
// (d.lookupFailed).
func lookupFailure(d Decision) upstreamFailure {
	return upstreamFailure{http.StatusBadGateway, socksHostUnreachable, d.Reason}
}

// connectFailure classifies an error of dialDecision for target
// ("host:port" as the client asked). The text is ours: a dial error's own
// names the checked address and the local one.
func connectFailure(target string, err error) upstreamFailure {
	code, socks, why := http.StatusBadGateway, byte(socksConnRefused), "connection failed"
	var ne net.Error
	switch {
	case errors.Is(err, errProxiesClosed), errors.Is(err, context.Canceled):
		socks, why = socksGeneralFailure, "the proxy is closing"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &ne) && ne.Timeout():
		code, socks, why = http.StatusGatewayTimeout, socksTTLExpired, "connection timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.Is(err, syscall.ENETUNREACH):
		socks, why = socksNetUnreachable, "network unreachable"
	case errors.Is(err, syscall.EHOSTUNREACH):
		socks, why = socksHostUnreachable, "no route to host"
	case errors.Is(err, syscall.ECONNRESET):
		why = "connection reset"
	}
	return upstreamFailure{code, socks, "cannot connect to " + printableASCII(target, 300) + " (" + why + ")"}
}

// tunnelBufferSize is the copy buffer when a side is not a bare TCP
// connection (a wrapped test Dial); TCP to TCP uses splice(2) and needs none.
const tunnelBufferSize = 256 << 10

var tunnelBuffers = sync.Pool{New: func() any { b := make([]byte, tunnelBufferSize); return &b }}

// pipeTunnel copies bytes both ways between client and upstream until both
// directions end. pending holds client bytes already read past the request
// (sent first). An end of stream on one side is passed on as a half-close;
// an error on either side cuts both. Both connections are closed on return.
func (p *proxyPair) pipeTunnel(client net.Conn, pending []byte, upstream net.Conn) {
	defer upstream.Close()
	defer client.Close()
	if len(pending) > 0 {
		if _, err := upstream.Write(pending); err != nil {
			return
		}
	}
	done := make(chan struct{})
	p.wg.Go(func() {
		defer close(done)
		pipeHalf(upstream, client)
	})
	pipeHalf(client, upstream)
	<-done
}

// pipeHalf copies src to dst; see pipeTunnel.
func pipeHalf(dst, src net.Conn) {
	var err error
	dstTCP, ok1 := dst.(*net.TCPConn)
	_, ok2 := src.(*net.TCPConn)
	if ok1 && ok2 {
		_, err = dstTCP.ReadFrom(src) // splice(2) on Linux
	} else {
		bp := tunnelBuffers.Get().(*[]byte)
		_, err = io.CopyBuffer(dst, src, *bp)
		tunnelBuffers.Put(bp)
	}
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}

// lingerClose closes c after telling the client we are done and reading
// (and discarding) what it already sent, briefly, so the reply we wrote is
// not lost to a reset caused by unread input.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 256<<10))
	}
	c.Close()
}

// printableASCII returns s with every byte outside printable ASCII escaped
// as \xNN, cut to at most max bytes: safe for a header value and a log line.
func printableASCII(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if b.Len() >= max {
			b.WriteString("...")
			break
		}
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\\' {
			b.WriteByte(c)
			continue
		}
		if c == '\\' {
			b.WriteString(`\\`)
			continue
		}
		// Non-ASCII too: header values stay ASCII and lookalikes stay visible.
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	return b.String()
}
