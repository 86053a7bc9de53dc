package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// maxBridgeConns bounds the connections a session's sandboxes may hold open
// through one bridge socket at once: each costs the server descriptors and
// proxy buffers, and a command could otherwise open them by the thousand.
const maxBridgeConns = 512

// socketBridge exposes a session's proxies as two Unix sockets in a private
// directory, for the launcher to bind into a sandbox whose network
// namespace has no other way out. Each connection is relayed to the
// proxy's loopback port.
type socketBridge struct {
	dir         string
	HTTPSocket  string
	SOCKSSocket string
	lns         []net.Listener
	mu          sync.Mutex // guards conns and closed
	conns       map[net.Conn]struct{}
	closed      bool
	wg          sync.WaitGroup
}

// newBridge creates the sockets under parent (a directory only this user
// can enter) relaying to httpAddr and socksAddr.
func newBridge(parent, httpAddr, socksAddr string) (*socketBridge, error) {
	dir, err := os.MkdirTemp(parent, "evener-egress-")
	if err != nil {
		return nil, fmt.Errorf("egress bridge: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("egress bridge: %w", err)
	}
	b := &socketBridge{dir: dir, HTTPSocket: filepath.Join(dir, "http.sock"), SOCKSSocket: filepath.Join(dir, "socks.sock"), conns: map[net.Conn]struct{}{}}
	for _, l := range []struct{ sock, addr string }{{b.HTTPSocket, httpAddr}, {b.SOCKSSocket, socksAddr}} {
		ln, err := net.Listen("unix", l.sock)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("egress bridge: %w", err)
		}
		b.lns = append(b.lns, ln)
		b.wg.Add(1)
		go b.serve(ln, l.addr)
	}
	return b, nil
}

func (b *socketBridge) track(c net.Conn, add bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if add {
		if b.closed {
			return false
		}
		b.conns[c] = struct{}{}
	} else {
		delete(b.conns, c)
	}
	return true
}

func (b *socketBridge) serve(ln net.Listener, addr string) {
	defer b.wg.Done()
	slots := make(chan struct{}, maxBridgeConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close() // over the cap: refused at once
			continue
		}
		go func() {
			defer func() { <-slots }()
			defer c.Close()
			if !b.track(c, true) {
				return
			}
			defer b.track(c, false)
			up, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer up.Close()
			if !b.track(up, true) {
				return
			}
			defer b.track(up, false)
			relay(c, up)
		}()
	}
}

// relay copies both ways until either side is done.
func relay(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		type closeWriter interface{ CloseWrite() error }
		if cw, ok := dst.(closeWriter); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// Close stops the listeners, cuts every relayed connection and removes
// the sockets.
func (b *socketBridge) Close() error {
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	var errs []error
	for _, ln := range b.lns {
		errs = append(errs, ln.Close())
	}
	b.wg.Wait()
	errs = append(errs, os.RemoveAll(b.dir))
	return errors.Join(errs...)
}
