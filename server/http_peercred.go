package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/evener-dev/evener-mcp/session"
)

// Loopback is not an identity: every local account can reach a loopback
// listener. `serve` therefore identifies the process at the other end of
// each TCP connection by the owner of its socket, as the kernel lists it in
// /proc/net/tcp and /proc/net/tcp6, and serves only the server's own user
// and root (docs/http.md, "Many agents, one server"), never through a
// process the server itself started (docs/http.md, "Never its own
// processes"). A peer whose socket cannot
// be found (gone, closed before it was looked up, another network
// namespace) is refused: fail closed.

// tcpSocket is one line of /proc/net/tcp or /proc/net/tcp6.
type tcpSocket struct {
	Local, Remote netip.AddrPort
	State         uint8
	UID           uint32
	Inode         uint64
}

// maxProcNetLines bounds the lines one table may hold before the parse
// gives up (a busy host has tens of thousands; this is far above).
const maxProcNetLines = 1 << 20

// parseProcNetTCP parses the kernel's TCP socket table (the header line
// and one line per socket: "sl local rem st tx:rx tr:when retrnsmt uid
// timeout inode ..."). Addresses are hex in host byte order per 32-bit
// word, ports hex. A malformed line is an error: a table this code does not
// understand must refuse every peer rather than guess.
func parseProcNetTCP(b []byte) ([]tcpSocket, error) {
	var out []tcpSocket
	for n := 0; len(b) > 0; n++ {
		if n > maxProcNetLines {
			return nil, errors.New("socket table: too many lines")
		}
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if n == 0 && string(f[0]) == "sl" {
			continue // the header
		}
		s, err := parseTCPLine(f)
		if err != nil {
			return nil, fmt.Errorf("socket table line %d: %w", n+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseTCPLine(f [][]byte) (tcpSocket, error) {
	var s tcpSocket
	if len(f) < 10 {
		return s, fmt.Errorf("%d fields, want at least 10", len(f))
	}
	if len(f[0]) < 2 || f[0][len(f[0])-1] != ':' {
		return s, fmt.Errorf("slot %q", f[0])
	}
	var err error
	if s.Local, err = parseHexAddrPort(f[1]); err != nil {
		return s, fmt.Errorf("local address: %w", err)
	}
	if s.Remote, err = parseHexAddrPort(f[2]); err != nil {
		return s, fmt.Errorf("remote address: %w", err)
	}
	if len(f[3]) != 2 {
		return s, fmt.Errorf("state %q", f[3])
	}
	st, err := strconv.ParseUint(string(f[3]), 16, 8)
	if err != nil {
		return s, fmt.Errorf("state %q", f[3])
	}
	s.State = uint8(st)
	uid, err := strconv.ParseUint(string(f[7]), 10, 32)
	if err != nil {
		return s, fmt.Errorf("uid %q", f[7])
	}
	s.UID = uint32(uid)
	if s.Inode, err = strconv.ParseUint(string(f[9]), 10, 64); err != nil {
		return s, fmt.Errorf("inode %q", f[9])
	}
	return s, nil
}

// parseHexAddrPort reads "0100007F:1F90" (IPv4) or 32 hex digits and a
// port (IPv6): each 32-bit word of the address is printed as a number in
// the host's byte order.
func parseHexAddrPort(b []byte) (netip.AddrPort, error) {
	i := bytes.IndexByte(b, ':')
	if i < 0 || len(b)-i-1 != 4 {
		return netip.AddrPort{}, fmt.Errorf("%q: want HEXADDR:PORT", b)
	}
	port, err := strconv.ParseUint(string(b[i+1:]), 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: port", b)
	}
	hex := b[:i]
	if len(hex) != 8 && len(hex) != 32 {
		return netip.AddrPort{}, fmt.Errorf("%q: address of %d digits", b, len(hex))
	}
	var raw [16]byte
	for w := 0; w < len(hex)/8; w++ {
		v, err := strconv.ParseUint(string(hex[w*8:w*8+8]), 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("%q: address", b)
		}
		binary.NativeEndian.PutUint32(raw[w*4:], uint32(v))
	}
	var a netip.Addr
	if len(hex) == 8 {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		a = netip.AddrFrom16(raw)
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// errPeerUnknown: no live socket in the tables is the other end of the
// connection.
var errPeerUnknown = errors.New("the peer's socket is not in the kernel's tables (closed, or in another network namespace)")

// findPeer finds the socket at the other end of a connection from local
// (this server's end) to remote among socks: the one whose own local end is
// remote and whose remote end is local. A socket without an inode is an
// orphan (its process closed it; the kernel then lists uid 0), and a
// time-wait entry has neither: neither identifies anyone, so neither is
// accepted.
func findPeer(socks []tcpSocket, local, remote netip.AddrPort) (tcpSocket, bool) {
	local = unmapAP(local)
	remote = unmapAP(remote)
	for _, s := range socks {
		if unmapAP(s.Local) == remote && unmapAP(s.Remote) == local && s.Inode != 0 {
			return s, true
		}
	}
	return tcpSocket{}, false
}

func unmapAP(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// peerSocketOf is the socket at the other end of c, when that end is on
// this host; errPeerUnknown when it is not found.
func peerSocketOf(c net.Conn) (tcpSocket, error) {
	l, ok1 := c.LocalAddr().(*net.TCPAddr)
	r, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return tcpSocket{}, fmt.Errorf("not a TCP connection (%T)", c.LocalAddr())
	}
	return lookupPeerSocket(l.AddrPort(), r.AddrPort())
}

// The audit rules of a refused peer.
const (
	rulePeerUID     = "peer-uid"     // another user's socket, or none found
	rulePeerProcess = "peer-process" // a process this server started
)

// peerPolicy decides which peers a server serves: its own user and root,
// never through a process the server itself started.
type peerPolicy struct {
	allowed []uint32
	// remoteOK: the listener is beyond loopback (a bearer token is
	// required) and a peer from another host, which has no socket here,
	// is left to the token.
	remoteOK bool
	lookup   func(net.Conn) (tcpSocket, error)
	// origin, when set, says why the process holding an allowed peer's
	// socket must be refused ("" when it need not): one this server
	// started (http_peercred_origin_linux.go). An error refuses too.
	origin  func(tcpSocket) (string, error)
	refused func(r *http.Request, rule, why string)
}

type peerConnKey struct{}

// peerConn caches one connection's verdict: HTTP/1.1 keeps a connection
// for many requests, and its peer does not change.
type peerConn struct {
	c    net.Conn
	once sync.Once
	rule string // the audit rule of a refusal
	why  string // "" when allowed
}

// connContext remembers the connection a request arrived on (for
// http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, peerConnKey{}, &peerConn{c: c})
}

// verdict is why c's peer is refused, and under which rule; "" when it
// is served.
func (p *peerPolicy) verdict(c net.Conn) (rule, why string) {
	s, err := p.lookup(c)
	if err != nil {
		if errors.Is(err, errPeerUnknown) && p.remoteOK {
			if r, ok := c.RemoteAddr().(*net.TCPAddr); ok && !r.IP.IsLoopback() {
				return "", "" // another host: the bearer token decides
			}
		}
		return rulePeerUID, fmt.Sprintf("peer %s: %v", c.RemoteAddr(), err)
	}
	allowed := false
	for _, a := range p.allowed {
		allowed = allowed || s.UID == a
	}
	if !allowed {
		return rulePeerUID, fmt.Sprintf("peer %s belongs to uid %d, not this server's user or root", c.RemoteAddr(), s.UID)
	}
	if p.origin != nil {
		why, err := p.origin(s)
		if err != nil {
			return rulePeerProcess, fmt.Sprintf("peer %s: %v", c.RemoteAddr(), err)
		}
		if why != "" {
			return rulePeerProcess, fmt.Sprintf("peer %s: %s", c.RemoteAddr(), why)
		}
	}
	return "", ""
}

// guard answers 403 to every request whose connection's peer is not
// allowed, before anything else reads it.
func (p *peerPolicy) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc, _ := r.Context().Value(peerConnKey{}).(*peerConn)
		rule, why := rulePeerUID, "no connection recorded for this request"
		if pc != nil {
			pc.once.Do(func() { pc.rule, pc.why = p.verdict(pc.c) })
			rule, why = pc.rule, pc.why
		}
		if why != "" {
			if p.refused != nil {
				p.refused(r, rule, why)
			}
			w.Header().Set("Connection", "close")
			msg := "refused: this server serves only the user who started it (and root)"
			if rule == rulePeerProcess {
				msg = "refused: a process this server started cannot open a session of its own"
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusalLog rate-limits the audit records of refused peers: a local user
// looping on connect must not fill the disk. At most burst records a
// minute; the next record after a quiet spell says how many were dropped.
type refusalLog struct {
	mu      sync.Mutex // guards window, n and dropped
	window  time.Time
	n       int
	dropped int
	burst   int
}

// admit reports whether to write a record now, and how many were dropped
// before it.
func (l *refusalLog) admit(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Minute {
		l.window, l.n = now, 0
	}
	if l.n >= l.burst {
		l.dropped++
		return false, 0
	}
	l.n++
	d := l.dropped
	l.dropped = 0
	return true, d
}

// auditPeerRefused records a request refused for who sent it (the
// transport's own audit stream, session "serve"), under rule.
func auditPeerRefused(a *session.Audit, rule, why string, dropped int) {
	if dropped > 0 {
		why = fmt.Sprintf("%s (and %d more refusals not recorded)", why, dropped)
	}
	a.Write(session.Record{Tool: "serve", Decision: "refused", Rule: rule, Command: session.Truncate(why, 300)})
}
