package egress

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestBridgeRelaysAndCaps: a connection through the bridge socket reaches
// the TCP address behind it; beyond maxBridgeConns open at once, further
// connections are closed immediately; Close cuts the open ones and removes
// the sockets.
func TestBridgeRelaysAndCaps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }() // echo, held open
		}
	}()
	b, err := newBridge(t.TempDir(), ln.Addr().String(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < maxBridgeConns; i++ {
		c, err := net.Dial("unix", b.HTTPSocket)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Every held connection is relayed (echo answers).
	for _, c := range conns[:5] {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("relay: %q %v", buf, err)
		}
	}
	// Wait until the bridge has accepted them all, then one more is refused.
	var refused bool
	for i := 0; i < 50 && !refused; i++ {
		extra, err := net.Dial("unix", b.HTTPSocket)
		if err != nil {
			t.Fatal(err)
		}
		extra.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, rerr := extra.Read(make([]byte, 1))
		refused = rerr == io.EOF
		extra.Close()
	}
	if !refused {
		t.Errorf("a connection over the cap was not refused")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err == nil {
		t.Errorf("Close left a relayed connection open")
	}
	if _, err := net.Dial("unix", b.HTTPSocket); err == nil {
		t.Errorf("the socket still accepts after Close")
	}
}
