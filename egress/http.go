package egress

// The HTTP proxy: CONNECT tunnels and plain-HTTP forwarding of absolute-form
// requests, each request decided on its own.
//
// It reads requests itself (http.ReadRequest on its own connection loop)
// rather than under net/http.Server or goproxy, because the server deletes the
// Host header before any handler runs, and this proxy must see it to refuse a
// request whose Host header names another host than its request line. The
// head of each request is peeked (bounded) before it is parsed; the Host
// values are read from those same bytes with the same textproto parser
// http.ReadRequest uses, so the two cannot disagree.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// httpMaxHeaderBytes bounds a request head (request line and headers).
	httpMaxHeaderBytes = 64 << 10
	// httpHeaderTimeout bounds reading a head once its first byte arrived.
	httpHeaderTimeout = 30 * time.Second
	// httpIdleTimeout bounds waiting for the next request on a kept-alive
	// connection.
	httpIdleTimeout = 2 * time.Minute
	// httpMaxResponseHeaderBytes bounds an upstream response head.
	httpMaxResponseHeaderBytes = 256 << 10

	// deniedHeader carries the reason (one escaped line) on every 403.
	deniedHeader = "X-Evener-Denied"
)

var errHeadTooLarge = errors.New("request head too large")

// newUpstreamTransport is the plain-HTTP forwarder's client. It never uses
// an environment proxy, never adds compression, and dials only address
// literals: requests reach it with URL.Host set to the checked address.
func (p *proxyPair) newUpstreamTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            p.dialLiteral,
		DisableCompression:     true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: httpMaxResponseHeaderBytes,
	}
}

// dialLiteral is the upstream transport's dialer: addr must be an IP
// address and port (the checked address the request was rewritten to);
// a name is refused rather than resolved.
func (p *proxyPair) dialLiteral(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: refusing to dial %q: not a checked address", addr)
	}
	c, err := p.dialDecision(ctx, Decision{Allow: true, Addrs: []netip.Addr{ap.Addr()}, Port: int(ap.Port())}, int(ap.Port()))
	if err != nil {
		return nil, &upstreamDialError{err}
	}
	return &trackedConn{Conn: c, p: p}, nil
}

// upstreamDialError marks a failure to connect (nothing was sent), so the
// next checked address may be tried.
type upstreamDialError struct{ err error }

func (e *upstreamDialError) Error() string { return e.err.Error() }
func (e *upstreamDialError) Unwrap() error { return e.err }

// trackedConn is an upstream connection owned by the transport: closing it
// also takes it out of the table Close empties.
type trackedConn struct {
	net.Conn
	p    *proxyPair
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.p.untrack(c.Conn) })
	return err
}

// httpClientConn is one client connection to the HTTP proxy.
type httpClientConn struct {
	p  *proxyPair
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer

	// wmu guards respStarted and continueSent, and orders an interim
	// "100 Continue" (sent from the transport's body reader) before the
	// final response head.
	wmu          sync.Mutex
	respStarted  bool
	continueSent bool
}

func (p *proxyPair) serveHTTPConn(c net.Conn) {
	hc := &httpClientConn{
		p:  p,
		c:  c,
		br: bufio.NewReaderSize(c, httpMaxHeaderBytes),
		bw: bufio.NewWriterSize(c, 32<<10),
	}
	for hc.serveOne() {
	}
}

// serveOne reads and answers one request; false ends the connection.
func (hc *httpClientConn) serveOne() bool {
	hc.c.SetReadDeadline(time.Now().Add(httpIdleTimeout))
	if _, err := hc.br.Peek(1); err != nil {
		return false
	}
	hc.c.SetReadDeadline(time.Now().Add(httpHeaderTimeout))
	head, err := hc.peekHead()
	if err != nil {
		if errors.Is(err, errHeadTooLarge) {
			hc.reply(nil, http.StatusRequestHeaderFieldsTooLarge, nil, "evener-mcp: request head too large\n", true)
			lingerClose(hc.c)
		}
		return false
	}
	hostValues, headErr := headHostValues(head)
	req, err := http.ReadRequest(hc.br)
	if err != nil || headErr != nil {
		hc.reply(nil, http.StatusBadRequest, nil, "evener-mcp: malformed request\n", true)
		lingerClose(hc.c)
		return false
	}
	hc.c.SetReadDeadline(time.Time{})
	hc.wmu.Lock()
	hc.respStarted, hc.continueSent = false, false
	hc.wmu.Unlock()
	keep := hc.handle(req, hostValues)
	if !keep {
		lingerClose(hc.c)
	}
	return keep
}

