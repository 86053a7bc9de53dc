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
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunRelay is the hidden helper's body: listen on the namespace's loopback,
// relay to the bridge sockets, run the command, exit with its status.
func RunRelay(args []string) int {
	// Not dumpable: the command runs as the same user beside it, and must
	// not read or write this process's memory through /proc.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "evener-mcp relay: no command")
		return 125
	}
	for _, l := range []struct {
		port int
		sock string
	}{{RelayHTTPPort, relayHTTPSock}, {RelaySOCKSPort, relaySOCKSSock}} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(l.port))
		if err != nil {
			fmt.Fprintf(os.Stderr, "evener-mcp relay: listen on port %d: %v\n", l.port, err)
			return 125
		}
		go serveRelay(ln, l.sock)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "evener-mcp relay: %v\n", err)
		return 127
	}
	return 0
}

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
		return nil, fmt.Errorf("refused by the egress proxy (SOCKS reply %d)", hdr[1])
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
