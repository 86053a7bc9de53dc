package egress

// The SOCKS5 proxy (RFC 1928 with RFC 1929 username/password), written here
// rather than on a library: the proxy must decide a domain name as a name (no
// local lookup), dial the address the decision checked, bound the handshake
// in time, answer SOCKS4 legibly, and track every connection for Close; the
// protocol subset that needs (CONNECT only) is small.
//
// Handshake reads are exact (no read-ahead buffer), so after the reply the
// tunnel is two bare TCP connections and runs on splice(2).

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// socksHandshakeTimeout bounds everything before the tunnel: greeting,
// authentication, request, decision and dial.
const socksHandshakeTimeout = 30 * time.Second

// SOCKS5 reply codes (RFC 1928 section 6).
const (
	socksSucceeded        = 0x00
	socksGeneralFailure   = 0x01
	socksNotAllowed       = 0x02 // connection not allowed by ruleset
	socksNetUnreachable   = 0x03
	socksHostUnreachable  = 0x04
	socksConnRefused      = 0x05
	socksTTLExpired       = 0x06 // the only RFC 1928 code for a timeout
	socksCmdNotSupported  = 0x07
	socksAddrNotSupported = 0x08
)

const (
	socksCmdConnect   = 0x01
	socksCmdBind      = 0x02
	socksCmdAssociate = 0x03

	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04

	socksMethodUserPass     = 0x02
	socksMethodNoAcceptable = 0xff

	socks4Rejected = 0x5b // SOCKS4 "request rejected or failed"
)

// socksRequest is a parsed CONNECT request: the target exactly as sent (an
// address literal for the address types, the name's bytes for a domain).
type socksRequest struct {
	host string
	port int
}

// socksRefusal is a request the protocol layer refuses after reading its
// target (SOCKS4, BIND, UDP ASSOCIATE): the caller reports it, then sends
// reply (reported first, so the violation is recorded before the client
// can see the refusal).
type socksRefusal struct {
	verb   string // "socks5 BIND"
	host   string
	port   int
	reason string
	reply  []byte
}

func (r *socksRefusal) Error() string { return r.verb + ": " + r.reason }