// peekHead returns the next request head (through its empty line) without
// consuming it, reading more until it is complete or too large.
func (hc *httpClientConn) peekHead() ([]byte, error) {
	scanned := 0
	for {
		buf, _ := hc.br.Peek(hc.br.Buffered())
		if end := headEnd(buf, scanned); end >= 0 {
			return buf[:end], nil
		}
		scanned = max(0, len(buf)-2)
		if len(buf) >= hc.br.Size() {
			return nil, errHeadTooLarge
		}
		if _, err := hc.br.Peek(len(buf) + 1); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, errHeadTooLarge
			}
			return nil, err
		}
	}
}

// headEnd is the length of the head in buf (through the first empty line:
// "\n\n" or "\n\r\n", as textproto reads lines), or -1; the search starts at from.
func headEnd(buf []byte, from int) int {
	for i := from; i < len(buf); i++ {
		if buf[i] != '\n' || i == 0 {
			continue
		}
		if buf[i-1] == '\n' {
			return i + 1
		}
		if buf[i-1] == '\r' && i >= 2 && buf[i-2] == '\n' {
			return i + 1
		}
	}
	return -1
}

// headHostValues returns the Host header values of a request head.
func headHostValues(head []byte) ([]string, error) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	return h["Host"], nil
}

func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

// handle answers one parsed request; false ends the connection.
func (hc *httpClientConn) handle(req *http.Request, hostValues []string) bool {
	if !hc.authorized(req) {
		return hc.reply(req, http.StatusProxyAuthRequired,
			http.Header{"Proxy-Authenticate": {`Basic realm="evener-mcp"`}},
			"evener-mcp: proxy authentication required\n", false)
	}
	if req.Method == http.MethodConnect {
		hc.connect(req)
		return false
	}
	return hc.forward(req, hostValues)
}

