package confine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
)

// The OS-independent half of the egress bridge: relaying a loopback
// listener to a bridge socket (the relay inside a Linux sandbox, the
// loopback forwarder of a macOS session) and the SOCKS5 connect helper
// GIT_SSH_COMMAND runs.

func serveRelay(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer up.Close()
			pipe(c, up)
		}()
	}
}

// pipe copies both ways until either side closes.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// RunConnect is the ProxyCommand of GIT_SSH_COMMAND: a SOCKS5 CONNECT to
// host:port through the relay, with the credentials in ALL_PROXY, then
// stdin/stdout piped through.
func RunConnect(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: evener-mcp "+ConnectSubcmd+" HOST PORT")
		return 2
	}
	port, err := strconv.Atoi(args[1])
	if err != nil || port < 1 || port > 65535 {
		fmt.Fprintln(os.Stderr, "evener-mcp connect: bad port")
		return 2
	}
	u, err := url.Parse(os.Getenv("ALL_PROXY"))
	if err != nil || u.User == nil {
		fmt.Fprintln(os.Stderr, "evener-mcp connect: ALL_PROXY carries no SOCKS credentials")
		return 2
	}
	pass, _ := u.User.Password()
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp connect: %v\n", err)
		return 1
	}
	defer c.Close()
	r, err := socks5Connect(c, u.User.Username(), pass, args[0], port)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evener-mcp connect: %s:%d: %v\n", args[0], port, err)
		return 1
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(c, os.Stdin); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	// r may already hold the server's first bytes (an SSH banner).
	go func() { _, _ = io.Copy(os.Stdout, r); done <- struct{}{} }()
	<-done
	return 0
}

// socks5Connect performs an RFC 1928 CONNECT by domain name with RFC 1929
// username/password authentication, and returns the reader to continue
// from (it may hold bytes the server sent right after its reply).
func socks5Connect(c net.Conn, user, pass, host string, port int) (*bufio.Reader, error) {
	if len(user) > 255 || len(pass) > 255 || len(host) > 255 {
		return nil, errors.New("credential or host too long")
	}
	if _, err := c.Write([]byte{5, 1, 2}); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	var sel [2]byte
	if _, err := io.ReadFull(r, sel[:]); err != nil || sel[0] != 5 || sel[1] != 2 {
		return nil, errors.New("proxy refused username/password authentication")
	}
	auth := append([]byte{1, byte(len(user))}, user...)
	auth = append(append(auth, byte(len(pass))), pass...)
	if _, err := c.Write(auth); err != nil {
		return nil, err
	}
	var st [2]byte
	if _, err := io.ReadFull(r, st[:]); err != nil || st[1] != 0 {
		return nil, errors.New("authentication failed")
	}
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[1] != 0 {
		return nil, fmt.Errorf("%s (SOCKS reply %d)", socksReplyText(hdr[1]), hdr[1])
	}
	var skip int
	switch hdr[3] {
	case 1:
		skip = 4 + 2
	case 4:
		skip = 16 + 2
	case 3:
		l, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		skip = int(l) + 2
	}
	if _, err := io.CopyN(io.Discard, r, int64(skip)); err != nil {
		return nil, err
	}
	return r, nil
}

// loopbackForwarder listens on two loopback ports and relays each
// connection to one of the bridge's Unix sockets (the proxies beyond it
// ask for the session's credentials).
type loopbackForwarder struct {
	httpPort, socksPort int
	lns                 []net.Listener
}

func newLoopbackForwarder(httpSock, socksSock string) (*loopbackForwarder, error) {
	f := &loopbackForwarder{}
	for _, sock := range []string{httpSock, socksSock} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return nil, err
		}
		f.lns = append(f.lns, ln)
		go serveRelay(ln, sock)
	}
	f.httpPort = f.lns[0].Addr().(*net.TCPAddr).Port
	f.socksPort = f.lns[1].Addr().(*net.TCPAddr).Port
	return f, nil
}

func (f *loopbackForwarder) Close() {
	for _, ln := range f.lns {
		ln.Close()
	}
}

// socksReplyText tells a policy refusal from an allowed destination that
// could not be reached (docs/network.md, "The network").
func socksReplyText(code byte) string {
	switch code {
	case 2:
		return "refused by the session's allowlist"
	case 3, 4:
		return "allowed, but the destination is unreachable (its name did not resolve, or no route)"
	case 5:
		return "allowed, but the destination refused the connection"
	case 6:
		return "allowed, but the connection to the destination timed out"
	}
	return "the egress proxy failed the connection"
}
