package egress

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startBlackhole returns a port on 127.0.0.1 where a connect times out: a
// listener with the smallest accept queue that never accepts, its queue
// filled, so the kernel drops every further SYN (a real timeout on
// loopback, no fake dialer).
func startBlackhole(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// A queue of backlog 0 holds one connection; fill it until a connect
	// times out (bounded: a few tries, each a fraction of a second).
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return port
		}
		t.Fatalf("filling the blackhole's queue: %v", err)
	}
	t.Fatal("the blackhole's accept queue never filled")
	return 0
}