// socksNegotiate runs one client's handshake up to its request: method
// selection (username/password only), RFC 1929 authentication, then the
// request. It answers every failure itself but a *socksRefusal (a refused
// request with a known target, whose reply the caller sends after reporting
// it); for a CONNECT it returns the target and leaves the reply to the caller.
func socksNegotiate(rw io.ReadWriter, user, pass string) (socksRequest, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(rw, hdr[:1]); err != nil {
		return socksRequest{}, err
	}
	switch hdr[0] {
	case 5:
	case 4:
		return socksRequest{}, socks4Refuse(rw)
	default:
		return socksRequest{}, fmt.Errorf("socks: unsupported version %d", hdr[0])
	}

	// Greeting: NMETHODS, METHODS.
	if _, err := io.ReadFull(rw, hdr[1:2]); err != nil {
		return socksRequest{}, err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(rw, methods); err != nil {
		return socksRequest{}, err
	}
	offered := false
	for _, m := range methods {
		if m == socksMethodUserPass {
			offered = true
		}
	}
	if !offered {
		rw.Write([]byte{5, socksMethodNoAcceptable})
		return socksRequest{}, errors.New("socks: client offered no username/password authentication")
	}
	if _, err := rw.Write([]byte{5, socksMethodUserPass}); err != nil {
		return socksRequest{}, err
	}

	// RFC 1929: VER=1, ULEN, UNAME, PLEN, PASSWD.
	if _, err := io.ReadFull(rw, hdr[:2]); err != nil {
		return socksRequest{}, err
	}
	if hdr[0] != 1 {
		rw.Write([]byte{1, 1})
		return socksRequest{}, fmt.Errorf("socks: bad authentication version %d", hdr[0])
	}
	uname := make([]byte, hdr[1])
	if _, err := io.ReadFull(rw, uname); err != nil {
		return socksRequest{}, err
	}
	if _, err := io.ReadFull(rw, hdr[:1]); err != nil {
		return socksRequest{}, err
	}
	passwd := make([]byte, hdr[0])
	if _, err := io.ReadFull(rw, passwd); err != nil {
		return socksRequest{}, err
	}
	u := subtle.ConstantTimeCompare(uname, []byte(user))
	w := subtle.ConstantTimeCompare(passwd, []byte(pass))
	if u&w != 1 {
		rw.Write([]byte{1, 1})
		return socksRequest{}, errors.New("socks: wrong credentials")
	}
	if _, err := rw.Write([]byte{1, 0}); err != nil {
		return socksRequest{}, err
	}

	// Request: VER, CMD, RSV, ATYP, DST.ADDR, DST.PORT.
	var rq [4]byte
	if _, err := io.ReadFull(rw, rq[:]); err != nil {
		return socksRequest{}, err
	}
	if rq[0] != 5 {
		socksReply(rw, socksGeneralFailure)
		return socksRequest{}, fmt.Errorf("socks: bad request version %d", rq[0])
	}
	var host string
	switch rq[3] {
	case socksAtypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(rw, a[:]); err != nil {
			return socksRequest{}, err
		}
		host = netip.AddrFrom4(a).String()
	case socksAtypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(rw, a[:]); err != nil {
			return socksRequest{}, err
		}
		host = netip.AddrFrom16(a).String()
	case socksAtypDomain:
		if _, err := io.ReadFull(rw, hdr[:1]); err != nil {
			return socksRequest{}, err
		}
		name := make([]byte, hdr[0])
		if _, err := io.ReadFull(rw, name); err != nil {
			return socksRequest{}, err
		}
		host = string(name)
	default:
		socksReply(rw, socksAddrNotSupported)
		return socksRequest{}, fmt.Errorf("socks: unsupported address type %d", rq[3])
	}
	if _, err := io.ReadFull(rw, hdr[:2]); err != nil {
		return socksRequest{}, err
	}
	port := int(hdr[0])<<8 | int(hdr[1])

	switch rq[1] {
	case socksCmdConnect:
		if host == "" {
			socksReply(rw, socksGeneralFailure)
			return socksRequest{}, errors.New("socks: empty domain name")
		}
		return socksRequest{host: host, port: port}, nil
	case socksCmdBind:
		return socksRequest{}, &socksRefusal{"socks5 BIND", host, port, "BIND is not supported (CONNECT only)", socksReplyBytes(socksCmdNotSupported)}
	case socksCmdAssociate:
		return socksRequest{}, &socksRefusal{"socks5 UDP ASSOCIATE", host, port, "UDP ASSOCIATE is not supported (CONNECT only)", socksReplyBytes(socksCmdNotSupported)}
	default:
		return socksRequest{}, &socksRefusal{"socks5 command " + strconv.Itoa(int(rq[1])), host, port, "unknown command (CONNECT only)", socksReplyBytes(socksCmdNotSupported)}
	}
}

// socks4Refuse reads a SOCKS4/4a request after its version byte (CD,
// DSTPORT, DSTIP, USERID NUL, for 4a HOST NUL) and refuses it with
// "request rejected"; a truncated request is answered too.
func socks4Refuse(rw io.ReadWriter) error {
	rejected := []byte{0, socks4Rejected, 0, 0, 0, 0, 0, 0}
	var b [7]byte
	if _, err := io.ReadFull(rw, b[:]); err != nil {
		rw.Write(rejected)
		return errors.New("socks: SOCKS4 request refused (truncated)")
	}
	port := int(b[1])<<8 | int(b[2])
	host := netip.AddrFrom4([4]byte{b[3], b[4], b[5], b[6]}).String()
	const why = "SOCKS4 is not supported (SOCKS5 with authentication only)"
	if _, err := readNULTerminated(rw, 255); err != nil { // USERID
		return &socksRefusal{"socks4 CONNECT", host, port, why, rejected}
	}
	if b[3] == 0 && b[4] == 0 && b[5] == 0 && b[6] != 0 { // SOCKS4a: a name follows
		if name, err := readNULTerminated(rw, 255); err == nil {
			host = name
		}
	}
	return &socksRefusal{"socks4 CONNECT", host, port, why, rejected}
}

func readNULTerminated(r io.Reader, max int) (string, error) {
	var out []byte
	var c [1]byte
	for len(out) <= max {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return "", err
		}
		if c[0] == 0 {
			return string(out), nil
		}
		out = append(out, c[0])
	}
	return "", errors.New("socks: field too long")
}

// socksReply writes a reply with an all-zero bound address: clients of
// CONNECT do not use it, and it would tell the sandbox the host's address.
func socksReply(w io.Writer, code byte) error {
	_, err := w.Write(socksReplyBytes(code))
	return err
}

func socksReplyBytes(code byte) []byte {
	return []byte{5, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0}
}

func (p *proxyPair) serveSOCKSConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(socksHandshakeTimeout))
	req, err := socksNegotiate(c, p.socksUser, p.socksPassword)
	if err != nil {
		var r *socksRefusal
		if errors.As(err, &r) {
			p.refused(r.verb, r.host, r.port, r.reason)
			c.Write(r.reply)
		}
		lingerClose(c)
		return
	}
	d := p.decide(p.ctx, req.host, req.port)
	if d.lookupFailed() {
		// Allowed, but the name did not resolve: no violation.
		socksReply(c, lookupFailure(d).socks)
		lingerClose(c)
		return
	}
	if !d.Allow {
		p.refused("socks5 CONNECT", req.host, req.port, d.Reason)
		socksReply(c, socksNotAllowed)
		lingerClose(c)
		return
	}
	up, err := p.dialDecision(p.ctx, d, req.port)
	if err != nil {
		socksReply(c, connectFailure("", err).socks)
		lingerClose(c)
		return
	}
	defer p.untrack(up)
	if err := socksReply(c, socksSucceeded); err != nil {
		up.Close()
		return
	}
	c.SetDeadline(time.Time{})
	p.pipeTunnel(c, nil, up)
}