func (hc *httpClientConn) authorized(req *http.Request) bool {
	scheme, cred, ok := strings.Cut(req.Header.Get("Proxy-Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return false
	}
	u := subtle.ConstantTimeCompare([]byte(user), []byte(hc.p.httpUser))
	w := subtle.ConstantTimeCompare([]byte(pass), []byte(hc.p.httpPassword))
	return u&w == 1
}

// deny answers a refusal: 403, the reason in deniedHeader, a violation.
func (hc *httpClientConn) deny(req *http.Request, via, host string, port int, reason string, closeConn bool) bool {
	v := hc.p.refused(via, host, port, reason)
	if reason == "" {
		reason = "not allowed"
	}
	return hc.reply(req, http.StatusForbidden, http.Header{deniedHeader: {reason}},
		"evener-mcp: egress refused "+v.Target+": "+v.Raw+"\n", closeConn)
}

// unreachable answers an allowed destination the proxy could not reach:
// 502 or 504, the reason after the status phrase and in the body; not a
// violation.
func (hc *httpClientConn) unreachable(req *http.Request, f upstreamFailure, closeConn bool) bool {
	why := printableASCII(f.why, 300)
	return hc.replyPhrase(req, f.status, http.StatusText(f.status)+": "+why, nil,
		"evener-mcp: "+why+"; the destination is allowed: this is not a policy refusal\n", closeConn)
}

// connect serves CONNECT: decide the authority, dial a checked address,
// then pump bytes until both sides are done.
func (hc *httpClientConn) connect(req *http.Request) {
	host, port, err := splitAuthority(req.RequestURI)
	if err != nil {
		hc.reply(req, http.StatusBadRequest, nil, "evener-mcp: CONNECT needs host:port: "+printableASCII(err.Error(), 200)+"\n", true)
		return
	}
	d := hc.p.decide(hc.p.ctx, host, port)
	if d.lookupFailed() {
		hc.unreachable(req, lookupFailure(d), true)
		return
	}
	if !d.Allow {
		hc.deny(req, "http CONNECT", host, port, d.Reason, true)
		return
	}
	up, err := hc.p.dialDecision(hc.p.ctx, d, port)
	if err != nil {
		hc.unreachable(req, connectFailure(net.JoinHostPort(host, strconv.Itoa(port)), err), true)
		return
	}
	defer hc.p.untrack(up)
	if _, err := io.WriteString(hc.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		return
	}
	// Bytes the client sent after the CONNECT head (a TLS ClientHello in the
	// same write) are already buffered: they go first.
	var pending []byte
	if n := hc.br.Buffered(); n > 0 {
		b, _ := hc.br.Peek(n)
		pending = bytes.Clone(b)
	}
	hc.p.pipeTunnel(hc.c, pending, up)
}

// splitAuthority parses a CONNECT request-target: host:port, nothing else.
func splitAuthority(a string) (string, int, error) {
	if strings.ContainsAny(a, "/@?#") {
		return "", 0, fmt.Errorf("%q is not host:port", a)
	}
	host, ps, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, errors.New("empty host")
	}
	port, err := parsePort(ps)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// hostPortOf splits a Host header value; the port defaults to 80.
func hostPortOf(v string) (string, int, error) {
	host, ps, err := net.SplitHostPort(v)
	if err != nil {
		// No port (or a bare bracketed IPv6 address).
		host, ps = v, ""
	}
	if ps == "" {
		return host, 80, nil
	}
	port, err := parsePort(ps)
	return host, port, err
}

// forward serves a plain-HTTP request in absolute form.
func (hc *httpClientConn) forward(req *http.Request, hostValues []string) bool {
	u := req.URL
	if !u.IsAbs() || u.Host == "" {
		return hc.reply(req, http.StatusBadRequest, nil, "evener-mcp: this is a proxy; send absolute-form requests (http://host/path) or CONNECT\n", false)
	}
	if u.Scheme != "http" {
		return hc.reply(req, http.StatusBadRequest, nil, "evener-mcp: only http:// is forwarded; use CONNECT for "+printableASCII(u.Scheme, 40)+"\n", false)
	}
	if u.User != nil {
		return hc.reply(req, http.StatusBadRequest, nil, "evener-mcp: user information in the request URI is not forwarded\n", false)
	}
	if req.Header.Get("Upgrade") != "" {
		return hc.reply(req, http.StatusBadRequest, nil, "evener-mcp: protocol upgrades are not forwarded; use CONNECT\n", false)
	}
	host := u.Hostname()
	port := 80
	if ps := u.Port(); ps != "" {
		var err error
		if port, err = parsePort(ps); err != nil {
			return hc.reply(req, http.StatusBadRequest, nil, "evener-mcp: "+printableASCII(err.Error(), 200)+"\n", false)
		}
	}
	// The Host header may not name another host than the request line.
	// (A host the canonicaliser refuses is refused by the decision below.)
	if want, err := canonicalHost(host); err == nil {
		for _, hv := range hostValues {
			hh, hp, err := hostPortOf(hv)
			got := ""
			if err == nil {
				got, err = canonicalHost(hh)
			}
			if err != nil || got != want || hp != port {
				reason := fmt.Sprintf("Host header %q differs from the request-URI host %q", hv, u.Host)
				return hc.deny(req, "http", host, port, reason, false)
			}
		}
	}
	d := hc.p.decide(hc.p.ctx, host, port)
	if d.lookupFailed() {
		return hc.unreachable(req, lookupFailure(d), false)
	}
	if !d.Allow {
		return hc.deny(req, "http", host, port, d.Reason, false)
	}
	if d.Port != 0 {
		port = d.Port
	}

	ctx, cancel := context.WithCancel(hc.p.ctx)
	defer cancel()
	header := req.Header.Clone()
	stripHopByHop(header)
	if _, ok := header["User-Agent"]; !ok {
		header["User-Agent"] = []string{""} // the transport would add its own
	}
	var body *forwardBody
	if hasBody(req) {
		body = &forwardBody{hc: hc, rc: req.Body,
			wantContinue: req.ProtoAtLeast(1, 1) && strings.EqualFold(req.Header.Get("Expect"), "100-continue")}
	}
	var resp *http.Response
	var outreq *http.Request
	var err error
	addrs := d.Addrs
	if len(addrs) > maxDialAddrs {
		addrs = addrs[:maxDialAddrs]
	}
	if len(addrs) == 0 {
		err = errors.New("the decision named no address to dial")
	}
	for i, a := range addrs {
		outreq = &http.Request{
			Method: req.Method,
			URL: &url.URL{Scheme: "http", Host: netip.AddrPortFrom(a.Unmap(), uint16(port)).String(),
				Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: header,
			Host:   u.Host, // as the client wrote it; the Host header matched it
		}
		if body != nil {
			outreq.Body = body
			outreq.ContentLength = req.ContentLength
			if req.ContentLength < 0 {
				outreq.Trailer = req.Trailer
			}
		}
		outreq = outreq.WithContext(ctx)
		resp, err = hc.p.upstream.RoundTrip(outreq)
		var de *upstreamDialError
		// Try the next checked address only when nothing was sent.
		if err == nil || !errors.As(err, &de) || body != nil || i == len(addrs)-1 {
			break
		}
	}
	if err != nil {
		target := net.JoinHostPort(host, strconv.Itoa(port))
		var f upstreamFailure
		if de := (*upstreamDialError)(nil); errors.As(err, &de) {
			f = connectFailure(target, de.err)
		} else {
			f = upstreamFailure{http.StatusBadGateway, socksGeneralFailure,
				target + " failed: " + printableASCII(err.Error(), 200)}
		}
		return hc.unreachable(req, f, body != nil)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return hc.replyClosing(req, http.StatusBadGateway, "evener-mcp: upstream switched protocols; use CONNECT\n")
	}
	return hc.writeResponse(req, outreq, resp, body)
}

func (hc *httpClientConn) replyClosing(req *http.Request, code int, text string) bool {
	return hc.reply(req, code, nil, text, true)
}

// writeResponse relays an upstream response, choosing the framing for this
// client; false ends the connection.
func (hc *httpClientConn) writeResponse(req, outreq *http.Request, resp *http.Response, body *forwardBody) bool {
	stripHopByHop(resp.Header)
	client11 := req.ProtoAtLeast(1, 1)
	closeAfter := req.Close || !client11
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Request = outreq
	bodyAllowed := req.Method != http.MethodHead && resp.StatusCode >= 200 &&
		resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
	if bodyAllowed {
		switch {
		case resp.ContentLength >= 0:
			resp.TransferEncoding = nil
		case client11:
			resp.TransferEncoding = []string{"chunked"}
		default:
			resp.TransferEncoding = nil
			closeAfter = true // delimited by the close
		}
	}
	resp.Close = closeAfter
	resp.Body = &flushingBody{rc: resp.Body, bw: hc.bw}
	hc.wmu.Lock()
	hc.respStarted = true
	hc.wmu.Unlock()
	// writerOnly hides bw's ReadFrom: it would read the body straight into
	// bw's buffer, which flushingBody flushes.
	if err := resp.Write(writerOnly{hc.bw}); err != nil {
		return false
	}
	if err := hc.bw.Flush(); err != nil {
		return false
	}
	// The connection can carry another request only if this one's body was
	// read to its end (and so is no longer being read by the transport).
	if body != nil && !body.finished() {
		return false
	}
	return !closeAfter
}

// reply writes a short response of our own; false ends the connection.
func (hc *httpClientConn) reply(req *http.Request, code int, extra http.Header, text string, closeConn bool) bool {
	return hc.replyPhrase(req, code, http.StatusText(code), extra, text, closeConn)
}

// replyPhrase is reply with the status line's reason phrase given
// (printable ASCII only).
func (hc *httpClientConn) replyPhrase(req *http.Request, code int, phrase string, extra http.Header, text string, closeConn bool) bool {
	hc.wmu.Lock()
	hc.respStarted = true
	hc.wmu.Unlock()
	if req != nil && (hasBody(req) || req.Close || !req.ProtoAtLeast(1, 1)) {
		closeConn = true // the unread body makes the connection unusable
	}
	w := hc.bw
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\n", code, printableASCII(phrase, 400))
	w.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	for k, vs := range extra {
		for _, v := range vs {
			fmt.Fprintf(w, "%s: %s\r\n", k, printableASCII(v, 500))
		}
	}
	fmt.Fprintf(w, "Content-Length: %d\r\n", len(text))
	if closeConn {
		w.WriteString("Connection: close\r\n")
	}
	w.WriteString("\r\n")
	if req == nil || req.Method != http.MethodHead {
		w.WriteString(text)
	}
	if err := w.Flush(); err != nil {
		return false
	}
	return !closeConn
}

// hopByHop are the headers that describe one connection, not the message.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// stripHopByHop deletes the hop-by-hop headers and those Connection names.
func stripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// forwardBody is a client's request body as handed to the transport: it
// sends "100 Continue" when first read if the client asked for it, and is
// not closed by the transport (the client connection owns it).
type forwardBody struct {
	hc           *httpClientConn
	rc           io.ReadCloser
	wantContinue bool

	mu     sync.Mutex // guards read, eof and closed
	read   bool
	eof    bool
	closed bool
}

func (b *forwardBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, errors.New("egress: request body closed")
	}
	first := !b.read
	b.read = true
	b.mu.Unlock()
	if first && b.wantContinue {
		b.hc.sendContinue()
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *forwardBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *forwardBody) finished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

func (hc *httpClientConn) sendContinue() {
	hc.wmu.Lock()
	defer hc.wmu.Unlock()
	if hc.respStarted || hc.continueSent {
		return
	}
	hc.continueSent = true
	io.WriteString(hc.c, "HTTP/1.1 100 Continue\r\n\r\n")
}

type writerOnly struct{ io.Writer }

// flushingBody flushes what was written of the response before each read of
// the upstream body, so a streamed response (server-sent events, a slow
// download) reaches the client as it arrives.
type flushingBody struct {
	rc io.ReadCloser
	bw *bufio.Writer
}

func (f *flushingBody) Read(p []byte) (int, error) {
	if f.bw.Buffered() > 0 {
		if err := f.bw.Flush(); err != nil {
			return 0, err
		}
	}
	return f.rc.Read(p)
}

func (f *flushingBody) Close() error { return f.rc.Close() }
